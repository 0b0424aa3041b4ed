#include "agent/fake_probe.h"

#include <cctype>

namespace corral::agent {
namespace {

constexpr int kMaxGpus = 64;

bool IsModelChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

}  // namespace

FakeProbe::FakeProbe(GpuInventory inventory) : inventory_(std::move(inventory)) {
  for (const model::Gpu& gpu : inventory_.gpus) {
    GpuSample s;
    s.index = gpu.index;
    s.gpu_utilization_percent = 0;
    s.memory_utilization_percent = 0;
    s.memory_used = MemoryMib(0);
    s.power_milliwatts = 0;
    s.temperature_celsius = 30;
    samples_.push_back(s);
  }
}

Result<FakeProbe> FakeProbe::Create(std::string_view spec, std::string_view hostname) {
  GpuInventory inventory;
  if (spec.empty()) return FakeProbe(std::move(inventory));

  int group_number = 0;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t comma = spec.find(',', pos);
    if (comma == std::string_view::npos) comma = spec.size();
    std::string_view group = spec.substr(pos, comma - pos);
    ++group_number;
    auto bad = [&](const std::string& what) {
      return InvalidArgument("fake GPU spec '" + std::string(spec) + "': group " +
                             std::to_string(group_number) + " ('" + std::string(group) +
                             "'): " + what);
    };
    size_t x = group.find_first_of("xX");
    if (x == std::string_view::npos) return bad("expected <count>x<model>, e.g. 8xA100-80GB");
    std::string_view count_text = group.substr(0, x);
    std::string_view model = group.substr(x + 1);
    if (count_text.empty()) return bad("count must not be empty");
    int count = 0;
    for (char c : count_text) {
      if (!std::isdigit(static_cast<unsigned char>(c))) {
        return bad("count '" + std::string(count_text) + "' is not a number");
      }
      count = count * 10 + (c - '0');
      if (count > kMaxGpus) break;
    }
    if (count < 1 || count > kMaxGpus) {
      return bad("count must be 1.." + std::to_string(kMaxGpus) + ", got " +
                 std::string(count_text));
    }
    if (model.empty()) return bad("model must not be empty");
    for (char c : model) {
      if (!IsModelChar(c)) {
        return bad("model '" + std::string(model) +
                   "' may hold only letters, digits, '-', '_' and '.'");
      }
    }
    if (inventory.model.empty()) {
      inventory.model = std::string(model);
    } else if (inventory.model != model) {
      return bad("all GPUs of a node must have one model, got '" + inventory.model + "' and '" +
                 std::string(model) + "'");
    }
    if (inventory.gpus.size() + count > static_cast<size_t>(kMaxGpus)) {
      return bad("more than " + std::to_string(kMaxGpus) + " GPUs in all");
    }
    for (int i = 0; i < count; ++i) {
      model::Gpu gpu;
      gpu.index = static_cast<int>(inventory.gpus.size());
      gpu.uuid = "GPU-fake-" + std::string(hostname) + "-" + std::to_string(gpu.index);
      gpu.memory = KnownModelMemory(model);
      gpu.nvlink_domain = group_number - 1;
      inventory.gpus.push_back(std::move(gpu));
    }
    pos = comma + 1;
  }
  return FakeProbe(std::move(inventory));
}

Status FakeProbe::SetSample(const GpuSample& sample) {
  if (sample.index < 0 || sample.index >= static_cast<int>(samples_.size())) {
    return InvalidArgument("fake GPU sample: no GPU with index " + std::to_string(sample.index));
  }
  samples_[sample.index] = sample;
  return Status::Ok();
}

}  // namespace corral::agent
