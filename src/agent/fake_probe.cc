#include "agent/fake_probe.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>

namespace corral::agent {
namespace {

constexpr int kMaxGpus = 64;
constexpr int kIdleCelsius = 30;
constexpr double kCelsiusPerPercent = 0.45;
constexpr int kIdlePowerPercent = 15;  // of the board power

// An integer in [lo, hi] from a task's environment; nullopt when unset or not one.
std::optional<int64_t> EnvInt(const TaskLaunch& launch, const std::string& name, int64_t lo,
                              int64_t hi) {
  auto it = launch.env.find(name);
  if (it == launch.env.end()) return std::nullopt;
  int64_t v = 0;
  const char* end = it->second.data() + it->second.size();
  auto [p, ec] = std::from_chars(it->second.data(), end, v);
  if (ec != std::errc() || p != end || v < lo || v > hi) return std::nullopt;
  return v;
}

bool IsModelChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
}

}  // namespace

int KnownModelPowerWatts(std::string_view model) {
  if (model.rfind("A100", 0) == 0) return 400;
  if (model.rfind("H100", 0) == 0 || model.rfind("H200", 0) == 0) return 700;
  if (model.rfind("V100", 0) == 0) return 300;
  if (model == "T4") return 70;
  return 300;
}

FakeProbe::FakeProbe(GpuInventory inventory) : inventory_(std::move(inventory)) {
  const int idle_mw = KnownModelPowerWatts(inventory_.model) * 10 * kIdlePowerPercent;
  for (const model::Gpu& gpu : inventory_.gpus) {
    GpuSample s;
    s.index = gpu.index;
    s.gpu_utilization_percent = 0;
    s.memory_utilization_percent = 0;
    s.memory_used = MemoryMib(0);
    s.power_milliwatts = idle_mw;
    s.temperature_celsius = kIdleCelsius;
    samples_.push_back(s);
  }
}

void FakeProbe::SetDefaultUtilization(int percent) {
  default_utilization_ = std::clamp(percent, 0, 100);
}

Result<std::vector<GpuSample>> FakeProbe::Sample() {
  std::vector<GpuSample> out = samples_;
  if (!tasks_) return out;
  std::vector<bool> loaded(out.size(), false);
  for (const RunningTask& task : tasks_()) {
    const TaskLaunch& launch = task.launch;
    const double share = std::clamp(launch.gpu_milli.value(), int64_t{0}, int64_t{1000}) / 1000.0;
    const int64_t utilization =
        EnvInt(launch, "FAKE_GPU_UTILIZATION", 0, 100).value_or(default_utilization_);
    for (int index : launch.gpus) {
      if (index < 0 || index >= static_cast<int>(out.size())) continue;
      GpuSample& s = out[index];
      const int64_t total = inventory_.gpus[index].memory.value();
      const int64_t memory =
          EnvInt(launch, "FAKE_GPU_MEMORY_MIB", 0, total).value_or(total * 2 / 5);
      if (!loaded[index]) {  // the first task on a GPU replaces its idle readings
        loaded[index] = true;
        s.gpu_utilization_percent = 0;
        s.memory_used = MemoryMib(0);
      }
      s.gpu_utilization_percent =
          std::min<int64_t>(100, *s.gpu_utilization_percent + std::llround(utilization * share));
      const MemoryMib used(std::llround(static_cast<double>(memory) * share));
      s.memory_used = MemoryMib(std::min(total, s.memory_used->value() + used.value()));
      s.processes.push_back({task.pid, used});
    }
  }
  const int board_mw = KnownModelPowerWatts(inventory_.model) * 1000;
  const int idle_mw = board_mw / 100 * kIdlePowerPercent;
  for (size_t i = 0; i < out.size(); ++i) {
    if (!loaded[i]) continue;
    GpuSample& s = out[i];
    const int util = *s.gpu_utilization_percent;
    s.memory_utilization_percent = util / 2;
    s.power_milliwatts = idle_mw + (board_mw - idle_mw) / 100 * util;
    s.temperature_celsius = kIdleCelsius + static_cast<int>(std::lround(util * kCelsiusPerPercent));
  }
  return out;
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
