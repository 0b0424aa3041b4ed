#include "model/node.h"

namespace corral::model {

Node MakeNode(std::string name, std::string gpu_model, int gpu_count, CpuMilli cpu,
              MemoryMib memory) {
  Node node;
  node.name = std::move(name);
  node.gpu_model = std::move(gpu_model);
  node.cpu = cpu;
  node.memory = memory;
  node.gpus.resize(gpu_count);
  for (int i = 0; i < gpu_count; ++i) node.gpus[i].index = i;
  return node;
}

Status Validate(const Node& node) {
  auto bad = [&](const std::string& field, const std::string& what) {
    return InvalidArgument("node '" + node.name + "': field '" + field + "': " + what);
  };
  if (node.name.empty()) return InvalidArgument("node: field 'name': must not be empty");
  if (node.cpu.value() <= 0) return bad("cpu_milli", "must be > 0");
  if (node.memory.value() < 0) return bad("memory_mib", "must be >= 0");
  if (!node.gpus.empty() && node.gpu_model.empty()) {
    return bad("gpu_model", "must be set when the node has GPUs");
  }
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    if (node.gpus[i].index != static_cast<int>(i)) {
      return bad("gpus[" + std::to_string(i) + "].index", "must equal its position");
    }
    if (node.gpus[i].memory.value() < 0) {
      return bad("gpus[" + std::to_string(i) + "].memory_mib", "must be >= 0");
    }
  }
  return Status::Ok();
}

}  // namespace corral::model
