#include "model/dependency.h"

#include <array>
#include <charconv>
#include <utility>

namespace corral::model {

namespace {

constexpr std::array<std::pair<std::string_view, DependencyType>, 4> kDependencyTypes = {{
    {"after", DependencyType::kAfter},
    {"afterok", DependencyType::kAfterOk},
    {"afternotok", DependencyType::kAfterNotOk},
    {"afterany", DependencyType::kAfterAny},
}};

// Slurm's types corral has no meaning for.
constexpr std::array<std::string_view, 5> kUnsupportedTypes = {
    "singleton", "aftercorr", "afterburstbuffer", "expand", "afterbb"};

constexpr char kSupported[] = "supported: after, afterok, afternotok, afterany, joined by ','";

Status DependencyError(std::string_view field, const std::string& why) {
  return InvalidArgument(std::string(field) + ": " + why);
}

std::vector<std::string_view> SplitAt(std::string_view text, char sep) {
  std::vector<std::string_view> parts;
  size_t start = 0;
  while (true) {
    const size_t end = text.find(sep, start);
    parts.push_back(text.substr(start, end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

Result<JobId> ParseJobId(std::string_view text, std::string_view field) {
  int64_t value = 0;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || err != std::errc() || end != text.data() + text.size() || value <= 0) {
    std::string why = "'" + std::string(text) + "' is not a job id (a positive integer)";
    if (text.find('_') != std::string_view::npos) {
      why += "; an array element is named by its own job id, an array by its id";
    } else if (text.find('+') != std::string_view::npos) {
      why += "; after:ID+MINUTES is not supported";
    }
    return DependencyError(field, why);
  }
  return JobId(value);
}

Result<DependencyType> ParseType(std::string_view name, std::string_view field) {
  for (const auto& [known, type] : kDependencyTypes) {
    if (name == known) return type;
  }
  for (std::string_view unsupported : kUnsupportedTypes) {
    if (name == unsupported) {
      return DependencyError(
          field, "Slurm's '" + std::string(name) + "' is not supported (" + kSupported + ")");
    }
  }
  return DependencyError(
      field, "unknown dependency type '" + std::string(name) + "' (" + kSupported + ")");
}

// "failed", "was cancelled": what a job that ended in `state` did.
std::string Did(JobState state) {
  switch (state) {
    case JobState::kSucceeded:
      return "succeeded";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "was cancelled";
    case JobState::kLost:
      return "was lost";
    case JobState::kTimeout:
      return "timed out";
    case JobState::kOom:
      return "ran out of memory";
    case JobState::kPending:
    case JobState::kStarting:
    case JobState::kRunning:
      break;
  }
  return "is " + std::string(ToString(state));
}

// "to end successfully": what the job waited on has yet to do.
std::string_view Awaited(DependencyType type) {
  switch (type) {
    case DependencyType::kAfter:
      return "to start";
    case DependencyType::kAfterOk:
      return "to end successfully";
    case DependencyType::kAfterNotOk:
      return "to end unsuccessfully";
    case DependencyType::kAfterAny:
      return "to end";
  }
  return "";
}

DependencyStatus StatusOfOne(DependencyType type, const DependencyTarget& target) {
  const bool final = IsFinal(target.state);
  switch (type) {
    case DependencyType::kAfter:
      return final || target.started || target.state != JobState::kPending
                 ? DependencyStatus::kMet
                 : DependencyStatus::kWaiting;
    case DependencyType::kAfterOk:
      if (!final) return DependencyStatus::kWaiting;
      return target.state == JobState::kSucceeded ? DependencyStatus::kMet
                                                  : DependencyStatus::kNeverMet;
    case DependencyType::kAfterNotOk:
      if (!final) return DependencyStatus::kWaiting;
      return target.state == JobState::kSucceeded ? DependencyStatus::kNeverMet
                                                  : DependencyStatus::kMet;
    case DependencyType::kAfterAny:
      return final ? DependencyStatus::kMet : DependencyStatus::kWaiting;
  }
  return DependencyStatus::kWaiting;
}

}  // namespace

std::string_view ToString(DependencyType type) {
  for (const auto& [name, known] : kDependencyTypes) {
    if (known == type) return name;
  }
  return "";
}

Result<std::vector<Dependency>> ParseDependencies(std::string_view text, std::string_view field) {
  std::vector<Dependency> out;
  if (text.empty()) return out;
  if (text.size() > kMaxDependencyText) {
    return DependencyError(field, "longer than " + std::to_string(kMaxDependencyText) + " bytes");
  }
  if (text.find('?') != std::string_view::npos) {
    return DependencyError(field,
                           "'?' (any of them) is not supported: every dependency must be met (" +
                               std::string(kSupported) + ")");
  }
  for (std::string_view part : SplitAt(text, ',')) {
    const std::vector<std::string_view> words = SplitAt(part, ':');
    auto type = ParseType(words[0], field);
    if (!type.ok()) return type.status();
    if (words.size() < 2) {
      return DependencyError(field, "'" + std::string(part) + "' names no job (TYPE:ID[:ID...])");
    }
    for (size_t i = 1; i < words.size(); ++i) {
      auto id = ParseJobId(words[i], field);
      if (!id.ok()) return id.status();
      if (out.size() == kMaxDependencies) {
        return DependencyError(field, "more than " + std::to_string(kMaxDependencies) + " job ids");
      }
      out.push_back({*type, *id});
    }
  }
  return out;
}

std::string ToString(const std::vector<Dependency>& dependencies) {
  std::string out;
  for (size_t i = 0; i < dependencies.size(); ++i) {
    const Dependency& d = dependencies[i];
    if (i == 0 || dependencies[i - 1].type != d.type) {
      if (i > 0) out += ',';
      out += ToString(d.type);
    }
    out += ':' + std::to_string(d.job.value());
  }
  return out;
}

std::string_view ToString(DependencyStatus status) {
  switch (status) {
    case DependencyStatus::kMet:
      return "met";
    case DependencyStatus::kWaiting:
      return "waiting";
    case DependencyStatus::kNeverMet:
      return "never_met";
  }
  return "";
}

std::optional<DependencyStatus> ParseDependencyStatus(std::string_view text) {
  for (DependencyStatus status :
       {DependencyStatus::kMet, DependencyStatus::kWaiting, DependencyStatus::kNeverMet}) {
    if (ToString(status) == text) return status;
  }
  return std::nullopt;
}

DependencyStatus StatusOf(DependencyType type, const std::vector<DependencyTarget>& targets) {
  if (targets.empty()) return DependencyStatus::kNeverMet;
  DependencyStatus out = DependencyStatus::kMet;
  for (const DependencyTarget& target : targets) {
    const DependencyStatus one = StatusOfOne(type, target);
    if (one == DependencyStatus::kNeverMet) return one;
    if (one == DependencyStatus::kWaiting) out = one;
  }
  return out;
}

std::optional<DependencyWait> WaitOf(const std::vector<DependencyCheck>& checks) {
  for (const DependencyCheck& c : checks) {
    if (c.status != DependencyStatus::kNeverMet) continue;
    const std::string job = "job " + std::to_string(c.dependency.job.value());
    const std::string what = c.settled_by ? job + " " + Did(*c.settled_by) : job + " is unknown";
    return DependencyWait{
        DependencyStatus::kNeverMet,
        what + ": " + std::string(ToString(c.dependency.type)) + " can never be met"};
  }
  for (const DependencyCheck& c : checks) {
    if (c.status != DependencyStatus::kWaiting) continue;
    return DependencyWait{DependencyStatus::kWaiting,
                          "waits for job " + std::to_string(c.dependency.job.value()) + " " +
                              std::string(Awaited(c.dependency.type)) + " (" +
                              std::string(ToString(c.dependency.type)) + ")"};
  }
  return std::nullopt;
}

}  // namespace corral::model
