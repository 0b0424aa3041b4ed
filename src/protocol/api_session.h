// The sessions of the API (docs/sessions.md), with their JSON codec: what GET
// /api/v1/sessions[/ID] and POST /api/v1/sessions answer. The server builds them
// (Controller::SessionView, ListSessions), the HTTP API adds the URLs, and the HTTP API and the
// CLI encode and decode them with this codec.
//
//   {"id": 7, "name": "notebook", "user": "alice", "project": "vision", "state": "running",
//    "reason": "...", "environment": "jupyter@2" (null: none), "path": "/sessions/7/",
//    "idle_timeout_s": 3600, "submit_time": 1700000000, "start_time": 1700000010 (once started),
//    "stopping": true (only while being stopped),
//    "node": "gpu-01", "address": "10.0.0.5", "port": 41000      (null while not placed),
//    "last_activity": 1700000500 (null unless running),
//    "idle_notice": {"time": ..., "stops_at": ...} (null unless given),
//    "pending_reason": {"code", "message"} (only while the scheduler has it waiting),
//    "token": "..." (its owner only),
//    "url": "https://corral:8081/sessions/7/", "direct_url": "http://10.0.0.5:41000/..."
//    (its owner only, once placed; null otherwise)}
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/units.h"
#include "model/states.h"
#include "protocol/api_job.h"

namespace corral::protocol {

// The notice an idle session got (docs/sessions.md, "Idle sessions").
struct IdleNotice {
  Seconds time{0};      // when it was given
  Seconds stops_at{0};  // when the session stops unless used
  bool operator==(const IdleNotice&) const = default;
};

struct SessionView {
  JobId id;
  std::string name;
  std::string user;
  std::string project;
  model::JobState state = model::JobState::kPending;
  std::string reason;       // the job's last transition's
  std::string environment;  // "NAME@VERSION"; "" for none (shown null)
  std::string path;         // its URL path on the session gateway
  Seconds idle_timeout{0};  // 0: never
  Seconds submit_time{0};
  std::optional<Seconds> start_time;
  bool stopping = false;  // being cancelled
  // Where it runs: set once its task is placed; address and port once its port is given.
  std::optional<std::string> node;
  std::optional<std::string> address;
  std::optional<int> port;
  std::optional<Seconds> last_activity;  // while running
  std::optional<IdleNotice> idle_notice;
  std::optional<PendingReason> pending_reason;
  std::optional<std::string> token;  // the app's secret: shown to its owner only
  // Filled by the HTTP API, which knows the gateway's address: "" and none from the server.
  std::string url;
  std::optional<std::string> direct_url;
  bool operator==(const SessionView&) const = default;
};

nlohmann::json ToJson(const SessionView& session);
nlohmann::json ToJson(const std::vector<SessionView>& sessions);
// Errors name the field: "session: field 'idle_notice.stops_at': is required", "sessions:
// field '[0].state': unknown job state ...".
Result<SessionView> ParseSessionView(const nlohmann::json& json);
Result<std::vector<SessionView>> ParseSessionViews(const nlohmann::json& json);

}  // namespace corral::protocol
