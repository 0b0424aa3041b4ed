// The store's record of one task, alone: what code that reasons about tasks without the store
// (the reconcile core, server/control/reconcile.h) needs, without the Store interface and its
// Status. store.h includes it; the store reads and writes these (AssignGang, UpdateTask).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/ids.h"
#include "common/units.h"
#include "model/allocation.h"
#include "model/states.h"

namespace corral::store {

// One task of a job bound to a node: the fencing unit. (allocation_id, generation) is unique;
// a re-run of the task after loss gets a new generation.
struct TaskRecord {
  JobId job;
  int task_index = 0;
  int64_t allocation_id = 0;
  int64_t generation = 0;
  std::string node;
  model::Allocation allocation;  // what it holds on `node`; fixed once assigned
  model::TaskState state = model::TaskState::kAssigned;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<Seconds> start_time, end_time;
  // Why an ended task's process ended, as its agent said (none: not ended, ended without its
  // agent's word (lost, never launched), or an agent too old to say).
  std::optional<model::TaskEndCause> end_cause;
};

}  // namespace corral::store
