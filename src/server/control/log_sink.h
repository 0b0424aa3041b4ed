// Where the agents' task output goes: one file per task run and stream under the logs folder,
// <logs>/<job>/<task>-g<generation>.<stream> (docs/control-plane.md, "Task output").
//
// The sink keeps its own record of which node may write which allocation's output (opened when
// a task run is placed, closed when it ends: output can still arrive after the end is known, so
// the newest kRecentlyClosed closed runs stay writable). Heartbeats write through it before
// they take the controller's lock: no disk I/O happens under that lock, and a task's last
// lines are on disk before the report that ends it is applied.
//
// Thread-safe. The file is chosen from the sink's own records, never from a chunk: an agent
// writes only its own tasks' output, at the offsets it read it (a chunk sent twice lands on the
// same bytes), and never past the end of what is there (no sparse files from bad input).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "common/ids.h"
#include "protocol/agent_messages.h"

namespace corral::server {

class LogSink {
 public:
  // A task run whose output may be written, and the only node that may write it.
  struct Target {
    JobId job;
    int task_index = 0;
    int64_t generation = 0;
    std::string node;
  };
  // How many closed runs stay writable (the oldest allocation ids are dropped first).
  static constexpr size_t kRecentlyClosed = 10000;

  // `dir` empty: output is dropped (the server keeps no logs).
  explicit LogSink(std::string dir);

  // The file of `stream` ("stdout" or "stderr") of a task run, under `dir`.
  static std::string PathOf(const std::string& dir, JobId job, int task_index, int64_t generation,
                            const std::string& stream);

  // `allocation`'s run may write from now on (again, after a server restart).
  void Open(int64_t allocation, Target target);
  // `allocation`'s run ended: it stays writable among the newest kRecentlyClosed.
  void Close(int64_t allocation);
  // Writes `chunks` sent by `node`; a chunk for a run this node may not write (another node's,
  // another generation, unknown or long closed) is dropped.
  void Write(const std::string& node, const std::vector<protocol::LogChunk>& chunks);

 private:
  std::optional<Target> TargetFor(const std::string& node, const protocol::TaskKey& key) const;
  void WriteChunk(const Target& target, const protocol::LogChunk& chunk) const;

  const std::string dir_;
  mutable std::mutex mu_;                     // guards open_ and closed_ (never held for I/O)
  std::unordered_map<int64_t, Target> open_;  // allocation id -> its run
  std::map<int64_t, Target> closed_;          // allocation id -> its run, newest kept
};

}  // namespace corral::server
