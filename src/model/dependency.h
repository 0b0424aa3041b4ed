// Job dependencies, as Slurm writes them (`--dependency afterok:12:13,afterany:14`): a job waits,
// unseen by the scheduler, until every dependency is met (docs/control-plane.md,
// "Dependencies"). The text is the one format of the CLI, the API's `dependency` field and batch
// scripts; past the JSON edge it is a list of Dependency values.
//
// An id names a job; the id of an array (its first element's id) names every element of the
// array, as in Slurm: the dependency is met when it is met for each element, and can never be
// met once it can never be met for one of them.
//
// Everything here is pure: thread-safe, no I/O.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "model/states.h"

namespace corral::model {

// Slurm's dependency types corral supports (the others are refused by the parser).
enum class DependencyType {
  kAfter,       // the job started (or ended without starting: cancelled while pending)
  kAfterOk,     // the job ended succeeded
  kAfterNotOk,  // the job ended in any other final state (failed, timeout, oom, cancelled, lost)
  kAfterAny,    // the job ended, in any final state
};

struct Dependency {
  DependencyType type = DependencyType::kAfterAny;
  JobId job;  // > 0
  bool operator==(const Dependency&) const = default;
};

// Bounds of a dependency text.
inline constexpr size_t kMaxDependencies = 128;     // job ids, all types together
inline constexpr size_t kMaxDependencyText = 4096;  // bytes

// "after", "afterok", "afternotok", "afterany".
std::string_view ToString(DependencyType type);

// Parses Slurm's syntax: TYPE:ID[:ID...][,TYPE:ID...], every dependency to be met (','). The
// same job may appear under several types. Errors: InvalidArgument starting with `field`
// ("--dependency: ..." for field "--dependency"), naming what is supported for `?` (any-of), the
// Slurm types corral does not have (singleton, aftercorr, afterburstbuffer, expand, ...), ids that
// are not positive integers, and texts past the bounds above. An empty text is no dependency.
Result<std::vector<Dependency>> ParseDependencies(std::string_view text, std::string_view field);

// The canonical text: consecutive dependencies of one type joined ("afterok:12:13,afterany:14");
// ParseDependencies reads it back as it was. Empty for none.
std::string ToString(const std::vector<Dependency>& dependencies);

// Where a dependency stands.
enum class DependencyStatus { kMet, kWaiting, kNeverMet };
// "met", "waiting", "never_met": the API's names, which the CLI prints too.
std::string_view ToString(DependencyStatus status);
// The status ToString names; none for any other text.
std::optional<DependencyStatus> ParseDependencyStatus(std::string_view text);

// What a job a dependency names did: its state and whether it ever started (a job requeued to
// pending started once).
struct DependencyTarget {
  JobState state = JobState::kPending;
  bool started = false;
};

// Where a dependency of type `type` stands against the jobs it names (one job, or every element
// of an array; none: no such job, which can never meet it).
DependencyStatus StatusOf(DependencyType type, const std::vector<DependencyTarget>& targets);

// One dependency of a job, checked: what it names, where it stands, and, when it can never be
// met, the state of the job that settled it.
struct DependencyCheck {
  Dependency dependency;
  DependencyStatus status = DependencyStatus::kWaiting;
  std::optional<JobState> settled_by;  // set with kNeverMet when a job named ended so
};

// Why a job with these checked dependencies waits, for people: the first that can never be met
// ("job 12 failed: afterok can never be met"), else the first that waits ("waits for job 12 to
// end successfully (afterok)"); none when every one is met.
struct DependencyWait {
  DependencyStatus status = DependencyStatus::kWaiting;  // kWaiting or kNeverMet
  std::string message;
};
std::optional<DependencyWait> WaitOf(const std::vector<DependencyCheck>& checks);

}  // namespace corral::model
