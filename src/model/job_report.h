// What a job's tasks tell corral through the in-job channel (docs/in-job.md): reported metrics
// (`corral job report`, POST /api/v1/jobs/{id}/report) and the latest checkpoint (`corral job
// checkpoint`). Typed here, past the JSON edge (protocol/api_job_report.h reads and writes the
// API's form); the store keeps them (store.h, RecordJobReport and RecordJobCheckpoint).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "common/units.h"

namespace corral::model {

// The bounds of the channel (the contract's): every one is refused naming its field.
inline constexpr size_t kMaxMetricsPerReport = 32;    // keys in one report
inline constexpr size_t kMaxMetricKeys = 64;          // distinct keys a job keeps
inline constexpr size_t kMaxMetricPoints = 1000;      // numeric points a job keeps (oldest dropped)
inline constexpr int64_t kMaxCheckpointEvents = 100;  // checkpoint events in a job's history
inline constexpr size_t kMaxMetricKeyBytes = 64;      // a key: [A-Za-z0-9_.:/-], 1..64 bytes
inline constexpr size_t kMaxMetricTextBytes = 256;    // a string value
inline constexpr size_t kMaxCheckpointPathBytes = 4096;

// A metric's value: a finite number or a string of at most kMaxMetricTextBytes.
using MetricValue = std::variant<double, std::string>;

// True for a key of 1..kMaxMetricKeyBytes of [A-Za-z0-9_.:/-].
bool IsMetricKey(std::string_view key);

// One report: its metrics in the order sent (distinct keys), and when the server took it.
struct JobReport {
  std::vector<std::pair<std::string, MetricValue>> metrics;
  Seconds time{0};
};

// A job's latest checkpoint: an absolute path (of at most kMaxCheckpointPathBytes), the
// training step it says it holds, and when the server recorded it.
struct JobCheckpoint {
  std::string path;
  std::optional<int64_t> step;
  Seconds time{0};
  bool operator==(const JobCheckpoint&) const = default;
};

// What a job has reported so far: the latest value of each key, the time of its last report,
// its latest checkpoint.
struct JobProgress {
  std::map<std::string, MetricValue> metrics;
  std::optional<Seconds> metrics_at;
  std::optional<JobCheckpoint> checkpoint;
};

// The history of a job's numeric metrics: per key, (time, value) oldest first.
using MetricSeries = std::map<std::string, std::vector<std::pair<Seconds, double>>>;

}  // namespace corral::model
