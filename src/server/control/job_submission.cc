#include "server/control/job_submission.h"

#include <map>
#include <vector>

#include "protocol/environment_ref.h"
#include "protocol/spec_fields.h"

namespace corral::server {

std::vector<protocol::ResourceDefault> ApplyResourceDefaults(const ResourceDefaults& defaults,
                                                             JobSpec& spec) {
  std::vector<protocol::ResourceDefault> filled;
  model::TaskResources& r = spec.resources;
  if (!spec.cpu_given) {
    if (r.gpus.value() == 0) {
      r.cpu = CpuMilli(kDefaultCpusPerProc * 1000 * spec.procs_per_node);
      filled.push_back(
          {"resources.cpu_milli", r.cpu.value(),
           std::to_string(kDefaultCpusPerProc) + " CPU per process, as the job asks no GPU"});
    } else if (defaults.cpus_per_gpu > 0) {
      // TotalMilli is gpus × gpu_milli: a share of one GPU gets its share of the CPUs.
      r.cpu = CpuMilli(defaults.cpus_per_gpu * r.TotalMilli().value());
      filled.push_back({"resources.cpu_milli", r.cpu.value(),
                        std::to_string(defaults.cpus_per_gpu) +
                            " CPUs per GPU: the server's --default-cpus-per-gpu"});
    }
    spec.cpu_given = true;
  }
  if (!spec.memory_given) {
    if (defaults.memory_per_cpu.value() > 0 && r.cpu.value() > 0) {
      r.memory = MemoryMib((defaults.memory_per_cpu.value() * r.cpu.value() + 999) / 1000);
      filled.push_back({"resources.memory_mib", r.memory.value(),
                        std::to_string(defaults.memory_per_cpu.value()) +
                            " MiB per CPU: the server's --default-memory-per-cpu-mib"});
    }
    spec.memory_given = true;
  }
  return filled;
}

Status ApplyEnvironment(const EnvironmentSpec& env, int64_t version, JobSpec& spec) {
  spec.environment = ToString(env.name, version);
  // An interactive shell without a command runs the login shell, not the environment's app; a
  // batch job runs its script.
  const bool login_shell = spec.session && spec.session->shell;
  if ((spec.script || !spec.output_file.empty() || !spec.error_file.empty()) && !env.HasHost() &&
      !env.image.empty()) {
    return protocol::FieldError(
        spec.script ? "script" : "output_file",
        "environment '" + spec.environment +
            "' runs only in a container, and batch scripts and output files run in the process "
            "runtime (docs/batch.md): use an environment with a host side, or corral submit");
  }
  if (spec.command.empty() && !login_shell && !spec.script) {
    if (env.command.empty()) {
      return protocol::FieldError(
          "command", "is required: environment '" + spec.environment + "' has no default command");
    }
    spec.command = env.command;
  }
  auto under = [&](std::map<std::string, std::string>& vars, const std::string& field) {
    std::map<std::string, std::string> merged = env.env;
    for (auto& [name, value] : vars) merged[name] = std::move(value);
    if (merged.size() > protocol::kMaxSpecEnv) {
      return protocol::FieldError(field, "has too many entries with environment '" +
                                             spec.environment + "' (at most " +
                                             std::to_string(protocol::kMaxSpecEnv) + " together)");
    }
    vars = std::move(merged);
    return Status::Ok();
  };
  CORRAL_RETURN_IF_ERROR(under(spec.env, "env"));
  if (spec.array) {
    for (size_t i = 0; i < spec.array->env.size(); ++i) {
      CORRAL_RETURN_IF_ERROR(under(spec.array->env[i], "array.env[" + std::to_string(i) + "]"));
    }
  }
  if (spec.resources.gpus.value() < env.min_gpus) {
    return protocol::FieldError("resources.gpus",
                                "environment '" + spec.environment + "' needs at least " +
                                    std::to_string(env.min_gpus) + " GPUs per task");
  }
  if (!env.image.empty()) {
    CORRAL_RETURN_IF_ERROR(CheckContainerEnv(spec.env, "env"));
    if (spec.array) {
      for (size_t i = 0; i < spec.array->env.size(); ++i) {
        CORRAL_RETURN_IF_ERROR(
            CheckContainerEnv(spec.array->env[i], "array.env[" + std::to_string(i) + "]"));
      }
    }
  }
  // The command and the variables may be new: with shell, one string; no name corral sets for
  // this job's launcher; the array's copies within bounds.
  return protocol::CheckJobSpec(spec);
}

model::Job ToModelJob(const JobSpec& spec, const store::JobRecord& record) {
  model::Job job;
  job.id = record.id;
  job.name = spec.name;
  job.user = record.user;
  job.project = spec.project;
  job.priority = spec.priority;
  job.submit_time = record.submit_time;
  job.array_id = record.array_id;
  job.array_max_running = record.array_max_running;
  job.tasks = spec.tasks;
  job.resources = spec.resources;
  job.elastic = spec.elastic;
  if (spec.time_limit_s > 0) job.time_limit = Seconds(spec.time_limit_s);
  return job;
}

}  // namespace corral::server
