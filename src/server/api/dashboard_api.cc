#include "server/api/dashboard_api.h"

#include <array>
#include <utility>

namespace corral::server {

namespace {

bool IsDigits(std::string_view s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos;
}

// "/api/v1/jobs/<digits>" + `tail` ("" or "/logs", "/cancel").
bool IsJobPath(std::string_view path, std::string_view tail) {
  constexpr std::string_view kPrefix = "/api/v1/jobs/";
  if (path.substr(0, kPrefix.size()) != kPrefix || path.size() < kPrefix.size() + tail.size()) {
    return false;
  }
  if (path.substr(path.size() - tail.size()) != tail) return false;
  return IsDigits(path.substr(kPrefix.size(), path.size() - kPrefix.size() - tail.size()));
}

}  // namespace

bool CookieMayAuthenticate(std::string_view method, std::string_view path) {
  static constexpr std::array<std::string_view, 13> kReads = {
      "/api/v1/whoami",         "/api/v1/jobs",          "/api/v1/queue",
      "/api/v1/nodes",          "/api/v1/projects",      "/api/v1/policy",
      "/api/v1/environments",   "/api/v1/events/stream", "/api/v1/summary",
      "/api/v1/gpus",           "/api/v1/usage",         "/api/v1/capacity/forecast",
      "/api/v1/summary/history"};
  if (method == "GET" || method == "HEAD") {
    for (std::string_view r : kReads) {
      if (path == r) return true;
    }
    return IsJobPath(path, "") || IsJobPath(path, "/logs") || IsJobPath(path, "/gpus") ||
           IsJobPath(path, "/gpu-history") || IsJobPath(path, "/metrics");
  }
  if (method == "POST") {
    // what-if only computes (admins only, checked by its route): nothing changes. A job's
    // report and checkpoint are the job's own (its token) or a script's: not the browser's.
    return path == "/api/v1/jobs" || IsJobPath(path, "/cancel") ||
           path == "/api/v1/capacity/what-if";
  }
  return false;
}

std::string EventStreamFrame(std::string_view event, int64_t id, const nlohmann::json& data) {
  const bool plain = !event.empty() && event.find_first_not_of("abcdefghijklmnopqrstuvwxyz_") ==
                                           std::string_view::npos;
  std::string out = "id: " + std::to_string(id) + "\nevent: ";
  out += plain ? event : "message";
  out += "\ndata: ";
  out += data.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  out += "\n\n";
  return out;
}

EventStreams::Ticket::~Ticket() {
  if (owner_ == nullptr) return;
  std::lock_guard lock(owner_->mu_);
  --owner_->open_;
}

EventStreams::Ticket EventStreams::Open() {
  std::lock_guard lock(mu_);
  if (shutdown_ || open_ >= max_streams_) return Ticket(nullptr);
  ++open_;
  return Ticket(this);
}

bool EventStreams::Wait(std::chrono::milliseconds period) {
  std::unique_lock lock(mu_);
  return !wake_.wait_for(lock, period, [this] { return shutdown_; });
}

void EventStreams::Shutdown() {
  {
    std::lock_guard lock(mu_);
    shutdown_ = true;
  }
  wake_.notify_all();
}

int EventStreams::open() const {
  std::lock_guard lock(mu_);
  return open_;
}

}  // namespace corral::server
