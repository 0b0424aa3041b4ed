#include "agent/gpu_probe.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <cstdlib>

namespace corral::agent {
namespace {

std::string Upper(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool IsVendorWord(const std::string& upper) {
  return upper == "NVIDIA" || upper == "TESLA" || upper == "QUADRO" || upper == "GEFORCE";
}

bool IsFormFactorWord(const std::string& upper) {
  static constexpr std::array<const char*, 12> kWords = {"SXM",   "SXM2", "SXM3",  "SXM4",
                                                         "SXM5",  "PCIE", "NVL",   "HBM2",
                                                         "HBM2E", "HBM3", "HBM3E", "MIG"};
  return std::any_of(kWords.begin(), kWords.end(), [&](const char* w) { return upper == w; });
}

// "80GB" -> 80; anything else -> 0.
int MemoryWordGb(const std::string& upper) {
  if (upper.size() < 3 || upper.compare(upper.size() - 2, 2, "GB") != 0) return 0;
  int gb = 0;
  for (size_t i = 0; i + 2 < upper.size(); ++i) {
    if (!std::isdigit(static_cast<unsigned char>(upper[i])) || gb > 100000) return 0;
    gb = gb * 10 + (upper[i] - '0');
  }
  return gb;
}

}  // namespace

std::string NormalizeGpuModel(std::string_view nvml_name, MemoryMib memory) {
  std::vector<std::string> family;
  int size_gb = 0;
  size_t i = 0;
  while (i < nvml_name.size()) {
    while (i < nvml_name.size() && (nvml_name[i] == ' ' || nvml_name[i] == '-')) ++i;
    size_t start = i;
    while (i < nvml_name.size() && nvml_name[i] != ' ' && nvml_name[i] != '-') ++i;
    if (start == i) continue;
    std::string word(nvml_name.substr(start, i - start));
    std::string upper = Upper(word);
    if (IsVendorWord(upper) || IsFormFactorWord(upper)) continue;
    if (int gb = MemoryWordGb(upper); gb > 0) {
      size_gb = gb;
      continue;
    }
    family.push_back(upper);
  }
  std::string name;
  for (const std::string& w : family) {
    if (!name.empty()) name += '-';
    name += w;
  }
  if (name.empty()) return std::string(nvml_name);  // nothing recognisable: keep NVML's name

  const bool sized = name == "A100" || name == "A800" || name == "V100";
  if (!sized) return name;
  if (size_gb == 0) size_gb = static_cast<int>((memory.value() + 512) / 1024);
  if (size_gb == 0) return name;
  if (name == "V100") return "V100M" + std::to_string(size_gb);
  return name + "-" + std::to_string(size_gb) + "GB";
}

MemoryMib KnownModelMemory(std::string_view model) {
  struct Known {
    const char* model;
    int64_t mib;
  };
  static constexpr std::array<Known, 8> kKnown = {{
      {"A100-80GB", 81920},
      {"A100-40GB", 40960},
      {"H100", 81920},
      {"H200", 143771},
      {"V100", 16384},
      {"V100M16", 16384},
      {"V100M32", 32768},
      {"T4", 15360},
  }};
  for (const Known& k : kKnown) {
    if (model == k.model) return MemoryMib(k.mib);
  }
  return MemoryMib(16384);
}

}  // namespace corral::agent
