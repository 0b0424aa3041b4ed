// The job spec users submit (API JSON; the CLI also reads YAML and sends JSON):
//
//   {"name": "train", "project": "vision", "command": ["python3", "train.py"],
//    "shell": false, "workdir": "/data/train", "env": {"SEED": "1"},
//    "resources": {"gpus": 2, "gpu_milli": 1000, "gpu_models": ["A100-80GB"],
//                  "cpu_milli": 16000, "memory_mib": 65536},
//    "tasks": 1, "priority": 0, "time_limit_s": 3600, "max_restarts": 0,
//    "launcher": "torchrun", "procs_per_node": 2}
//
// Distributed jobs (docs/distributed.md): `tasks` parts (one per node, or node share), each with
// `resources`, started together; `launcher` says how each part starts its `procs_per_node`
// processes and which rendezvous variables they get.
// `command` is an argv, run without a shell; with "shell": true it must hold one string, run by
// /bin/sh -c. Unknown fields are errors (typo safety); every error names the field.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/job.h"
#include "model/launcher.h"

namespace corral::server {

struct JobSpec {
  std::string name;
  std::string project;  // empty: the server's default project
  std::vector<std::string> command;
  bool shell = false;
  std::string workdir;  // absolute; empty: the agent's per-task directory
  std::map<std::string, std::string> env;
  model::TaskResources resources;
  int tasks = 1;
  int priority = 0;
  int64_t time_limit_s = 0;  // 0: none
  int max_restarts = 0;      // requeues after failure or node loss
  model::Launcher launcher = model::Launcher::kNone;
  int procs_per_node = 1;  // 1..model::kMaxProcsPerNode
};

// True when the job's parts get rendezvous variables: several parts, a launcher or several
// processes per part.
bool IsDistributed(const JobSpec& spec);

// Parses and validates a spec. Limits: 4096 argv entries, 256 env entries, 64 KiB strings.
Result<JobSpec> ParseJobSpec(const nlohmann::json& json);
nlohmann::json ToJson(const JobSpec& spec);

// The scheduler's view of a spec for job `id` submitted at `submit_time`.
model::Job ToModelJob(const JobSpec& spec, JobId id, const std::string& user, Seconds submit_time);

}  // namespace corral::server
