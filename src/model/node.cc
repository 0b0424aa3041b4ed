#include "model/node.h"

#include <algorithm>
#include <cctype>

#include "common/random_id.h"

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
  if (node.cpu.value() > kMaxNodeCpuMilli) {
    return bad("cpu_milli", "must be at most " + std::to_string(kMaxNodeCpuMilli) + ", got " +
                                std::to_string(node.cpu.value()));
  }
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
  for (const auto& [key, value] : node.labels) {
    Status valid = ValidateLabel(key, value);
    if (!valid.ok()) return bad("labels", valid.message());
  }
  return Status::Ok();
}

Status ValidateClusterId(const std::string& id) {
  if (!IsHexId(id, kClusterIdLength / 2)) {
    return InvalidArgument("cluster id '" + id.substr(0, 64) + "': must be " +
                           std::to_string(kClusterIdLength) + " lowercase hex characters");
  }
  return Status::Ok();
}

Status ValidateNodeAddress(const std::string& address) {
  const bool allowed = std::all_of(address.begin(), address.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':' ||
           c == '_';
  });
  if (address.empty() || address.size() > 253 || !allowed) {
    return InvalidArgument("address '" + address +
                           "': must be 1-253 letters, digits, '.', '-', ':' or '_'");
  }
  return Status::Ok();
}

Status ValidateLabel(const std::string& key, const std::string& value) {
  auto allowed = [](const std::string& text) {
    return std::all_of(text.begin(), text.end(), [](char c) {
      return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' ||
             c == '/';
    });
  };
  if (key.empty() || key.size() > kMaxLabelLength || !allowed(key)) {
    return InvalidArgument("label key '" + key + "': must be 1-" + std::to_string(kMaxLabelLength) +
                           " characters of letters, digits, '-', '_', '.' and '/'");
  }
  if (value.empty() || value.size() > kMaxLabelLength || !allowed(value)) {
    return InvalidArgument("label '" + key + "': value '" + value + "': must be 1-" +
                           std::to_string(kMaxLabelLength) +
                           " characters of letters, digits, '-', '_', '.' and '/'");
  }
  return Status::Ok();
}

}  // namespace corral::model
