#include "model/job.h"

#include <cctype>

namespace corral::model {

TaskResources MakeResources(int gpus, int gpu_milli, int64_t cpu_milli, int64_t memory_mib,
                            std::vector<std::string> gpu_models) {
  TaskResources r;
  r.gpus = GpuCount(gpus);
  r.gpu_milli = MilliGpu(gpu_milli);
  r.cpu = CpuMilli(cpu_milli);
  r.memory = MemoryMib(memory_mib);
  r.gpu_models = std::move(gpu_models);
  return r;
}

namespace {

Status FieldError(const std::string& field, const std::string& what) {
  return InvalidArgument("field '" + field + "': " + what);
}

}  // namespace

std::string_view ElasticUnitName(ElasticUnit unit) {
  return unit == ElasticUnit::kGpus ? "gpus" : "nodes";
}

Job WithElasticSize(Job job, int size) {
  if (!job.elastic) return job;
  if (job.elastic->unit == ElasticUnit::kGpus) {
    job.resources.gpus = GpuCount(size);
  } else {
    job.tasks = size;
  }
  return job;
}

Status Validate(const TaskResources& r) {
  const int64_t gpus = r.gpus.value();
  const int64_t milli = r.gpu_milli.value();
  if (gpus < 0) return FieldError("resources.gpus", "must be >= 0, got " + std::to_string(gpus));
  if (gpus == 0 && milli != 0) {
    return FieldError("resources.gpu_milli",
                      "must be 0 when gpus is 0, got " + std::to_string(milli));
  }
  if (gpus > 0 && (milli < 1 || milli > 1000)) {
    return FieldError("resources.gpu_milli",
                      "must be between 1 and 1000, got " + std::to_string(milli));
  }
  if (gpus > 1 && milli != 1000) {
    return FieldError(
        "resources.gpu_milli",
        "must be 1000 when gpus > 1 (a share is of one GPU), got " + std::to_string(milli));
  }
  if (r.cpu.value() < 0) return FieldError("resources.cpu_milli", "must be >= 0");
  if (r.memory.value() < 0) return FieldError("resources.memory_mib", "must be >= 0");
  for (const auto& m : r.gpu_models) {
    if (m.empty()) return FieldError("resources.gpu_models", "must not contain an empty name");
  }
  return Status::Ok();
}

Status Validate(const Job& job) {
  auto prefix = [&](const Status& s) {
    return InvalidArgument("job " + std::to_string(job.id.value()) + ": " + s.message());
  };
  if (job.id.value() < 0) return prefix(FieldError("id", "must be >= 0"));
  if (job.tasks < 1) {
    return prefix(FieldError("tasks", "must be >= 1, got " + std::to_string(job.tasks)));
  }
  if (job.time_limit && job.time_limit->value() <= 0) {
    return prefix(FieldError("time_limit", "must be > 0 seconds"));
  }
  if (job.expected_duration && job.expected_duration->value() < 0) {
    return prefix(FieldError("expected_duration", "must be >= 0 seconds"));
  }
  if (job.array_id && job.array_id->value() < 0) {
    return prefix(FieldError("array_id", "must be >= 0"));
  }
  if (job.array_max_running && !job.array_id) {
    return prefix(FieldError("array_max_running", "is only for an array element (array_id)"));
  }
  if (job.array_max_running && *job.array_max_running < 1) {
    return prefix(FieldError("array_max_running",
                             "must be >= 1, got " + std::to_string(*job.array_max_running)));
  }
  Status r = Validate(job.resources);
  if (!r.ok()) return prefix(r);
  if (job.elastic) {
    const ElasticBounds& e = *job.elastic;
    const std::string unit(ElasticUnitName(e.unit));
    if (e.min < 1 || e.max < e.min || e.max > kMaxElasticSize) {
      return prefix(FieldError(
          "elastic", "must be 1 <= min <= max <= " + std::to_string(kMaxElasticSize) + " " + unit +
                         ", got " + std::to_string(e.min) + "-" + std::to_string(e.max)));
    }
    if (e.step < 0) return prefix(FieldError("elastic.step", "must be >= 0"));
    const int now =
        e.unit == ElasticUnit::kGpus ? static_cast<int>(job.resources.gpus.value()) : job.tasks;
    if (now < e.min || now > e.max) {
      return prefix(FieldError(e.unit == ElasticUnit::kGpus ? "resources.gpus" : "tasks",
                               "must lie in the elastic range " + std::to_string(e.min) + "-" +
                                   std::to_string(e.max) + ", got " + std::to_string(now)));
    }
    if (e.unit == ElasticUnit::kGpus && (job.tasks != 1 || job.resources.IsShare())) {
      return prefix(FieldError("elastic", "a range of GPUs is for one task of whole GPUs"));
    }
  }
  return Status::Ok();
}

bool IsEnvName(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

}  // namespace corral::model
