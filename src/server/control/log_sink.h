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
// same bytes), and never past the end of what is there (no holes from bad input).
//
// Size cap: a stream keeps at most its newest `max_bytes` (plus less than one file-system block)
// on the server's disk. When a write takes it past that, the older part is dropped by punching
// a hole at the start of the file (fallocate FALLOC_FL_PUNCH_HOLE), so that offsets stay those
// of the stream as the task wrote it: chunks land where they did, a reader's offset means the
// same before and after, and what was dropped is where the file's data starts (SEEK_DATA) — no
// state beside the file, across restarts too. Read answers a note in place of the dropped part.
// On a file system that cannot punch holes the newest output is dropped instead (past
// `max_bytes`), and the server says so once on stderr.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "protocol/agent_messages.h"

namespace corral::server {

class LogSink {
 public:
  // What a stream keeps unless the server says otherwise (--max-log-bytes), and the least.
  static constexpr int64_t kDefaultMaxBytes = int64_t{1} << 30;  // 1 GiB
  static constexpr int64_t kMinMaxBytes = int64_t{64} * 1024;
  // A task run whose output may be written, and the only node that may write it.
  struct Target {
    JobId job;
    int task_index = 0;
    int64_t generation = 0;
    std::string node;
  };
  // How many closed runs stay writable (the oldest allocation ids are dropped first).
  static constexpr size_t kRecentlyClosed = 10000;

  // `dir` empty: output is dropped (the server keeps no logs). `max_bytes` (>= kMinMaxBytes):
  // what each stream of a task run keeps (see "Size cap").
  LogSink(std::string dir, int64_t max_bytes);

  // The file of `stream` ("stdout" or "stderr") of a task run, under `dir`.
  static std::string PathOf(const std::string& dir, JobId job, int task_index, int64_t generation,
                            const std::string& stream);

  // `allocation`'s run may write from now on (again, after a server restart).
  void Open(int64_t allocation, Target target);
  // `allocation`'s run ended: it stays writable among the newest kRecentlyClosed.
  void Close(int64_t allocation);
  // Deletes the output of every run of `jobs` (their folders) and forgets their closed runs:
  // jobs purged from the store (job_retention.h), whose runs all ended. Errors: IoError naming
  // the first folder that could not be removed (the others are still removed).
  Status RemoveJobs(const std::vector<JobId>& jobs);
  // Writes `chunks` sent by `node`; a chunk for a run this node may not write (another node's,
  // another generation, unknown or long closed) is dropped.
  void Write(const std::string& node, const std::vector<protocol::LogChunk>& chunks);

  // A page of a stream, as the API answers it.
  struct Page {
    // At most the asked bytes: the stream's output from the asked offset, or, when that part
    // was dropped, DroppedNote and then the oldest output kept.
    std::string data;
    int64_t next_offset = 0;  // the offset to ask for next (the asked one at the end)
    int64_t size = 0;         // the stream's length so far, dropped output included
  };
  // Reads the stream `stream` of a task run from `offset` (an offset into the stream as the
  // task wrote it), at most `max_bytes` (> kNoteRoom); a stream with no output yet (no file)
  // reads as empty. When that offset was dropped, the page is the note, then the output kept
  // from its first whole line on (the note counts the start of the cut line among the dropped
  // bytes when it ends within kNoteRoom). Errors: IoError.
  Result<Page> Read(JobId job, int task_index, int64_t generation, const std::string& stream,
                    int64_t offset, int64_t max_bytes) const;
  // "[corral: N bytes of older output dropped: log over its cap of 1 GiB]\n".
  static std::string DroppedNote(int64_t dropped, int64_t max_bytes);
  // Bytes a page keeps for the note, and how far a cut line is looked for.
  static constexpr int64_t kNoteRoom = 4096;

 private:
  std::optional<Target> TargetFor(const std::string& node, const protocol::TaskKey& key) const;
  void WriteChunk(const Target& target, const protocol::LogChunk& chunk);
  // Drops what the file `fd` holds before its newest max_bytes_ (`end`: its size).
  void DropOlderOutput(int fd, int64_t end);

  const std::string dir_;
  const int64_t max_bytes_;
  // The logs folder's file system punched no hole: output past max_bytes_ is dropped.
  std::atomic<bool> keep_oldest_{false};
  mutable std::mutex mu_;                     // guards open_ and closed_ (never held for I/O)
  std::unordered_map<int64_t, Target> open_;  // allocation id -> its run
  std::map<int64_t, Target> closed_;          // allocation id -> its run, newest kept
};

}  // namespace corral::server
