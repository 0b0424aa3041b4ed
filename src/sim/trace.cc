#include "sim/trace.h"

#include <algorithm>
#include <array>
#include <climits>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>
#include <unordered_map>
#include <utility>

#include "common/json_parse.h"
#include "common/strings.h"
#include "sim/csv.h"

namespace corral::sim {

namespace {

using nlohmann::json;

// Bounds on input numbers. They are far above any real cluster and keep every product we form
// (gpus × milli × tasks, cpu × count) inside int64.
constexpr int64_t kMaxCount = 1'000'000;                 // GPUs or tasks of one job, cores
constexpr int64_t kMaxQuantity = 1'000'000'000'000'000;  // CPU milli, MiB, seconds, ids
constexpr int64_t kMaxGpusPerNode = 1024;
constexpr int64_t kMaxSpecNodes = 1'000'000;

// Capacity of the nodes of a synthetic cluster (ParseNodeSpec).
constexpr int64_t kSpecCpuMilliPerGpu = 16000;
constexpr int64_t kSpecMinCpuMilli = 8000;
constexpr int64_t kSpecMemoryMibPerGpu = 65536;

// Columns each CSV reader requires; DetectTraceFormat matches headers against them too.
constexpr std::array<std::string_view, 5> kOpenbNodeColumns = {"sn", "cpu_milli", "memory_mib",
                                                               "gpu", "model"};
constexpr std::array<std::string_view, 5> kOpenbPodColumns = {"name", "cpu_milli", "memory_mib",
                                                              "num_gpu", "gpu_milli"};
constexpr std::array<std::string_view, 3> kOpenbTimeColumns = {"creation_time", "deletion_time",
                                                               "scheduled_time"};
constexpr std::array<std::string_view, 5> kTiresiasColumns = {"job_id", "num_gpu", "submit_time",
                                                              "model_name", "duration"};
constexpr std::array<std::string_view, 8> kHeliosColumns = {
    "job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "submit_time", "duration"};

// Remembers the line where each key was first seen, to report a repeated id or name.
template <typename Key>
class UniqueKeys {
 public:
  // InvalidArgument "path:line: field 'field': duplicate value 'key' (first on line N)".
  Status Add(const Key& key, const std::string& path, int64_t line, std::string_view field) {
    auto [it, inserted] = first_line_.emplace(key, line);
    if (inserted) return Status::Ok();
    std::string text;
    if constexpr (std::is_same_v<Key, std::string>) {
      text = key;
    } else {
      text = std::to_string(key);
    }
    return FieldError(
        path, line, field,
        "duplicate value '" + text + "' (first on line " + std::to_string(it->second) + ")");
  }

 private:
  std::unordered_map<Key, int64_t> first_line_;
};

// A CSV job with the fields every CSV format fills the same way.
TraceJob CsvJob(int64_t id, std::string name, Seconds submit_time, Seconds duration) {
  TraceJob t;
  t.job.id = JobId(id);
  t.job.name = std::move(name);
  t.job.user = kDefaultUser;
  t.job.project = kDefaultProject;
  t.job.submit_time = submit_time;
  t.job.expected_duration = duration;
  t.duration = duration;
  return t;
}

// Validates the job and appends it; the error gets the "path:line: " prefix.
Status AppendValidated(Trace& trace, TraceJob&& job, const std::string& path, int64_t line) {
  Status valid = model::Validate(job.job);
  if (!valid.ok()) return AtLine(path, line, valid);
  trace.jobs.push_back(std::move(job));
  return Status::Ok();
}

std::vector<std::string> Split(std::string_view text, char separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t end = text.find(separator, start);
    parts.emplace_back(text.substr(start, end == std::string_view::npos ? end : end - start));
    if (end == std::string_view::npos) return parts;
    start = end + 1;
  }
}

// ---------------------------------------------------------------------------------------------
// JSON helpers

// JSON text of a value for an error message, shortened so that one bad line stays readable.
// Arrays and objects are named, not printed (printing recurses and they can be huge).
std::string Shown(const json& value) {
  if (value.is_array()) return "an array";
  if (value.is_object()) return "an object";
  std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
  constexpr size_t kMaxShown = 60;
  if (text.size() > kMaxShown) text = text.substr(0, kMaxShown) + "...";
  return text;
}

std::optional<int64_t> AsInt64(const json& value) {
  if (value.is_number_unsigned()) {
    uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (value.is_number_integer()) return value.get<int64_t>();
  return std::nullopt;
}

// Reads typed members of one JSON object of a JSON Lines file. Like CsvReader, a getter records
// the first error (with file, line and the member's dotted name) and returns a fallback; Finish()
// returns that error, or reports a member that no getter asked for (typo safety). A member whose
// value is null counts as absent.
class JsonObjectReader {
 public:
  // `object` and the keys the getters are given must outlive the reader; `prefix` is prepended
  // to member names in errors.
  JsonObjectReader(const json& object, const std::string& path, int64_t line,
                   std::string prefix = "")
      : object_(object), path_(path), line_(line), prefix_(std::move(prefix)) {}

  std::optional<int64_t> OptionalInt(std::string_view key, int64_t min, int64_t max) {
    const json* value = Member(key);
    if (value == nullptr) return std::nullopt;
    std::optional<int64_t> number = AsInt64(*value);
    if (!number) {
      Fail(key, "expected an integer, got " + Shown(*value));
      return std::nullopt;
    }
    if (*number < min || *number > max) {
      Fail(key, "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                    ", got " + std::to_string(*number));
      return std::nullopt;
    }
    return number;
  }

  int64_t Int(std::string_view key, int64_t fallback, int64_t min, int64_t max) {
    return OptionalInt(key, min, max).value_or(fallback);
  }

  int64_t RequiredInt(std::string_view key, int64_t min, int64_t max) {
    if (Member(key) == nullptr) Fail(key, "is required");
    return Int(key, min, min, max);
  }

  std::string String(std::string_view key, std::string fallback) {
    const json* value = Member(key);
    if (value == nullptr) return fallback;
    if (!value->is_string()) {
      Fail(key, "expected a string, got " + Shown(*value));
      return fallback;
    }
    return value->get<std::string>();
  }

  std::string RequiredString(std::string_view key) {
    if (Member(key) == nullptr) Fail(key, "is required");
    return String(key, "");
  }

  std::vector<std::string> StringList(std::string_view key) {
    std::vector<std::string> out;
    const json* value = Member(key);
    if (value == nullptr) return out;
    if (value->is_array()) {
      for (const json& item : *value) {
        if (!item.is_string()) break;
        out.push_back(item.get<std::string>());
      }
      if (out.size() == value->size()) return out;
    }
    Fail(key, "expected an array of strings, got " + Shown(*value));
    return {};
  }

  std::optional<std::vector<int64_t>> OptionalIntList(std::string_view key, int64_t min,
                                                      int64_t max) {
    std::vector<int64_t> out;
    const json* value = Member(key);
    if (value == nullptr) return std::nullopt;
    if (value->is_array()) {
      for (const json& item : *value) {
        std::optional<int64_t> number = AsInt64(item);
        if (!number || *number < min || *number > max) break;
        out.push_back(*number);
      }
      if (out.size() == value->size()) return out;
    }
    Fail(key, "expected an array of integers between " + std::to_string(min) + " and " +
                  std::to_string(max) + ", got " + Shown(*value));
    return std::nullopt;
  }

  std::map<std::string, std::string> StringMap(std::string_view key) {
    std::map<std::string, std::string> out;
    const json* value = Member(key);
    if (value == nullptr) return out;
    if (value->is_object()) {
      for (const auto& [k, v] : value->items()) {
        if (!v.is_string()) break;
        out.emplace(k, v.get<std::string>());
      }
      if (out.size() == value->size()) return out;
    }
    Fail(key, "expected an object of string values, got " + Shown(*value));
    return {};
  }

  // The nested object `key`, or nullptr when it is absent (an error if `required`) or not an
  // object. Read it with a reader made by Nested() and hand its Finish() to Absorb().
  const json* Object(std::string_view key, bool required) {
    const json* value = Member(key);
    if (value == nullptr) {
      if (required) Fail(key, "is required");
      return nullptr;
    }
    if (!value->is_object()) {
      Fail(key, "expected an object, got " + Shown(*value));
      return nullptr;
    }
    return value;
  }
  JsonObjectReader Nested(const json& object, std::string_view key) const {
    return JsonObjectReader(object, path_, line_, prefix_ + std::string(key) + ".");
  }
  void Absorb(const Status& status) {
    if (status_.ok()) status_ = status;
  }

  Status Finish() const {
    if (!status_.ok()) return status_;
    for (const auto& [key, value] : object_.items()) {
      if (std::find(used_.begin(), used_.end(), key) == used_.end()) {
        return FieldError(path_, line_, prefix_ + key, "unknown field");
      }
    }
    return Status::Ok();
  }

 private:
  const json* Member(std::string_view key) {
    used_.push_back(key);
    auto it = object_.find(key);
    if (it == object_.end() || it->is_null()) return nullptr;
    return &*it;
  }
  void Fail(std::string_view key, const std::string& what) {
    if (status_.ok()) status_ = FieldError(path_, line_, prefix_ + std::string(key), what);
  }

  const json& object_;
  const std::string& path_;
  int64_t line_;
  std::string prefix_;
  // The members asked for (a few per object: a vector beats a set; the keys are literals).
  std::vector<std::string_view> used_;
  Status status_;
};

// A line's JSON: nothing in the formats nests beyond 3 levels.
constexpr JsonLimits kLineLimits{LineReader::kMaxLineBytes, 16};

// Calls `visit(text, line)` for every line of a JSON Lines file that is not blank or a '#'
// comment, stopping at the first error.
Status ForEachJsonLine(const std::string& path,
                       const std::function<Status(std::string_view, int64_t)>& visit) {
  CORRAL_SIM_ASSIGN_OR_RETURN(LineReader lines, LineReader::Open(path));
  while (lines.Next()) {
    std::string_view text = lines.text();
    size_t first = text.find_first_not_of(" \t");
    if (first == std::string_view::npos || text[first] == '#') continue;
    CORRAL_RETURN_IF_ERROR(visit(text, lines.line()));
  }
  return lines.status();
}

// One line of a JSON Lines file as a JSON object (InvalidArgument naming the line otherwise).
Result<json> ParseJsonObjectLine(std::string_view text, const std::string& path, int64_t line) {
  auto object = ParseJson(text, Location(path, line), kLineLimits);
  if (!object.ok()) return object.status();
  if (!object->is_object()) {
    return InvalidArgument(Location(path, line) + ": expected a JSON object, got " +
                           Shown(*object));
  }
  return object;
}

// Writes `text` to `path`, replacing the file.
Status WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out.is_open()) return IoError("cannot open '" + path + "' for writing");
  out << text;
  out.close();
  if (!out) return IoError("cannot write '" + path + "'");
  return Status::Ok();
}

std::string DumpLine(const nlohmann::ordered_json& object) {
  // Text that is not valid UTF-8 (possible in CSV traces) is written as U+FFFD, not thrown on.
  return object.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}

// ---------------------------------------------------------------------------------------------
// JSON Lines jobs

model::TaskResources ResourcesFromJson(JsonObjectReader& r) {
  const int64_t gpus = r.RequiredInt("gpus", 0, kMaxCount);
  model::TaskResources res;
  res.gpus = GpuCount(gpus);
  res.gpu_milli = MilliGpu(r.Int("gpu_milli", gpus > 0 ? 1000 : 0, 0, kMaxQuantity));
  res.cpu = CpuMilli(r.Int("cpu_milli", 0, 0, kMaxQuantity));
  res.memory = MemoryMib(r.Int("memory_mib", 0, 0, kMaxQuantity));
  res.gpu_models = r.StringList("gpu_models");
  return res;
}

Result<TraceJob> JobFromJson(const json& object, const std::string& path, int64_t line,
                             int64_t default_id) {
  JsonObjectReader r(object, path, line);
  TraceJob t;
  model::Job& job = t.job;
  job.id = JobId(r.Int("id", default_id, 0, kMaxQuantity));
  job.name = r.String("name", "");
  job.user = r.String("user", kDefaultUser);
  job.project = r.String("project", kDefaultProject);
  job.priority = static_cast<int>(r.Int("priority", 0, INT_MIN, INT_MAX));
  job.submit_time = Seconds(r.RequiredInt("submit_time", 0, kMaxQuantity));
  t.duration = Seconds(r.RequiredInt("duration", 0, kMaxQuantity));
  if (auto limit = r.OptionalInt("time_limit", 1, kMaxQuantity)) job.time_limit = Seconds(*limit);
  if (auto expected = r.OptionalInt("expected_duration", 0, kMaxQuantity)) {
    job.expected_duration = Seconds(*expected);
  }
  job.tasks = static_cast<int>(r.Int("tasks", 1, 1, kMaxCount));
  if (const json* resources = r.Object("resources", /*required=*/true)) {
    JsonObjectReader nested = r.Nested(*resources, "resources");
    job.resources = ResourcesFromJson(nested);
    r.Absorb(nested.Finish());
  }
  CORRAL_RETURN_IF_ERROR(r.Finish());
  return t;
}

// The fixed-schema scan behind ScanJsonlJob: one pass over the line's bytes, no tree. Every
// accessor returns nullopt (or false) for anything outside the subset ScanJsonlJob documents,
// and the caller then gives the whole line to the general reader.
class JobLineScanner {
 public:
  explicit JobLineScanner(std::string_view text)
      : next_(text.data()), end_(text.data() + text.size()) {}

  bool Eat(char c) {
    if (next_ == end_ || *next_ != c) return false;
    ++next_;
    return true;
  }
  bool AtEnd() const { return next_ == end_; }

  // A string of printable ASCII without escapes (its text is its value).
  std::optional<std::string_view> String() {
    if (!Eat('"')) return std::nullopt;
    const char* start = next_;
    for (; next_ != end_; ++next_) {
      const auto c = static_cast<unsigned char>(*next_);
      if (c == '"') return std::string_view(start, next_++ - start);
      if (c < 0x20 || c >= 0x7f || c == '\\') return std::nullopt;
    }
    return std::nullopt;
  }

  // A JSON integer (no fraction, exponent or leading zero) of at most 18 digits, within
  // [min, max].
  std::optional<int64_t> Int(int64_t min, int64_t max) {
    constexpr int kMaxDigits = 18;  // 10^18 - 1 < INT64_MAX: no overflow
    const bool negative = Eat('-');
    const char* start = next_;
    int64_t value = 0;
    for (; next_ != end_ && *next_ >= '0' && *next_ <= '9'; ++next_) {
      if (next_ - start == kMaxDigits) return std::nullopt;
      value = value * 10 + (*next_ - '0');
    }
    const ptrdiff_t digits = next_ - start;
    if (digits == 0 || (digits > 1 && *start == '0')) return std::nullopt;
    if (next_ != end_ && (*next_ == '.' || *next_ == 'e' || *next_ == 'E')) return std::nullopt;
    if (negative) value = -value;
    if (value < min || value > max) return std::nullopt;
    return value;
  }

  // An array of strings (String()).
  std::optional<std::vector<std::string>> StringList() {
    if (!Eat('[')) return std::nullopt;
    std::vector<std::string> out;
    if (Eat(']')) return out;
    do {
      std::optional<std::string_view> item = String();
      if (!item) return std::nullopt;
      out.emplace_back(*item);
    } while (Eat(','));
    if (!Eat(']')) return std::nullopt;
    return out;
  }

  // Reads the members of an object whose keys are among `keys`: `member(k)` reads the value
  // after "keys[k]": and returns false to give up. False for an empty object, another key, a
  // repeated key or a syntax error.
  template <size_t N, typename Member>
  bool Members(const std::array<std::string_view, N>& keys, Member&& member) {
    static_assert(N <= 32);
    if (!Eat('{')) return false;
    uint32_t seen = 0;
    size_t k = 0;  // the key expected next: writers keep the order of `keys`
    do {
      if (!EatKey(keys[k])) {
        std::optional<std::string_view> key = String();
        if (!key) return false;
        k = std::find(keys.begin(), keys.end(), *key) - keys.begin();
        if (k == N) return false;
      }
      if (!Eat(':') || (seen & (uint32_t{1} << k)) != 0) return false;
      seen |= uint32_t{1} << k;
      if (!member(k)) return false;
      k = (k + 1) % N;
    } while (Eat(','));
    return Eat('}');
  }

 private:
  // The string "key" (no escapes in keys), consumed; false (nothing consumed) otherwise.
  bool EatKey(std::string_view key) {
    const size_t size = key.size() + 2;
    if (static_cast<size_t>(end_ - next_) < size || next_[0] != '"' || next_[size - 1] != '"' ||
        std::memcmp(next_ + 1, key.data(), key.size()) != 0) {
      return false;
    }
    next_ += size;
    return true;
  }

  const char* next_;
  const char* end_;
};

// ScanJsonlJob's "resources" (the ranges of ResourcesFromJson).
std::optional<model::TaskResources> ScanResources(JobLineScanner& scan) {
  enum Key : size_t { kGpus, kGpuMilli, kCpuMilli, kMemoryMib, kGpuModels };
  static constexpr std::array<std::string_view, 5> kKeys = {"gpus", "gpu_milli", "cpu_milli",
                                                            "memory_mib", "gpu_models"};
  model::TaskResources res;
  std::optional<int64_t> gpus, gpu_milli;
  std::optional<int64_t> cpu{0}, memory{0};
  auto read = [&](std::optional<int64_t>& out, int64_t max) {
    out = scan.Int(0, max);
    return out.has_value();
  };
  const bool ok = scan.Members(kKeys, [&](size_t key) {
    switch (key) {
      case kGpus:
        return read(gpus, kMaxCount);
      case kGpuMilli:
        return read(gpu_milli, kMaxQuantity);
      case kCpuMilli:
        return read(cpu, kMaxQuantity);
      case kMemoryMib:
        return read(memory, kMaxQuantity);
      case kGpuModels: {
        std::optional<std::vector<std::string>> models = scan.StringList();
        if (models) res.gpu_models = std::move(*models);
        return models.has_value();
      }
    }
    return false;
  });
  if (!ok || !gpus) return std::nullopt;
  res.gpus = GpuCount(*gpus);
  res.gpu_milli = MilliGpu(gpu_milli.value_or(*gpus > 0 ? 1000 : 0));
  res.cpu = CpuMilli(*cpu);
  res.memory = MemoryMib(*memory);
  return res;
}

nlohmann::ordered_json JobToJson(const TraceJob& t) {
  const model::Job& job = t.job;
  nlohmann::ordered_json out;
  out["id"] = job.id.value();
  out["name"] = job.name;
  out["user"] = job.user;
  out["project"] = job.project;
  out["priority"] = job.priority;
  out["submit_time"] = job.submit_time.value();
  out["duration"] = t.duration.value();
  if (job.time_limit) out["time_limit"] = job.time_limit->value();
  if (job.expected_duration) out["expected_duration"] = job.expected_duration->value();
  out["tasks"] = job.tasks;
  nlohmann::ordered_json& res = out["resources"];
  res["gpus"] = job.resources.gpus.value();
  res["gpu_milli"] = job.resources.gpu_milli.value();
  res["cpu_milli"] = job.resources.cpu.value();
  res["memory_mib"] = job.resources.memory.value();
  if (!job.resources.gpu_models.empty()) res["gpu_models"] = job.resources.gpu_models;
  return out;
}

// ---------------------------------------------------------------------------------------------
// JSON Lines nodes

Result<model::Node> NodeFromJson(const json& object, const std::string& path, int64_t line) {
  JsonObjectReader r(object, path, line);
  std::string name = r.RequiredString("name");
  std::string gpu_model = r.String("gpu_model", "");
  const int64_t gpus = r.RequiredInt("gpus", 0, kMaxGpusPerNode);
  const int64_t gpu_memory = r.Int("gpu_memory_mib", 0, 0, kMaxQuantity);
  const int64_t cpu = r.RequiredInt("cpu_milli", 0, kMaxQuantity);
  const int64_t memory = r.RequiredInt("memory_mib", 0, kMaxQuantity);
  std::map<std::string, std::string> labels = r.StringMap("labels");
  std::optional<std::vector<int64_t>> domains = r.OptionalIntList("nvlink_domains", 0, INT_MAX);
  CORRAL_RETURN_IF_ERROR(r.Finish());
  if (domains && domains->size() != static_cast<size_t>(gpus)) {
    return FieldError(path, line, "nvlink_domains",
                      "expected " + std::to_string(gpus) + " entries (one per GPU), got " +
                          std::to_string(domains->size()));
  }
  model::Node node = model::MakeNode(std::move(name), std::move(gpu_model), static_cast<int>(gpus),
                                     CpuMilli(cpu), MemoryMib(memory));
  node.labels = std::move(labels);
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    node.gpus[i].memory = MemoryMib(gpu_memory);
    if (domains) node.gpus[i].nvlink_domain = static_cast<int>((*domains)[i]);
  }
  return node;
}

Result<nlohmann::ordered_json> NodeToJson(const model::Node& node) {
  nlohmann::ordered_json out;
  out["name"] = node.name;
  out["gpu_model"] = node.gpu_model;
  out["gpus"] = node.gpus.size();
  const MemoryMib gpu_memory = node.gpus.empty() ? MemoryMib(0) : node.gpus[0].memory;
  bool any_domain = false;
  for (const model::Gpu& gpu : node.gpus) {
    if (gpu.memory != gpu_memory) {
      return InvalidArgument("node '" + node.name +
                             "': field 'gpu_memory_mib': GPUs of different memory sizes cannot "
                             "be written (the format has one size per node)");
    }
    any_domain = any_domain || gpu.nvlink_domain != 0;
  }
  out["gpu_memory_mib"] = gpu_memory.value();
  out["cpu_milli"] = node.cpu.value();
  out["memory_mib"] = node.memory.value();
  out["labels"] = node.labels;
  if (any_domain) {
    std::vector<int> domains;
    for (const model::Gpu& gpu : node.gpus) domains.push_back(gpu.nvlink_domain);
    out["nvlink_domains"] = domains;
  }
  return out;
}

// Validates the node and checks its name is new; errors get the "path:line: " prefix.
Status CheckNode(const model::Node& node, UniqueKeys<std::string>& names, const std::string& path,
                 int64_t line, std::string_view name_field) {
  Status valid = model::Validate(node);
  if (!valid.ok()) return AtLine(path, line, valid);
  return names.Add(node.name, path, line, name_field);
}

// ---------------------------------------------------------------------------------------------
// openb

// See ReadOpenbPods: a share only below one GPU; 0 with GPUs means whole GPUs.
int OpenbGpuMilli(int64_t num_gpu, int64_t gpu_milli) {
  if (num_gpu == 0) return 0;
  if (gpu_milli == 0) return 1000;
  return static_cast<int>(std::min<int64_t>(gpu_milli, 1000));
}

int OpenbPriority(std::string_view qos) { return qos == "LS" || qos == "Guaranteed" ? 1 : 0; }

std::vector<std::string> OpenbGpuModels(std::string_view gpu_spec) {
  if (gpu_spec.empty()) return {};
  return Split(gpu_spec, '|');
}

struct OpenbTimeColumns {
  CsvReader::Column created, deleted, scheduled;
};

// submit_time and duration of the current pod row (see ReadOpenbPods).
std::pair<Seconds, Seconds> OpenbTimes(CsvReader& csv, const OpenbTimeColumns& columns) {
  const Seconds created = csv.Time(columns.created);
  const Seconds deleted = csv.Time(columns.deleted);
  const Seconds started =
      csv.Text(columns.scheduled).empty() ? created : csv.Time(columns.scheduled);
  return {created, std::max(deleted - started, Seconds(0))};
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public functions

std::string NumberedName(std::string_view prefix, int64_t index, int min_digits) {
  std::string digits = std::to_string(index);
  if (static_cast<int>(digits.size()) < min_digits)
    digits.insert(0, min_digits - digits.size(), '0');
  return std::string(prefix) + digits;
}

std::optional<GangShape> SplitIntoGang(int64_t total_gpus, int64_t max_gpus_per_task) {
  if (max_gpus_per_task < 1 || total_gpus < 0) return std::nullopt;
  if (total_gpus <= max_gpus_per_task) return GangShape{1, total_gpus};
  const int64_t tasks = (total_gpus + max_gpus_per_task - 1) / max_gpus_per_task;
  if (total_gpus % tasks != 0 || tasks > INT_MAX) return std::nullopt;
  return GangShape{static_cast<int>(tasks), total_gpus / tasks};
}

Result<TraceFormat> ParseTraceFormat(std::string_view name) {
  for (TraceFormat format :
       {TraceFormat::kOpenb, TraceFormat::kTiresias, TraceFormat::kHelios, TraceFormat::kJsonl}) {
    if (name == TraceFormatName(format)) return format;
  }
  return InvalidArgument("unknown trace format '" + std::string(name) +
                         "' (expected openb, tiresias, helios or jsonl)");
}

std::string_view TraceFormatName(TraceFormat format) {
  switch (format) {
    case TraceFormat::kOpenb:
      return "openb";
    case TraceFormat::kTiresias:
      return "tiresias";
    case TraceFormat::kHelios:
      return "helios";
    case TraceFormat::kJsonl:
      return "jsonl";
  }
  return "unknown";
}

Result<TraceFormat> DetectTraceFormat(const std::string& path) {
  if (path.ends_with(".jsonl")) return TraceFormat::kJsonl;
  CORRAL_SIM_ASSIGN_OR_RETURN(CsvReader csv, CsvReader::Open(path));
  if (csv.HasColumns(kOpenbPodColumns)) return TraceFormat::kOpenb;
  if (csv.HasColumns(kTiresiasColumns)) return TraceFormat::kTiresias;
  if (csv.HasColumns(kHeliosColumns)) return TraceFormat::kHelios;
  return InvalidArgument(path + ": cannot tell the trace format from the header '" +
                         Join(csv.columns(), ",") +
                         "' (expected openb pod, tiresias or helios columns, or a .jsonl file)");
}

Result<std::vector<model::Node>> ReadOpenbNodes(const std::string& path, bool gpu_nodes_only) {
  CORRAL_SIM_ASSIGN_OR_RETURN(CsvReader csv, CsvReader::Open(path));
  CORRAL_RETURN_IF_ERROR(csv.RequireColumns(kOpenbNodeColumns));
  std::vector<model::Node> nodes;
  UniqueKeys<std::string> names;
  const CsvReader::Column sn = csv.ColumnOf("sn"), cpu_milli = csv.ColumnOf("cpu_milli"),
                          memory_mib = csv.ColumnOf("memory_mib"), gpu = csv.ColumnOf("gpu"),
                          model = csv.ColumnOf("model");
  while (csv.NextRow()) {
    const int64_t cpu = csv.Int(cpu_milli, 0, kMaxQuantity);
    const int64_t memory = csv.Int(memory_mib, 0, kMaxQuantity);
    const int64_t gpus = csv.Int(gpu, 0, kMaxGpusPerNode);
    if (!csv.ok()) break;
    model::Node node =
        model::MakeNode(std::string(csv.Text(sn)), gpus > 0 ? std::string(csv.Text(model)) : "",
                        static_cast<int>(gpus), CpuMilli(cpu), MemoryMib(memory));
    CORRAL_RETURN_IF_ERROR(CheckNode(node, names, path, csv.line(), "sn"));
    if (gpus > 0 || !gpu_nodes_only) nodes.push_back(std::move(node));
  }
  CORRAL_RETURN_IF_ERROR(csv.status());
  return nodes;
}

Result<Trace> ReadOpenbPods(const std::string& path) {
  CORRAL_SIM_ASSIGN_OR_RETURN(CsvReader csv, CsvReader::Open(path));
  CORRAL_RETURN_IF_ERROR(csv.RequireColumns(kOpenbPodColumns));
  const bool has_times = csv.HasColumn(kOpenbTimeColumns[0]);
  if (has_times) CORRAL_RETURN_IF_ERROR(csv.RequireColumns(kOpenbTimeColumns));
  Trace trace;
  const CsvReader::Column name = csv.ColumnOf("name"), cpu_milli = csv.ColumnOf("cpu_milli"),
                          memory_mib = csv.ColumnOf("memory_mib"),
                          num_gpu_column = csv.ColumnOf("num_gpu"),
                          gpu_milli_column = csv.ColumnOf("gpu_milli"), qos = csv.ColumnOf("qos"),
                          gpu_spec = csv.ColumnOf("gpu_spec");
  const OpenbTimeColumns times{csv.ColumnOf("creation_time"), csv.ColumnOf("deletion_time"),
                               csv.ColumnOf("scheduled_time")};
  while (csv.NextRow()) {
    const int64_t cpu = csv.Int(cpu_milli, 0, kMaxQuantity);
    const int64_t memory = csv.Int(memory_mib, 0, kMaxQuantity);
    const int64_t num_gpu = csv.Int(num_gpu_column, 0, kMaxCount);
    const int64_t gpu_milli = csv.Int(gpu_milli_column, 0, kMaxQuantity);
    const auto [submit, duration] =
        has_times ? OpenbTimes(csv, times) : std::pair<Seconds, Seconds>{Seconds(0), Seconds(0)};
    if (!csv.ok()) break;
    TraceJob t = CsvJob(static_cast<int64_t>(trace.jobs.size()), std::string(csv.Text(name)),
                        submit, duration);
    t.job.priority = OpenbPriority(csv.Text(qos));
    t.job.resources =
        model::MakeResources(static_cast<int>(num_gpu), OpenbGpuMilli(num_gpu, gpu_milli), cpu,
                             memory, OpenbGpuModels(csv.Text(gpu_spec)));
    CORRAL_RETURN_IF_ERROR(AppendValidated(trace, std::move(t), path, csv.line()));
  }
  CORRAL_RETURN_IF_ERROR(csv.status());
  return trace;
}

Result<Trace> ReadTiresias(const std::string& path, int max_gpus_per_task) {
  if (max_gpus_per_task < 1) {
    return InvalidArgument("max_gpus_per_task must be >= 1, got " +
                           std::to_string(max_gpus_per_task));
  }
  CORRAL_SIM_ASSIGN_OR_RETURN(CsvReader csv, CsvReader::Open(path));
  CORRAL_RETURN_IF_ERROR(csv.RequireColumns(kTiresiasColumns));
  Trace trace;
  UniqueKeys<int64_t> ids;
  while (csv.NextRow()) {
    const int64_t id = csv.Int("job_id", 0, kMaxQuantity);
    const int64_t num_gpu = csv.Int("num_gpu", 0, kMaxCount);
    const Seconds submit = csv.Time("submit_time");
    const Seconds duration = csv.Time("duration");
    if (!csv.ok()) break;
    CORRAL_RETURN_IF_ERROR(ids.Add(id, path, csv.line(), "job_id"));
    std::optional<GangShape> gang = SplitIntoGang(num_gpu, max_gpus_per_task);
    if (!gang) {
      return csv.FieldError("num_gpu", std::to_string(num_gpu) +
                                           " GPUs cannot be split into equal tasks of at most " +
                                           std::to_string(max_gpus_per_task) + " GPUs");
    }
    TraceJob t = CsvJob(id, std::string(csv.Text("model_name")), submit, duration);
    t.job.tasks = gang->tasks;
    const int per_task = static_cast<int>(gang->gpus_per_task);
    t.job.resources = model::MakeResources(per_task, per_task > 0 ? 1000 : 0, 0, 0);
    CORRAL_RETURN_IF_ERROR(AppendValidated(trace, std::move(t), path, csv.line()));
  }
  CORRAL_RETURN_IF_ERROR(csv.status());
  return trace;
}

Result<Trace> ReadHelios(const std::string& path) {
  CORRAL_SIM_ASSIGN_OR_RETURN(CsvReader csv, CsvReader::Open(path));
  CORRAL_RETURN_IF_ERROR(csv.RequireColumns(kHeliosColumns));
  Trace trace;
  while (csv.NextRow()) {
    const int64_t gpus = csv.Int("gpu_num", 0, kMaxCount);
    const int64_t cpus = csv.Int("cpu_num", 0, kMaxCount);
    const int64_t nodes = csv.Int("node_num", 0, kMaxCount);
    const Seconds submit = csv.Time("submit_time");
    const Seconds duration = csv.Time("duration");
    if (!csv.ok()) break;
    const int64_t tasks = std::max<int64_t>(nodes, 1);
    if (gpus % tasks != 0) {
      return csv.FieldError("gpu_num", std::to_string(gpus) + " GPUs cannot be split evenly over " +
                                           std::to_string(tasks) + " nodes (node_num)");
    }
    TraceJob t = CsvJob(static_cast<int64_t>(trace.jobs.size()), std::string(csv.Text("job_id")),
                        submit, duration);
    if (!csv.Text("user").empty()) t.job.user = csv.Text("user");
    if (!csv.Text("vc").empty()) t.job.project = csv.Text("vc");
    t.job.tasks = static_cast<int>(tasks);
    const int per_task = static_cast<int>(gpus / tasks);
    t.job.resources =
        model::MakeResources(per_task, per_task > 0 ? 1000 : 0, cpus * 1000 / tasks, 0);
    CORRAL_RETURN_IF_ERROR(AppendValidated(trace, std::move(t), path, csv.line()));
  }
  CORRAL_RETURN_IF_ERROR(csv.status());
  return trace;
}

Result<Trace> ReadJsonl(const std::string& path) {
  Trace trace;
  UniqueKeys<int64_t> ids;
  Status status = ForEachJsonLine(path, [&](std::string_view text, int64_t line) {
    const auto default_id = static_cast<int64_t>(trace.jobs.size());
    std::optional<TraceJob> scanned = ScanJsonlJob(text, default_id);
    if (!scanned) {
      CORRAL_SIM_ASSIGN_OR_RETURN(json object, ParseJsonObjectLine(text, path, line));
      CORRAL_SIM_ASSIGN_OR_RETURN(scanned, JobFromJson(object, path, line, default_id));
    }
    TraceJob& t = *scanned;
    CORRAL_RETURN_IF_ERROR(ids.Add(t.job.id.value(), path, line, "id"));
    return AppendValidated(trace, std::move(t), path, line);
  });
  if (!status.ok()) return status;
  return trace;
}

std::optional<TraceJob> ScanJsonlJob(std::string_view line, int64_t default_id) {
  // The ranges and defaults are JobFromJson's; a member it would reject makes the scan give up.
  JobLineScanner scan(line);
  std::optional<TraceJob> scanned(std::in_place);
  TraceJob& t = *scanned;
  model::Job& job = t.job;
  job.id = JobId(default_id);
  job.user = kDefaultUser;
  job.project = kDefaultProject;
  bool has_submit = false, has_duration = false, has_resources = false;
  auto integer = [&](int64_t min, int64_t max, auto&& store) {
    std::optional<int64_t> value = scan.Int(min, max);
    if (value) store(*value);
    return value.has_value();
  };
  auto text = [&](std::string& out) {
    std::optional<std::string_view> value = scan.String();
    if (value) out = *value;
    return value.has_value();
  };
  enum Key : size_t {
    kId,
    kName,
    kUser,
    kProject,
    kPriority,
    kSubmitTime,
    kDuration,
    kTimeLimit,
    kExpectedDuration,
    kTasks,
    kResources
  };
  static constexpr std::array<std::string_view, 11> kKeys = {
      "id",          "name",     "user",       "project",           "priority",
      "submit_time", "duration", "time_limit", "expected_duration", "tasks",
      "resources"};
  const bool ok = scan.Members(kKeys, [&](size_t key) {
    switch (key) {
      case kId:
        return integer(0, kMaxQuantity, [&](int64_t v) { job.id = JobId(v); });
      case kName:
        return text(job.name);
      case kUser:
        return text(job.user);
      case kProject:
        return text(job.project);
      case kPriority:
        return integer(INT_MIN, INT_MAX, [&](int64_t v) { job.priority = static_cast<int>(v); });
      case kSubmitTime:
        has_submit = true;
        return integer(0, kMaxQuantity, [&](int64_t v) { job.submit_time = Seconds(v); });
      case kDuration:
        has_duration = true;
        return integer(0, kMaxQuantity, [&](int64_t v) { t.duration = Seconds(v); });
      case kTimeLimit:
        return integer(1, kMaxQuantity, [&](int64_t v) { job.time_limit = Seconds(v); });
      case kExpectedDuration:
        return integer(0, kMaxQuantity, [&](int64_t v) { job.expected_duration = Seconds(v); });
      case kTasks:
        return integer(1, kMaxCount, [&](int64_t v) { job.tasks = static_cast<int>(v); });
      case kResources: {
        std::optional<model::TaskResources> res = ScanResources(scan);
        if (res) job.resources = std::move(*res);
        has_resources = res.has_value();
        return has_resources;
      }
    }
    return false;
  });
  if (!ok || !scan.AtEnd() || !has_submit || !has_duration || !has_resources) scanned.reset();
  return scanned;
}

Status WriteJsonl(const Trace& trace, const std::string& path) {
  std::string text;
  for (const TraceJob& t : trace.jobs) text += DumpLine(JobToJson(t));
  return WriteFile(path, text);
}

Result<Trace> ReadTrace(const std::string& path, TraceFormat format, int max_gpus_per_task) {
  switch (format) {
    case TraceFormat::kOpenb:
      return ReadOpenbPods(path);
    case TraceFormat::kTiresias:
      return ReadTiresias(path, max_gpus_per_task);
    case TraceFormat::kHelios:
      return ReadHelios(path);
    case TraceFormat::kJsonl:
      return ReadJsonl(path);
  }
  return InvalidArgument("unknown trace format");
}

Result<std::vector<model::Node>> ReadNodesJsonl(const std::string& path) {
  std::vector<model::Node> nodes;
  UniqueKeys<std::string> names;
  Status status = ForEachJsonLine(path, [&](std::string_view text, int64_t line) {
    CORRAL_SIM_ASSIGN_OR_RETURN(json object, ParseJsonObjectLine(text, path, line));
    CORRAL_SIM_ASSIGN_OR_RETURN(model::Node node, NodeFromJson(object, path, line));
    CORRAL_RETURN_IF_ERROR(CheckNode(node, names, path, line, "name"));
    nodes.push_back(std::move(node));
    return Status::Ok();
  });
  if (!status.ok()) return status;
  return nodes;
}

Status WriteNodesJsonl(const std::vector<model::Node>& nodes, const std::string& path) {
  std::string text;
  for (const model::Node& node : nodes) {
    CORRAL_SIM_ASSIGN_OR_RETURN(nlohmann::ordered_json object, NodeToJson(node));
    text += DumpLine(object);
  }
  return WriteFile(path, text);
}

Result<std::vector<model::Node>> ParseNodeSpec(std::string_view spec) {
  auto bad = [](std::string_view part, std::string_view why) {
    return InvalidArgument("node spec part '" + std::string(part) + "': " + std::string(why) +
                           " (expected COUNTxGPUSxMODEL[@PER_RACK], e.g. 16x4xV100@8)");
  };
  std::vector<model::Node> nodes;
  int64_t racks = 0;  // racks named so far
  for (const std::string& whole : Split(spec, ',')) {
    const size_t at = whole.find('@');
    const std::string part = whole.substr(0, at);
    std::optional<int64_t> per_rack;
    if (at != std::string::npos) {
      per_rack = ParseInt64(std::string_view(whole).substr(at + 1));
      if (!per_rack || *per_rack < 1) return bad(whole, "PER_RACK must be a positive integer");
    }
    const size_t x1 = part.find('x');
    const size_t x2 = x1 == std::string::npos ? x1 : part.find('x', x1 + 1);
    if (x2 == std::string::npos) return bad(part, "missing 'x'");
    const std::string_view text = part;
    std::optional<int64_t> count = ParseInt64(text.substr(0, x1));
    std::optional<int64_t> gpus = ParseInt64(text.substr(x1 + 1, x2 - x1 - 1));
    const std::string model = part.substr(x2 + 1);
    if (!count || *count < 1 || *count + static_cast<int64_t>(nodes.size()) > kMaxSpecNodes) {
      return bad(part, "COUNT must be an integer between 1 and " + std::to_string(kMaxSpecNodes) +
                           " in all");
    }
    if (!gpus || *gpus < 0 || *gpus > kMaxGpusPerNode) {
      return bad(part, "GPUS must be an integer between 0 and " + std::to_string(kMaxGpusPerNode));
    }
    if (*gpus == 0 ? model != "cpu" : model.empty()) {
      return bad(part, *gpus == 0 ? "a node without GPUs is written COUNTx0xcpu"
                                  : "MODEL must not be empty");
    }
    const CpuMilli cpu(std::max(kSpecCpuMilliPerGpu * *gpus, kSpecMinCpuMilli));
    const MemoryMib memory(kSpecMemoryMibPerGpu * std::max<int64_t>(*gpus, 1));
    for (int64_t i = 0; i < *count; ++i) {
      nodes.push_back(model::MakeNode(NumberedName("n", static_cast<int64_t>(nodes.size()), 4),
                                      *gpus > 0 ? model : "", static_cast<int>(*gpus), cpu,
                                      memory));
      if (per_rack) {
        nodes.back().labels[model::kRackLabel] = NumberedName("rack", racks + i / *per_rack, 2);
      }
    }
    if (per_rack) racks += (*count + *per_rack - 1) / *per_rack;
  }
  return nodes;
}

Result<std::vector<model::Node>> LoadNodes(const std::string& source) {
  constexpr std::string_view kGenPrefix = "gen:";
  if (source.starts_with(kGenPrefix)) return ParseNodeSpec(source.substr(kGenPrefix.size()));
  if (source.ends_with(".jsonl")) return ReadNodesJsonl(source);
  return ReadOpenbNodes(source, /*gpu_nodes_only=*/true);
}

}  // namespace corral::sim
