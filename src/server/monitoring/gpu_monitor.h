// The server's view of GPU activity (docs/monitoring.md): the agents' samples (agent/gpu_metrics.h)
// per node and GPU, with the jobs that hold each GPU; recent series in memory; which allocated
// GPUs are idle; closed 10 s and 5 min intervals for the store's history; and GPU time
// (allocated and utilisation-weighted used) per day, user and project for accounting.
//
// Time is the server's (the moment a sample arrives), not the agent's: node clocks may be off.
// Thread safety: every method may be called from any thread; one mutex guards the state.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "protocol/agent_messages.h"
#include "store/store.h"

namespace corral::server {

// The two resolutions of the history (the store's gpu_metrics rows), in seconds.
inline constexpr int kFineResolutionS = 10;
inline constexpr int kCoarseResolutionS = 300;

// One reading of one GPU. A field the device did not report is empty.
struct GpuReading {
  int64_t at_ms = 0;  // server time
  std::optional<int> utilization_percent;
  std::optional<int> memory_utilization_percent;
  std::optional<int64_t> memory_used_mib;
  std::optional<int64_t> power_mw;
  std::optional<int> temperature_c;
};

// One GPU in an agent's report, before the server resolved its tasks.
struct ReportedGpu {
  int index = 0;
  GpuReading reading;                // at_ms unset
  std::vector<int64_t> allocations;  // allocation ids of the tasks holding it
  int processes = 0;                 // compute processes on it
  int foreign_processes = 0;         // of which no task of corral's
};

// The GPUs of a heartbeat's GPU metrics (checked by their codec, protocol::ParseGpuMetrics).
std::vector<ReportedGpu> ReportedGpus(const protocol::GpuMetrics& metrics);

// A job holding a GPU, as the controller resolved an allocation id.
struct GpuHolder {
  JobId job;
  std::string user;
  std::string project;
  double share = 1.0;  // of the GPU: gpu_milli / 1000
  bool session = false;
};

// The state of one GPU as the monitor knows it.
struct GpuStatus {
  std::string node;
  int index = 0;
  std::string model;  // the node's GPU model, this GPU's UUID and memory, from its inventory
  std::string uuid;
  int64_t memory_total_mib = 0;
  GpuReading latest;
  std::vector<GpuHolder> holders;  // empty: free
  int processes = 0;
  int foreign_processes = 0;
  // Since when the GPU, held by a job, has stayed under the idle threshold; none: busy, free,
  // or no utilisation reported.
  std::optional<int64_t> idle_since_ms;
};

class GpuMonitor {
 public:
  struct Options {
    int64_t recent_ms = 15 * 60 * 1000;      // in-memory series per GPU
    int idle_threshold_percent = 10;         // a held GPU under this utilisation is idle
    int64_t idle_after_ms = 30 * 60 * 1000;  // ... flagged after this long
    // A reading counts the time since the GPU's previous one, up to this (a gap longer than
    // that, e.g. an agent restart, counts only this much).
    int64_t max_interval_ms = 30 * 1000;
    // A GPU whose last reading is older than this (its agent stopped sampling, or its probe
    // fails) is neither idle nor busy: IdleGpus and JobLastBusyMs leave it out.
    int64_t stale_after_ms = 60 * 1000;
  };
  explicit GpuMonitor(Options options);

  // The identity of a node's GPUs, from its inventory: its model, and each GPU's UUID and
  // memory by index.
  struct GpuIdentity {
    std::string uuid;
    int64_t memory_total_mib = 0;
  };
  struct NodeGpus {
    std::string model;
    std::vector<GpuIdentity> gpus;
  };
  // Records a node's report received at `now_ms`. `holders` maps the reported allocation ids to
  // their jobs; unresolved ids (ended, or not on this node) are ignored. A GPU index the
  // inventory does not list is ignored.
  void Record(const std::string& node, const NodeGpus& identity,
              const std::vector<ReportedGpu>& gpus, const std::map<int64_t, GpuHolder>& holders,
              int64_t now_ms);
  // Drops a node's GPUs (the node was removed or replaced); their open buckets close.
  void ForgetNode(const std::string& node);

  // Every GPU, by node and index.
  std::vector<GpuStatus> Gpus() const;
  // The GPUs held by a job (by node and index) with their recent readings since `since_ms`.
  std::vector<std::pair<GpuStatus, std::vector<GpuReading>>> JobGpus(JobId job,
                                                                     int64_t since_ms) const;
  // GPUs idle for at least idle_after_ms at `now_ms` (not stale).
  std::vector<GpuStatus> IdleGpus(int64_t now_ms) const;
  // When any of the job's GPUs was last busy (or reported no utilisation): `now_ms` when one
  // is now, else the latest start of their idle spans; none when no GPU held by the job has a
  // reading that is not stale. now_ms minus this is how long all its GPUs have been idle.
  std::optional<int64_t> JobLastBusyMs(JobId job, int64_t now_ms) const;
  // JobLastBusyMs of every job holding a GPU, in one pass (the controller's idle check over
  // all running jobs; JobLastBusyMs scans every GPU once per job), and whether one of its GPUs
  // is busy now: its latest reading (not stale) has a utilisation at or over the idle
  // threshold. A reading without utilisation, or an idle span that starts now, gives now_ms as
  // the last busy time but is not busy now.
  struct JobBusy {
    int64_t last_busy_ms = 0;
    bool busy_now = false;
    bool operator==(const JobBusy&) const = default;
  };
  std::map<JobId, JobBusy> LastBusyByJob(int64_t now_ms) const;
  // The sum of every GPU's last utilisation, in GPUs (the summary's "gpus_used").
  double UsedGpus() const;

  // Intervals closed since the last call (10 s and 5 min: one closes when a reading falls into
  // a later one, or its node is forgotten), and the GPU time accrued since the last call (whole
  // milliseconds; the remainder stays for the next call); the caller stores them.
  std::vector<store::GpuMetricRow> TakeClosedIntervals();
  // Closes every open interval now (the server stops): TakeClosedIntervals returns them, partial.
  // A later reading in the same interval opens it afresh (stored, it replaces this one).
  void CloseOpenIntervals();
  std::vector<store::GpuUsageRow> TakeUsage();

  const Options& options() const { return options_; }

 private:
  struct Accumulator {
    int64_t start_s = -1;
    double utilization_sum = 0;
    int utilization_samples = 0;
    double power_sum = 0;
    int power_samples = 0;
    int64_t memory_max = 0;
    int temperature_max = 0;
    int samples = 0;
    // Samples per job that held the GPU; the interval belongs to the job with the most.
    std::vector<std::pair<JobId, int>> job_samples;
  };
  struct Entry {
    GpuStatus status;
    std::deque<GpuReading> recent;
    Accumulator fine, coarse;  // 10 s and 5 min
  };

  static int64_t BusyAt(const Entry& e, int64_t now_ms);
  bool Stale(const Entry& e, int64_t now_ms) const {
    return now_ms - e.status.latest.at_ms > options_.stale_after_ms;
  }
  void AddToBucket(Entry& e, Accumulator& acc, int resolution_s, const GpuReading& r);
  void CloseBucket(const Entry& e, Accumulator& acc, int resolution_s);
  // Charges [from_ms, to_ms) of `e`'s GPU to the jobs holding it now that also held it
  // `before`.
  void Accrue(const Entry& e, const std::vector<GpuHolder>& before, int64_t from_ms, int64_t to_ms);

  const Options options_;
  mutable std::mutex mu_;
  std::map<std::pair<std::string, int>, Entry> gpus_;
  std::vector<store::GpuMetricRow> closed_;
  std::map<std::tuple<std::string, std::string, std::string>, std::pair<double, double>> usage_;
};

// "YYYY-MM-DD" (UTC) of a Unix time in seconds.
std::string UtcDay(int64_t unix_s);

// A GPU's holder as one caller sees it (docs/security.md, "What others can see"): the job, or,
// when the caller may not see its project's work, only the share it holds: "in use".
struct SeenHolder {
  std::optional<GpuHolder> holder;  // none: hidden from this caller
  double share = 1.0;
};
// `gpu`'s holders as a caller sees them: in full those whose project `sees` accepts, the others
// by their share only.
std::vector<SeenHolder> HoldersSeen(const GpuStatus& gpu,
                                    const std::function<bool(const std::string&)>& sees);

// A GPU for the API: {"node", "index", "model", "uuid", "memory_total_mib", "sampled_at" (Unix
// s), the reading's fields that were reported ("utilization_percent",
// "memory_utilization_percent", "memory_used_mib", "power_w", "temperature_c"), "holders":
// `holders` (HoldersSeen of `gpu`), each {"job", "user", "project", "share", "session"} or, hidden,
// {"share"}, "processes", "foreign_processes", "idle_for_s" (while under the threshold and
// held), "idle" (flagged: idle for at least `idle_after_ms`)}.
nlohmann::json GpuStatusJson(const GpuStatus& gpu, const std::vector<SeenHolder>& holders,
                             int64_t now_ms, int64_t idle_after_ms);
// A reading for a series: {"t" (Unix ms), and the reported fields as in GpuStatusJson}.
nlohmann::json GpuReadingJson(const GpuReading& reading);

}  // namespace corral::server
