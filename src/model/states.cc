#include "model/states.h"

#include <algorithm>
#include <string>

namespace corral::model {
namespace {

// The one parser behind every Parse*: `all` lists the values, ToString names them.
template <typename E, size_t N>
Result<E> ParseName(std::string_view name, const std::array<E, N>& all, std::string_view what,
                    std::string_view field) {
  for (E value : all) {
    if (ToString(value) == name) return value;
  }
  std::string valid;
  for (E value : all) valid += (valid.empty() ? "" : ", ") + std::string(ToString(value));
  return InvalidArgument("field '" + std::string(field) + "': unknown " + std::string(what) + " '" +
                         std::string(name) + "' (one of " + valid + ")");
}

}  // namespace

std::string_view ToString(JobState state) {
  switch (state) {
    case JobState::kPending:
      return "pending";
    case JobState::kStarting:
      return "starting";
    case JobState::kRunning:
      return "running";
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
    case JobState::kLost:
      return "lost";
    case JobState::kTimeout:
      return "timeout";
    case JobState::kOom:
      return "oom";
  }
  return "unknown";
}

std::string_view ToString(TaskState state) {
  switch (state) {
    case TaskState::kAssigned:
      return "assigned";
    case TaskState::kRunning:
      return "running";
    case TaskState::kExited:
      return "exited";
    case TaskState::kKilled:
      return "killed";
    case TaskState::kLost:
      return "lost";
  }
  return "unknown";
}

std::string_view ToString(NodeState state) {
  switch (state) {
    case NodeState::kReady:
      return "ready";
    case NodeState::kCordoned:
      return "cordoned";
    case NodeState::kDrained:
      return "drained";
    case NodeState::kLost:
      return "lost";
  }
  return "unknown";
}

std::string_view ToString(TaskEndCause cause) {
  switch (cause) {
    case TaskEndCause::kExited:
      return "exited";
    case TaskEndCause::kSignalled:
      return "signalled";
    case TaskEndCause::kStopped:
      return "stopped";
    case TaskEndCause::kTimeLimit:
      return "time_limit";
    case TaskEndCause::kOutOfMemory:
      return "out_of_memory";
    case TaskEndCause::kFenced:
      return "fenced";
  }
  return "unknown";
}

Result<JobState> ParseJobState(std::string_view name, std::string_view field) {
  return ParseName(name, kJobStates, "job state", field);
}
Result<TaskState> ParseTaskState(std::string_view name, std::string_view field) {
  return ParseName(name, kTaskStates, "task state", field);
}
Result<NodeState> ParseNodeState(std::string_view name, std::string_view field) {
  return ParseName(name, kNodeStates, "node state", field);
}
Result<TaskEndCause> ParseTaskEndCause(std::string_view name, std::string_view field) {
  return ParseName(name, kTaskEndCauses, "end cause", field);
}

Result<std::vector<JobState>> ParseJobStates(std::string_view names, std::string_view field) {
  std::vector<JobState> out;
  if (names.empty()) return out;
  for (size_t start = 0; start <= names.size();) {
    const size_t comma = std::min(names.find(',', start), names.size());
    auto state = ParseJobState(names.substr(start, comma - start), field);
    if (!state.ok()) return state.status();
    out.push_back(*state);
    start = comma + 1;
  }
  return out;
}

bool IsFinal(JobState state) {
  return state != JobState::kPending && state != JobState::kStarting && state != JobState::kRunning;
}

bool IsEnded(TaskState state) {
  return state != TaskState::kAssigned && state != TaskState::kRunning;
}

JobState FailedStateFor(std::optional<TaskEndCause> cause) {
  if (cause == TaskEndCause::kTimeLimit) return JobState::kTimeout;
  if (cause == TaskEndCause::kOutOfMemory) return JobState::kOom;
  return JobState::kFailed;
}

}  // namespace corral::model
