#include "cli/commands.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <optional>
#include <thread>
#include <tuple>
#include <utility>

#include "cli/api_client.h"
#include "cli/job_channel.h"
#include "cli/job_wait.h"
#include "cli/shell_command.h"
#include "cli/terminal_text.h"
#include "common/build_info.h"
#include "common/config_file.h"
#include "common/duration.h"
#include "common/json_parse.h"
#include "common/strings.h"
#include "model/dependency.h"
#include "model/states.h"
#include "model/submit_limits.h"
#include "model/warning_signal.h"
#include "protocol/api_account.h"
#include "protocol/api_environment.h"
#include "protocol/api_job.h"
#include "protocol/api_job_report.h"
#include "protocol/api_node.h"
#include "protocol/api_partitions.h"
#include "protocol/api_project.h"
#include "protocol/api_scheduling.h"
#include "protocol/api_session.h"
#include "protocol/array_spec.h"
#include "protocol/batch_script.h"
#include "protocol/environment_ref.h"
#include "protocol/job_spec.h"
#include "protocol/names.h"
#include "protocol/size_flag.h"

namespace corral::cli {

namespace {

// `value` percent-encoded for a URL's query (RFC 3986: all but the unreserved characters), so
// that a job name's '+', '=' or ',' reach the server as themselves.
std::string QueryValue(std::string_view value) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    }
  }
  return out;
}

using nlohmann::json;

int ExitCodeOf(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return 0;
    case StatusCode::kInvalidArgument:
      return 2;
    case StatusCode::kNotFound:
      return 3;
    case StatusCode::kUnauthenticated:
    case StatusCode::kPermissionDenied:
      return 4;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      return 5;
    case StatusCode::kResourceExhausted:
      // A server's limit that frees up with time (429 with Retry-After): try again later. A
      // file over a size limit is not that.
      return s.retry_after() ? 6 : 1;
    default:
      return 1;
  }
}

int Fail(const Status& s) {
  std::cerr << "corral: " << s.message() << "\n";
  return ExitCodeOf(s);
}

// Prints rows as an aligned table with a header.
void PrintTable(const std::vector<std::string>& header,
                const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width(header.size());
  for (size_t i = 0; i < header.size(); ++i) width[i] = header[i].size();
  for (const auto& r : rows) {
    for (size_t i = 0; i < r.size() && i < width.size(); ++i)
      width[i] = std::max(width[i], r[i].size());
  }
  auto line = [&](const std::vector<std::string>& r) {
    std::string out;
    for (size_t i = 0; i < r.size(); ++i) {
      out += r[i];
      if (i + 1 < r.size()) out += std::string(width[i] - r[i].size() + 2, ' ');
    }
    std::cout << out << "\n";
  };
  line(header);
  for (const auto& r : rows) line(r);
}

std::string Str(const json& j, const char* key) {
  if (!j.contains(key) || j[key].is_null()) return "";
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

// Prints the server's answer as JSON when `output` is "json", else the line `text`.
void PrintAnswer(const json& answer, const std::string& output, const std::string& text) {
  std::cout << (output == "json" ? answer.dump(2) : text) << "\n";
}

// Local time, "2024-01-31 12:00:00"; "" for none. The time zone is read once (tzset):
// localtime() and strftime() look at /etc/localtime again on every call, a stat() per row of a
// 1,000-job listing.
std::string Time(std::optional<Seconds> time) {
  if (!time) return "";
  static const bool zone_read = [] {
    tzset();
    return true;
  }();
  (void)zone_read;
  std::time_t t = time->value();
  std::tm local{};
  if (localtime_r(&t, &local) == nullptr) return "";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d", local.tm_year + 1900,
                local.tm_mon + 1, local.tm_mday, local.tm_hour, local.tm_min, local.tm_sec);
  return buf;
}

MilliGpu MilliOf(double gpus) { return MilliGpu(std::llround(gpus * 1000)); }

// `value` with at most `decimals` decimals, trailing zeros dropped: "16", "12.5".
std::string Decimal(double value, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  std::string out = buf;
  if (out.find('.') != std::string::npos) {
    out.erase(out.find_last_not_of('0') + 1);
    if (out.back() == '.') out.pop_back();
  }
  return out;
}

// GPUs of milli-GPU: "4", "0.5".
std::string Gpus(MilliGpu milli) { return Decimal(static_cast<double>(milli.value()) / 1000, 3); }

// Cores of milli-CPU: "16", "0.5".
std::string Cores(CpuMilli cpu) { return Decimal(static_cast<double>(cpu.value()) / 1000, 1); }

// A size in MiB as people read it: "512 MiB", "62.5 GiB", "2 TiB".
std::string Mebibytes(MemoryMib memory) {
  const double mib = static_cast<double>(memory.value());
  if (mib >= 1024.0 * 1024) return Decimal(mib / (1024.0 * 1024), 1) + " TiB";
  if (mib >= 1024) return Decimal(mib / 1024, 1) + " GiB";
  return Decimal(mib, 0) + " MiB";
}

// A project's sharing in words: "quota 4 GPUs (A100 2), weight 1, limit 8 GPUs, no user limit".
std::string SharingText(const protocol::ProjectSharing& s) {
  std::string out = "quota " + Gpus(s.quota) + " GPUs";
  std::string models;
  for (const auto& [model, quota] : s.model_quota) {
    models += (models.empty() ? "" : ", ") + model + " " + Gpus(quota);
  }
  if (!models.empty()) out += " (" + models + ")";
  out += ", weight " + Decimal(s.weight, 3);
  out += s.limit ? ", limit " + Gpus(*s.limit) + " GPUs" : ", no limit";
  out += s.user_limit ? ", user limit " + Gpus(*s.user_limit) + " GPUs" : ", no user limit";
  return out;
}

// Submit limits in words: "at most 10 pending jobs, no limit on submissions per minute".
std::string LimitsText(const model::SubmitLimits& l) {
  auto limit = [](const std::optional<int64_t>& n, const std::string& what) {
    return n ? "at most " + std::to_string(*n) + " " + what : "no limit on " + what;
  };
  return limit(l.max_pending_jobs, "pending jobs") + ", " +
         limit(l.max_submits_per_minute, "submissions per minute");
}

// An optional number as a table cell: "" for none.
std::string Cell(std::optional<int> value) { return value ? std::to_string(*value) : ""; }
std::string Cell(std::optional<int64_t> value) { return value ? std::to_string(*value) : ""; }

// A submit limit flag (corral user/project set-limits): a count in 0..1e9, or "none".
Result<std::optional<int64_t>> LimitFlag(const std::string& text, const std::string& flag) {
  if (text == "none") return std::optional<int64_t>();
  int64_t value = 0;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (err != std::errc() || end != text.data() + text.size() || text.empty() || value < 0 ||
      value > model::kMaxSubmitLimit) {
    return InvalidArgument(flag + ": expected a number in 0.." +
                           std::to_string(model::kMaxSubmitLimit) + " or 'none', got '" + text +
                           "'");
  }
  return std::optional<int64_t>(value);
}

// `--shell`: the command's words joined with spaces into the one line /bin/sh -c runs (not
// quoted: `-- 'echo $HOME' '|' wc` is the pipeline it reads as).
json ShellCommand(const std::vector<std::string>& words) { return json::array({Join(words, " ")}); }

// `--env NAME=VALUE` flags as a spec's "env"; InvalidArgument naming the flag for anything else.
Result<json> EnvFlags(const std::vector<std::string>& flags) {
  json env = json::object();
  for (const auto& kv : flags) {
    const size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("--env: expected NAME=VALUE, got '" + kv +
                             "' (an environment to run in is --environment NAME)");
    }
    env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

// Runs `body(client)` with the configured client (after `adjust`, when given); prints errors;
// returns the exit code.
template <typename Body>
int WithClient(Body body, const std::function<void(ClientConfig&)>& adjust = {}) {
  auto config = LoadClientConfig();
  if (!config.ok()) return Fail(config.status());
  if (adjust) adjust(*config);
  ApiClient client(*config);
  Status s = body(client);
  return s.ok() ? 0 : Fail(s);
}

// GETs `path`; with `-o json` (`output`) prints the answer as the server sent it, else decodes it
// with `parse` (a protocol codec) and hands the typed result to `print`.
template <typename Parse, typename Print>
Status GetAndPrint(ApiClient& client, const std::string& path, const std::string& output,
                   Parse parse, Print print) {
  auto answer = client.Get(path);
  if (!answer.ok()) return answer.status();
  if (output == "json") {
    std::cout << answer->dump(2) << "\n";
    return Status::Ok();
  }
  auto decoded = parse(*answer);
  if (!decoded.ok()) return decoded.status();
  print(*decoded);
  return Status::Ok();
}

// What `corral submit` was given; a number not given is nullopt, and one given goes into the
// spec as it is (a negative one too: the spec's check names its field).
struct SubmitFlags {
  std::string file, name, project, workdir;
  // "N", or "MIN-MAX" for an elastic job (protocol::ParseSizeFlag).
  std::optional<std::string> gpus, tasks, nodes, gpus_per_node;
  std::optional<int> gpu_milli, gpu_step, priority, max_restarts, procs_per_node;
  std::string launcher, environment;
  std::optional<int64_t> cpus, cpu_milli, memory_mib;
  std::optional<std::string> time_limit;        // as typed: ParseTimeLimit's forms
  std::optional<std::string> signal;            // SIG[@SECONDS] (model::ParseWarningSignal)
  std::optional<std::string> checkpoint_grace;  // as typed: ParseDuration's forms
  // --dependency (Slurm's text) and the shorthands' ids, all to be met (model/dependency.h).
  std::optional<std::string> dependency;
  std::vector<std::string> after, afterok, afternotok, afterany;
  bool kill_on_invalid_dep = false;
  std::vector<std::string> gpu_models, env, command;
  bool shell = false;
  bool no_check = false;                    // --no-check: the server alone checks the spec
  bool wait = false, follow = false;        // --wait, --follow (which implies --wait)
  std::optional<std::string> array, sweep;  // Slurm's --array; a sweep file
  std::string output_file, error_file, partition, qos;
  std::string verb = "submit";           // the command, for its messages: submit or batch
  std::string script;                    // corral batch: the script's file
  std::vector<std::string> script_args;  // and its arguments
  std::string output = "table";
};

// The dependency text of --dependency and the --after* shorthands together (all to be met), in
// its canonical form; empty when none was given. Errors name --dependency.
Result<std::string> DependencyFlags(const SubmitFlags& f) {
  std::string text = f.dependency.value_or("");
  for (const auto& [type, ids] :
       {std::pair{"after", &f.after}, std::pair{"afterok", &f.afterok},
        std::pair{"afternotok", &f.afternotok}, std::pair{"afterany", &f.afterany}}) {
    for (const std::string& id : *ids) text += (text.empty() ? "" : ",") + (type + (":" + id));
  }
  auto dependencies = model::ParseDependencies(text, "--dependency");
  if (!dependencies.ok()) return dependencies.status();
  return model::ToString(*dependencies);
}

// After a job's stdout (`printed`'s log) turned out empty: says on stderr how to read its
// stderr when it has one, as a job that wrote only there (a Python traceback) looks silent.
void HintAtStderr(ApiClient& client, LogRequest printed) {
  printed.stream = LogStream::kStderr;
  auto size = LogSize(client, printed);
  if (!size.ok() || *size == 0) return;
  std::string command = "corral logs " + std::to_string(printed.job.value());
  if (printed.task != 0) command += " --task " + std::to_string(printed.task);
  if (printed.generation) command += " --generation " + std::to_string(*printed.generation);
  std::cerr << "corral: job " << printed.job.value() << " wrote nothing to stdout and " << *size
            << " bytes to stderr: " << command << " --stderr (or --all for both)\n";
}

// True when `refusal` is a server's "field 'FIELD': unknown field": a server older than the field.
bool IsUnknownToServer(const Status& refusal, const std::string& field) {
  return refusal.code() == StatusCode::kInvalidArgument &&
         refusal.message().find("field '" + field + "': unknown field") != std::string::npos;
}

// A batch script's text: at most protocol::kMaxScriptBytes. NotFound / InvalidArgument naming
// the file.
Result<std::string> ReadScript(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFound(path + ": cannot read the script: " + std::strerror(errno));
  std::string text(protocol::kMaxScriptBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > protocol::kMaxScriptBytes) {
    return InvalidArgument(path + ": a batch script may have at most " +
                           std::to_string(protocol::kMaxScriptBytes) + " bytes");
  }
  return text;
}

// Refuses `spec` as the server would (protocol::ExpandBatchScript, then ParseJobSpec), so that
// a bad spec is refused before any request: InvalidArgument naming the field. A field this CLI does
// not know may be one a newer server knows: the error says how to go on.
Status CheckSpec(const json& spec) {
  auto expanded = protocol::ExpandBatchScript(spec);
  if (!expanded.ok()) return expanded.status();
  auto parsed = protocol::ParseJobSpec(expanded->spec);
  if (parsed.ok()) return Status::Ok();
  if (parsed.status().message().find(": unknown field") == std::string::npos) {
    return parsed.status();
  }
  return InvalidArgument(parsed.status().message() + " (unknown to this corral " + kVersion +
                         "; if the server is newer, upgrade corral here, or pass --no-check to "
                         "let the server decide)");
}

// --gpus / --gpus-per-node (GPUs per task) and --tasks / --nodes (tasks) over `spec` (a spec
// file's): one number sets the field, a range MIN-MAX makes the job elastic (docs/elastic.md)
// by GPUs or by nodes, with --gpu-step; either replaces what the file said of that size. Errors
// name the flag.
Status ApplySizeFlags(const SubmitFlags& f, json& spec) {
  for (const auto& [flag, value, other_flag, other] :
       {std::tuple{"--nodes", &f.nodes, "--tasks", &f.tasks},
        {"--gpus-per-node", &f.gpus_per_node, "--gpus", &f.gpus}}) {
    if (*value && *other && **value != **other) {
      return InvalidArgument(std::string(flag) + " contradicts " + other_flag);
    }
  }
  std::optional<model::ElasticUnit> ranged;
  for (const auto& [flag, text, unit] :
       {std::tuple{f.gpus ? "--gpus" : "--gpus-per-node", f.gpus ? &f.gpus : &f.gpus_per_node,
                   model::ElasticUnit::kGpus},
        {f.tasks ? "--tasks" : "--nodes", f.tasks ? &f.tasks : &f.nodes,
         model::ElasticUnit::kNodes}}) {
    if (!*text) continue;
    auto size = protocol::ParseSizeFlag(**text, flag);
    if (!size.ok()) return size.status();
    const bool by_gpus = unit == model::ElasticUnit::kGpus;
    json& holder = by_gpus ? spec["resources"] : spec;
    const char* field = by_gpus ? "gpus" : "tasks";
    if (spec.contains("elastic") && spec["elastic"].is_object() &&
        spec["elastic"].value("unit", "gpus") == model::ElasticUnitName(unit)) {
      spec.erase("elastic");
    }
    if (!size->IsRange()) {
      holder[field] = size->min;
      continue;
    }
    if (ranged) {
      return InvalidArgument(std::string(flag) + ": a job grows by GPUs or by nodes, not both");
    }
    ranged = unit;
    holder.erase(field);  // the spec's codec sets MIN
    spec["elastic"] = protocol::ElasticJson(
        {.unit = unit, .min = size->min, .max = size->max, .step = f.gpu_step.value_or(0)});
  }
  if (f.gpu_step && ranged != model::ElasticUnit::kGpus) {
    return InvalidArgument("--gpu-step: needs a range of GPUs (--gpus MIN-MAX)");
  }
  return Status::Ok();
}

// The spec of the flags over the spec file, checked (CheckSpec). It is sent as built: what it
// leaves out (CPU, memory) the server fills in.
Result<json> BuildSpec(const SubmitFlags& f) {
  json spec = json::object();
  if (!f.file.empty()) {
    auto file = ReadJsonOrYamlFile(f.file);
    if (!file.ok()) return file.status();
    spec = *file;
    if (!spec.is_object()) return InvalidArgument(f.file + ": the spec must be a mapping");
    // The distributed spellings of a spec file: nodes = tasks, gpus_per_node = resources.gpus.
    for (const auto& [alias, field] : {std::pair{"nodes", "tasks"}, {"gpus_per_node", "gpus"}}) {
      if (!spec.contains(alias)) continue;
      if (std::string(field) == "gpus" && spec.contains("resources") &&
          !spec["resources"].is_object()) {
        return InvalidArgument(f.file + ": field 'resources': must be a mapping");
      }
      json& target = std::string(field) == "gpus" ? spec["resources"][field] : spec[field];
      if (!target.is_null() && target != spec[alias]) {
        return InvalidArgument(f.file + ": '" + alias + "' and '" + field +
                               "' disagree; give one of them");
      }
      target = spec[alias];
      spec.erase(alias);
    }
  }
  if (!f.name.empty()) spec["name"] = f.name;
  if (!f.project.empty()) spec["project"] = f.project;
  if (!f.workdir.empty()) spec["workdir"] = f.workdir;
  // The folder it is submitted from: the job's working folder when it names none and its node
  // has it (docs/control-plane.md, "Working folder"); a relative workdir is taken from there.
  std::error_code cwd_error;
  const std::filesystem::path here = std::filesystem::current_path(cwd_error);
  if (!cwd_error) {
    if (!spec.contains("submit_dir")) spec["submit_dir"] = here.string();
    if (spec.contains("workdir") && spec["workdir"].is_string()) {
      spec["workdir"] = protocol::WorkdirFrom(here.string(), spec["workdir"].get<std::string>());
    }
  }
  if (!f.environment.empty()) spec["environment"] = f.environment;
  if (!f.command.empty()) spec["command"] = f.command;
  if (!f.script.empty()) {
    auto text = ReadScript(f.script);
    if (!text.ok()) return text.status();
    spec["script"] = {{"text", *text},
                      {"args", f.script_args},
                      {"name", std::filesystem::path(f.script).filename().string()}};
  }
  for (const auto& [field, value] : {std::pair{"output_file", &f.output_file},
                                     {"error_file", &f.error_file},
                                     {"partition", &f.partition},
                                     {"qos", &f.qos}}) {
    if (!value->empty()) spec[field] = *value;
  }
  if (f.shell) {
    spec["shell"] = true;
    if (!f.command.empty()) spec["command"] = ShellCommand(f.command);
  }
  json& r = spec["resources"];
  if (r.is_null()) r = json::object();
  if (f.gpu_milli) r["gpu_milli"] = *f.gpu_milli;
  if (!f.gpu_models.empty()) r["gpu_models"] = f.gpu_models;
  // Each of --cpus and --cpu-milli (which exclude each other) overrides the file's other field.
  if (f.cpus) {
    r["cpus"] = *f.cpus;
    r.erase("cpu_milli");
  }
  if (f.cpu_milli) {
    r["cpu_milli"] = *f.cpu_milli;
    r.erase("cpus");
  }
  if (f.memory_mib) r["memory_mib"] = *f.memory_mib;
  CORRAL_RETURN_IF_ERROR(ApplySizeFlags(f, spec));
  if (f.procs_per_node) spec["procs_per_node"] = *f.procs_per_node;
  if (!f.launcher.empty()) spec["launcher"] = f.launcher;
  if (f.priority) spec["priority"] = *f.priority;
  if (f.max_restarts) spec["max_restarts"] = *f.max_restarts;
  if (f.checkpoint_grace) {
    auto grace = ParseDuration(*f.checkpoint_grace, "--checkpoint-grace");
    if (!grace.ok()) return grace.status();
    if (*grace > protocol::kMaxCheckpointGrace) {
      return InvalidArgument("--checkpoint-grace: at most 1h, got " + *f.checkpoint_grace);
    }
    spec["checkpoint_grace_s"] = grace->value();
  }
  if (f.time_limit) {
    auto limit = ParseTimeLimit(*f.time_limit, "--time-limit");
    if (!limit.ok()) return limit.status();
    spec["time_limit_s"] = limit->value();
  }
  if (f.signal) {
    auto warning = model::ParseWarningSignal(*f.signal, "--signal");
    if (!warning.ok()) return warning.status();
    if (spec.value("time_limit_s", json(0)) == json(0)) {
      return InvalidArgument(
          "--signal: needs --time-limit (it is sent that long before the limit)");
    }
    spec["signal"] = protocol::SignalJson(*warning);
  }
  auto dependency = DependencyFlags(f);
  if (!dependency.ok()) return dependency.status();
  if (!dependency->empty()) spec["dependency"] = *dependency;
  if (f.kill_on_invalid_dep) spec["kill_on_invalid_dep"] = true;
  auto env = EnvFlags(f.env);
  if (!env.ok()) return env.status();
  for (const auto& [name, value] : env->items()) spec["env"][name] = value;
  if (f.array && f.sweep) return InvalidArgument("--array and --sweep: give one of them");
  if (f.array) {
    auto array = protocol::ParseArrayFlag(*f.array);
    if (!array.ok()) return array.status();
    spec["array"] = *array;
  }
  if (f.sweep) {
    auto file = ReadJsonOrYamlFile(*f.sweep);
    if (!file.ok()) return file.status();
    auto array = protocol::ArrayFromSweep(*file, *f.sweep);
    if (!array.ok()) return array.status();
    spec["array"] = *array;
  }
  if (!f.no_check) CORRAL_RETURN_IF_ERROR(CheckSpec(spec));
  return spec;
}

// A job's EST. START cell: its estimate while it waits ("unknown" when there is none), "" once
// it left the queue.
std::string EstimatedStart(const protocol::JobSummary& j) {
  if (j.state != model::JobState::kPending) return "";
  return j.estimated_start ? Time(j.estimated_start) : "unknown";
}

// With an ARRAY column ("A_I": array A, index I, as Slurm writes it) when an array element is
// among `jobs`.
void PrintJobs(const std::vector<protocol::JobSummary>& jobs) {
  const bool arrays = std::any_of(
      jobs.begin(), jobs.end(), [](const protocol::JobSummary& j) { return j.array.has_value(); });
  std::vector<std::vector<std::string>> rows;
  for (const protocol::JobSummary& j : jobs) {
    std::string why = j.pending_reason ? j.pending_reason->message : j.reason;
    std::vector<std::string> row = {std::to_string(j.id.value()), j.name};
    if (arrays) {
      row.push_back(j.array ? std::to_string(j.array->array_id.value()) + "_" + Cell(j.array->index)
                            : "");
    }
    for (const std::string& cell : {j.user, j.project, std::string(model::ToString(j.state)),
                                    Time(j.submit_time), EstimatedStart(j), why}) {
      row.push_back(cell);
    }
    rows.push_back(std::move(row));
  }
  std::vector<std::string> header = {"ID",    "NAME",      "USER",       "PROJECT",
                                     "STATE", "SUBMITTED", "EST. START", "REASON"};
  if (arrays) header.insert(header.begin() + 2, "ARRAY");
  PrintTable(header, rows);
}

// `corral policy`: the rules, then the placement and whether its workload profile exists yet
// (fgd and best place as bestfit until it does: docs/control-plane.md, "The workload profile").
void PrintPolicy(const protocol::PolicyView& p) {
  const protocol::SchedulingRules& r = p.rules;
  std::cout << "order: " << r.order << "  blocking: " << r.blocking
            << "  reclaim lent GPUs: " << (r.reclaim ? "yes" : "no") << "\n";
  if (r.order == "las") {
    std::cout << "las thresholds (GPU-seconds): " << json(r.las_thresholds_gpu_s).dump() << "\n";
  }
  std::cout << "fair share: half-life " << FormatDuration(r.half_life) << ", weight "
            << Decimal(r.fair_share_weight, 3) << ", age weight " << Decimal(r.age_weight, 3)
            << " per " << FormatDuration(r.age_unit) << "\n";
  std::cout << "placement: " << p.placement;
  if (p.uses_profile && p.profile_jobs == 0) {
    std::cout << " (no workload profile yet: places as bestfit until " << p.profile_min_jobs
              << " jobs have been submitted)";
  } else if (p.uses_profile) {
    std::cout << " (workload profile of the last " << p.profile_jobs << " jobs: " << p.typical_tasks
              << (p.typical_tasks == 1 ? " typical task shape)" : " typical task shapes)");
  }
  std::cout << "\npolicy file: "
            << (p.file.empty() ? "none (built-in rules; corral server --policy-file sets one)"
                               : p.file)
            << "\n";
  if (p.file_error) {
    std::cout << "policy file error: " << *p.file_error << " (the rules above stay in force)\n";
  }
}

void PrintJob(const protocol::JobView& view) {
  const protocol::JobSummary& j = view.summary;
  std::cout << "Job " << j.id.value();
  if (!j.name.empty()) std::cout << " (" << j.name << ")";
  if (j.array) {
    std::cout << ", element " << Cell(j.array->index) << " of array " << j.array->array_id.value();
  }
  std::cout << "  state: " << model::ToString(j.state) << "\n  user: " << j.user
            << "  project: " << j.project << "  priority: " << j.priority
            << "  restarts: " << view.restarts << "\n";
  if (view.spec.script) {
    std::cout << "  script: " << view.spec.script->text.size() << " bytes (corral job show "
              << j.id.value() << " --script), arguments " << json(view.spec.script->args).dump()
              << "\n";
  } else {
    std::cout << "  command: " << json(view.spec.command).dump() << "\n";
  }
  if (!view.spec.partition.empty() || !view.spec.qos.empty()) {
    std::cout << "  partition: " << (view.spec.partition.empty() ? "none" : view.spec.partition)
              << "  qos: " << (view.spec.qos.empty() ? "none" : view.spec.qos) << "\n";
  }
  if (!view.spec.output_file.empty()) {
    std::cout << "  output file: " << view.spec.output_file
              << (view.spec.error_file.empty() ? " (stdout and stderr)"
                                               : "  error file: " + view.spec.error_file)
              << "\n";
  }
  // The effective request: what was asked, with the server's defaults filled in.
  const model::TaskResources& r = view.spec.resources;
  std::cout << "  resources per task: gpus " << r.gpus.value() << "  gpu_milli "
            << r.gpu_milli.value() << "  cpu_milli " << r.cpu.value() << "  memory_mib "
            << r.memory.value() << "\n";
  if (const auto& elastic = view.spec.elastic) {
    std::cout << "  Elastic: " << elastic->min << "-" << elastic->max << " "
              << (elastic->unit == model::ElasticUnit::kGpus ? "GPUs" : "nodes");
    if (elastic->step > 0) std::cout << " in steps of " << elastic->step;
    if (view.elastic_now) std::cout << ", now " << *view.elastic_now;
    std::cout << " (" << view.resizes << (view.resizes == 1 ? " resize)\n" : " resizes)\n");
  }
  std::cout << "  time limit: "
            << (view.spec.time_limit_s > 0 ? FormatDuration(Seconds(view.spec.time_limit_s))
                                           : std::string("none"));
  if (const auto& warning = view.spec.warning_signal) {
    std::cout << " (SIG" << model::SignalName(warning->signal) << " "
              << FormatDuration(warning->before) << " before it)";
  }
  std::cout << "\n";
  if (view.predicted_run_s) {
    const protocol::RuntimePrediction& p = *view.predicted_run_s;
    std::cout << "  predicted run: " << FormatDuration(p.estimate);
    if (p.basis == protocol::kTimeLimitBasis) {
      std::cout << " (its time limit: the prediction was longer)\n";
    } else if (p.basis == protocol::kOutlivedTimeLimitBasis) {
      std::cout << " (its time limit: it has run longer than predicted)\n";
    } else if (p.basis == protocol::kOutlivedDoublingBasis) {
      std::cout << " (it has run longer than predicted and has no time limit: twice its "
                   "prediction, doubled again each time it is passed)\n";
    } else {
      std::cout << " (from " << p.basis << ", " << static_cast<int>(p.confidence * 100 + 0.5)
                << " % confident)\n";
    }
  }
  if (!view.dependencies.empty()) {
    std::cout << "  depends on:";
    for (const protocol::DependencyView& d : view.dependencies) {
      std::cout << " " << model::ToString(d.dependency.type) << ":" << d.dependency.job.value()
                << " (" << model::ToString(d.status) << ")";
    }
    std::cout << (view.spec.kill_on_invalid_dep ? "  (cancelled if never met)\n" : "\n");
  }
  if (j.pending_reason) {
    std::cout << "  waiting: " << j.pending_reason->message << " (" << j.pending_reason->code
              << ")\n";
  }
  if (j.state == model::JobState::kPending) {
    std::cout << "  estimated start: "
              << (j.estimated_start ? Time(j.estimated_start)
                                    : "unknown (nothing ahead of it says when: see why it waits)")
              << "\n";
  }
  if (!view.progress.metrics.empty()) {
    std::cout << "  metrics (" << Time(view.progress.metrics_at) << "):";
    for (const auto& [key, value] : view.progress.metrics) {
      // Numbers as typed (step=1200, not 1200.0), strings quoted.
      const double* number = std::get_if<double>(&value);
      std::cout << " " << key << "="
                << (number && std::abs(*number) < 1e15 && *number == std::trunc(*number)
                        ? std::to_string(static_cast<int64_t>(*number))
                        : TerminalSafe(protocol::MetricValueJson(value).dump()));
    }
    std::cout << "\n";
  }
  if (const auto& c = view.progress.checkpoint) {
    std::cout << "  checkpoint: " << TerminalSafe(c->path);
    if (c->step) std::cout << " (step " << *c->step << ")";
    std::cout << " at " << Time(c->time) << "\n";
  }
  if (view.checkpoint_dir) std::cout << "  checkpoint folder: " << *view.checkpoint_dir << "\n";
  std::cout << "  stop grace: " << FormatDuration(view.stop_grace)
            << " (SIGTERM to SIGKILL when preempted or resized)\n";
  if (view.lost_work_gpu_s > 0) {
    std::cout << "  lost work: " << protocol::LostWorkText(view.lost_work_gpu_s)
              << " (preemptions and resizes: GPUs × the time since the last checkpoint)\n";
  }
  std::cout << "Tasks:\n";
  std::vector<std::vector<std::string>> rows;
  for (const protocol::TaskView& t : view.tasks) {
    std::string gpus;
    for (const model::GpuShare& g : t.allocation.gpus) {
      gpus += (gpus.empty() ? "" : ",") + std::to_string(g.index);
    }
    rows.push_back({std::to_string(t.index), std::to_string(t.generation), t.node, gpus,
                    std::string(model::ToString(t.state)), Cell(t.exit_code), Cell(t.signal)});
  }
  PrintTable({"TASK", "GEN", "NODE", "GPUS", "STATE", "EXIT", "SIGNAL"}, rows);
  std::cout << "Events:\n";
  rows.clear();
  for (const protocol::JobEvent& e : view.events) {
    rows.push_back({Time(e.time), e.from ? std::string(model::ToString(*e.from)) : "",
                    std::string(model::ToString(e.to)), TerminalSafe(e.reason)});
  }
  PrintTable({"TIME", "FROM", "TO", "REASON"}, rows);
}

// The flags of one task's allocation and its job, which `corral shell` shares with `corral
// submit` and `corral batch`.
void AddAllocationFlags(CLI::App* c, SubmitFlags* f) {
  c->add_option("--name", f->name, "Job name");
  c->add_option("--project", f->project, "Project (default: the 'default' project)");
  c->add_option("--gpus", f->gpus,
                "Whole GPUs per task (or 1 with --gpu-milli for a share); MIN-MAX: an elastic "
                "job the server resizes within the range (docs/elastic.md)");
  c->add_option("--gpu-milli", f->gpu_milli, "Share of one GPU, 1..1000");
  c->add_option("--gpu-model", f->gpu_models, "Acceptable GPU model (repeatable)");
  CLI::Option* cpus =
      c->add_option("--cpus", f->cpus,
                    "Whole CPUs per process (rank), as Slurm's -c: a part asks N x "
                    "--procs-per-node (default: 1 per process without GPUs; the server's "
                    "--default-cpus-per-gpu with them)");
  c->add_option("--cpu-milli", f->cpu_milli, "CPU per task (part), 1000 = one core")
      ->excludes(cpus);
  c->add_option("--memory-mib", f->memory_mib,
                "Memory per task, MiB (default: the server's --default-memory-per-cpu-mib per "
                "CPU, or none)");
  c->add_option("--priority", f->priority, "Priority (higher runs first)");
  c->add_option("--time-limit", f->time_limit,
                "Time limit: seconds, or 90m, 2h30m, 1d, H:MM:SS, D-HH:MM:SS (0: none)");
  c->add_option("--signal", f->signal,
                "SIG[@SECONDS]: send SIG (USR1, TERM, ...) SECONDS (default 60) before the time "
                "limit, to save work");
  c->add_option("--workdir", f->workdir,
                "Working folder on the node, absolute or relative to this one (default: this "
                "folder where the node has it, else a scratch folder)");
  c->add_option("--env", f->env, "NAME=VALUE (repeatable)");
}

// The flags of a job's request, which `corral submit` and `corral batch` share.
void AddSubmitFlags(CLI::App* c, SubmitFlags* f) {
  c->add_option("-f,--file", f->file, "Job spec (YAML or JSON); flags override it");
  AddAllocationFlags(c, f);
  c->add_option("--environment", f->environment,
                "Environment NAME or NAME@VERSION to run in (corral env list); its command is "
                "the default when none is given");
  c->add_option("--gpu-step", f->gpu_step,
                "Sizes of an elastic --gpus MIN-MAX: MIN, MIN+N, ..., MAX (default: powers of "
                "two between MIN and MAX)");
  c->add_option("--tasks", f->tasks,
                "Tasks started together (gang); MIN-MAX: elastic by nodes, one task per node");
  c->add_option("--nodes", f->nodes,
                "Distributed job: parts (same as --tasks), each on one node; the fewest nodes "
                "win, so parts share a node that has room for them (docs/distributed.md); "
                "MIN-MAX: elastic, as Slurm's node range");
  c->add_option("--gpus-per-node", f->gpus_per_node, "GPUs of each part (same as --gpus)");
  c->add_option("--procs-per-node", f->procs_per_node,
                "Processes (ranks) per part, usually one per GPU (default 1)");
  c->add_option("--launcher", f->launcher,
                "none, torchrun, mpi, deepspeed, tf or jax: how parts start their processes and "
                "which rendezvous variables they get (docs/distributed.md)");
  c->add_option("--max-restarts", f->max_restarts, "Requeues after failure or node loss");
  c->add_option("--checkpoint-grace", f->checkpoint_grace,
                "Time between SIGTERM and SIGKILL when the job is preempted or resized, to save "
                "a checkpoint, as 60s, 5m (at most 1h; the server caps it: default 300s)");
  c->add_option("--dependency", f->dependency,
                "Slurm's dependency text, all to be met: after:ID (started), afterok:ID "
                "(succeeded), afternotok:ID (ended otherwise), afterany:ID (ended); "
                "afterok:12:13,afterany:14; an array's id means every element");
  // One id each (repeat the flag): the command may follow without "--".
  c->add_option("--after", f->after, "Start after job ID started (repeatable; with the others)")
      ->allow_extra_args(false);
  c->add_option("--afterok", f->afterok, "Start after job ID succeeded (repeatable)")
      ->allow_extra_args(false);
  c->add_option("--afternotok", f->afternotok, "Start after job ID ended unsuccessfully")
      ->allow_extra_args(false);
  c->add_option("--afterany", f->afterany, "Start after job ID ended, however (repeatable)")
      ->allow_extra_args(false);
  c->add_flag("--kill-on-invalid-dep", f->kill_on_invalid_dep,
              "Cancel the job when a dependency can never be met (default: it stays pending "
              "with reason dependency_never_satisfied)");
  c->add_flag("--shell", f->shell, "Run the command with /bin/sh -c");
  c->add_option("--array", f->array,
                "An array, one job per index (Slurm's syntax): 0-99, 1,3,5-7, 0-20:5 (a step); "
                "%N at the end: at most N running at once (0-99%8)");
  c->add_option("--sweep", f->sweep,
                "An array from a sweep file (YAML or JSON): {grid: {NAME: [VALUES]}} or {runs: "
                "[{NAME: VALUE}]}, optionally max_running; parameters become environment "
                "variables");
  c->add_option("-o,--output", f->output, "table or json")->check(CLI::IsMember({"table", "json"}));
  c->add_flag("--no-check", f->no_check,
              "Send the spec without checking it here first (the server checks it): for a field "
              "a newer server knows and this corral does not");
  c->add_flag("--wait", f->wait,
              "Wait until the job ends and exit with its exit code (128+N: signal N; 124 "
              "timeout, 137 oom, 143 cancelled, 75 lost; 125: corral itself failed)");
  c->add_flag("--follow", f->follow, "Print the job's output as it runs (implies --wait)");
  c->add_option("--output-file", f->output_file,
                "A file (Slurm's --output pattern: %j job id, %A array id, %a index, %x name) "
                "in the working folder that also gets the job's stdout, and its stderr without "
                "--error-file");
  c->add_option("--error-file", f->error_file, "The same for the job's stderr");
  c->add_option("--partition", f->partition, "A partition of the cluster (corral partitions)");
  c->add_option("--qos", f->qos, "A QoS of the cluster (corral partitions)");
}

// `corral shell` (shell_command.h): the exit code is the remote shell's; corral's own failures
// exit kExitCorral, as `submit --wait` does.
void AddShell(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<SubmitFlags>();
  CLI::App* c = app.add_subcommand(
      "shell",
      "Run an interactive shell (a pty) on an allocation, as salloc / srun --pty: corral shell "
      "[flags] [-- CMD ARGS...]");
  AddAllocationFlags(c, f.get());
  c->add_option("--environment", f->environment,
                "Environment NAME or NAME@VERSION to run in (corral env list; process runtime "
                "only)");
  c->add_option("command", f->command,
                "The program after -- (default: your login shell on the node)");
  c->callback([f, exit_code] {
    f->no_check = true;  // checked below, once the spec is a shell's
    auto spec = BuildSpec(*f);
    if (spec.ok()) {
      (*spec)["session"] = ShellSession();
      if (Status checked = CheckSpec(*spec); !checked.ok()) spec = checked;
    }
    if (!spec.ok()) {
      Fail(spec.status());
      *exit_code = kExitCorral;
      return;
    }
    int shell_code = 0;
    const int code = WithClient([&](ApiClient& client) -> Status {
      auto ran = RunShell(client, *spec);
      if (!ran.ok()) return ran.status();
      shell_code = *ran;
      return Status::Ok();
    });
    *exit_code = code == 0 ? shell_code : kExitCorral;
  });
}

// Submits what `f` asks and, with --wait or --follow, waits; sets `exit_code` (its rules:
// AddSubmit's --wait).
void SubmitAndWait(const SubmitFlags& flags, int* exit_code) {
  const SubmitFlags* f = &flags;
  const bool waits = f->wait || f->follow;
  if (f->follow && (f->array || f->sweep)) {
    *exit_code = Fail(InvalidArgument(
        "--follow: follows one job's output, and an array has many; use --wait, then corral "
        "logs ID for each element"));
    return;
  }
  if (f->follow && f->output == "json") {
    *exit_code = Fail(InvalidArgument(
        "--follow prints the job's output, which -o json would mix into its JSON; use --wait"));
    return;
  }
  auto spec = BuildSpec(*f);  // before any request, and before the config is read
  if (!spec.ok()) {
    *exit_code = Fail(spec.status());
    if (waits) *exit_code = kExitCorral;
    return;
  }
  int job_code = 0;  // --wait: the job's
  *exit_code = WithClient([&](ApiClient& client) -> Status {
    auto reply = client.Post("/api/v1/jobs", *spec);
    if (!reply.ok() && spec->contains("submit_dir") &&
        IsUnknownToServer(reply.status(), "submit_dir")) {
      // A server older than the submit folder (issue 18) refused the field the CLI added on
      // its own: the job goes without it (a 400 created nothing) and runs where such a server
      // runs jobs, which it says.
      std::cerr << "corral " << f->verb
                << ": the server is older than submit folders: the job runs in a "
                   "scratch folder unless --workdir names one\n";
      spec->erase("submit_dir");
      reply = client.Post("/api/v1/jobs", *spec);
    }
    if (!reply.ok()) return reply.status();
    auto job = protocol::ParseSubmitAnswer(*reply);
    if (!job.ok()) return job.status();
    // What the script asked that corral does not do, on stderr, whatever the output.
    for (const std::string& warning : job->warnings) {
      std::cerr << "corral: warning: " << warning << "\n";
    }
    // What the server filled in (its defaults), on stderr: stdout stays one parsable line.
    if (f->output == "table" && !job->defaults.empty()) {
      std::cerr << "corral " << f->verb << ": with defaults: " << protocol::ToString(job->defaults)
                << "\n";
    }
    const std::string id = std::to_string(job->id.value());
    if (!job->array_ids.empty()) {
      PrintAnswer(*reply, f->output,
                  "submitted array " + id + ": jobs " +
                      std::to_string(job->array_ids.front().value()) + ".." +
                      std::to_string(job->array_ids.back().value()));
    } else {
      PrintAnswer(*reply, f->output, "submitted job " + id + " to project " + job->project);
    }
    if (!f->wait && !f->follow) return Status::Ok();
    std::cout << std::flush;
    if (f->follow) {
      const LogRequest request{.job = job->id, .follow = true};
      auto printed = PrintLog(client, request, std::cout);
      if (!printed.ok()) return printed.status();
      if (*printed == 0) HintAtStderr(client, request);
    }
    // An array's code is its elements' highest, as sbatch --wait's.
    std::vector<JobId> ids = job->array_ids.empty() ? std::vector<JobId>{job->id} : job->array_ids;
    int code = 0;
    for (JobId element : ids) {
      auto ended = WaitForJob(client, element);
      if (!ended.ok()) return ended.status();
      const int element_code = JobExitCode(*ended);
      if (element_code != 0) {
        std::cerr << "corral: job " << element.value() << " "
                  << model::ToString(ended->summary.state)
                  << (ended->summary.reason.empty() ? "" : ": " + ended->summary.reason)
                  << " (exit " << element_code << ")\n";
      }
      code = std::max(code, element_code);
    }
    job_code = code;
    return Status::Ok();
  });
  // Waiting, the job's code is the answer: corral's own failures are kExitCorral, apart.
  if (waits) *exit_code = *exit_code == 0 ? job_code : kExitCorral;
}

void AddSubmit(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<SubmitFlags>();
  CLI::App* c = app.add_subcommand("submit", "Submit a job: corral submit [flags] -- CMD ARGS...");
  AddSubmitFlags(c, f.get());
  c->add_option("command", f->command, "The command after --");
  c->callback([f, exit_code] { SubmitAndWait(*f, exit_code); });
}

void AddBatch(CLI::App& app, int* exit_code);

// `corral partitions`: what --partition and --qos name here.
void AddPartitions(CLI::App& app, int* exit_code) {
  auto output = std::make_shared<std::string>("table");
  CLI::App* c = app.add_subcommand(
      "partitions", "The cluster's partitions and QoS: what --partition and --qos (-p, -q) mean");
  c->add_option("-o,--output", *output, "table or json")->check(CLI::IsMember({"table", "json"}));
  c->callback([output, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      auto answer = client.Get("/api/v1/partitions");
      if (!answer.ok()) return answer.status();
      if (*output == "json") {
        std::cout << answer->dump(2) << "\n";
        return Status::Ok();
      }
      auto table = protocol::ParsePartitionTable(*answer);
      if (!table.ok()) return table.status();
      if (table->partitions.empty() && table->qos.empty()) {
        std::cout << "This cluster defines no partitions or QoS: a job's --partition and --qos "
                     "(#SBATCH -p, -q) are ignored, with a warning. An administrator defines "
                     "them with corral server --partitions-file (docs/batch.md).\n";
        return Status::Ok();
      }
      std::vector<std::vector<std::string>> rows;
      for (const protocol::Partition& p : table->partitions) {
        rows.push_back({p.name, p.gpu_models.empty() ? "any" : Join(p.gpu_models, ","),
                        p.max_time_s > 0 ? FormatDuration(Seconds(p.max_time_s)) : "none",
                        p.is_default ? "yes" : "", p.description});
      }
      if (!rows.empty()) {
        PrintTable({"PARTITION", "GPU MODELS", "MAX TIME", "DEFAULT", "DESCRIPTION"}, rows);
      }
      rows.clear();
      for (const protocol::Qos& q : table->qos) {
        rows.push_back({q.name, std::to_string(q.priority), q.description});
      }
      if (!rows.empty()) {
        if (!table->partitions.empty()) std::cout << "\n";
        PrintTable({"QOS", "PRIORITY", "DESCRIPTION"}, rows);
      }
      return Status::Ok();
    });
  });
}

void AddSubmitCommands(CLI::App& app, int* exit_code) {
  AddSubmit(app, exit_code);
  AddBatch(app, exit_code);
  AddPartitions(app, exit_code);
}

void AddBatch(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<SubmitFlags>();
  f->verb = "batch";
  CLI::App* c = app.add_subcommand(
      "batch",
      "Submit a batch script (sbatch's counterpart): corral batch [flags] SCRIPT [ARGS...]; its "
      "#CORRAL lines hold submit flags, its #SBATCH lines Slurm's options (docs/batch.md)");
  AddSubmitFlags(c, f.get());
  // Everything from the script's name on is the script and its arguments, as for sbatch.
  c->prefix_command();
  c->callback([c, f, exit_code] {
    std::vector<std::string> words = c->remaining();
    if (!words.empty() && words.front() == "--") words.erase(words.begin());
    if (words.empty()) {
      *exit_code = Fail(InvalidArgument("corral batch: needs a script: corral batch job.sh"));
      return;
    }
    f->script = words.front();
    f->script_args.assign(words.begin() + 1, words.end());
    SubmitAndWait(*f, exit_code);
  });
}

// The flags of `corral jobs` and `corral cancel` that select jobs, as the listing API's query
// (GET /api/v1/jobs) and as the flags to repeat.
struct JobSelection {
  // Whose jobs: the caller's alone, or every one the caller may see (all=1). `corral jobs`
  // takes --all, --user and --project for the latter; `corral cancel`, only --user.
  enum class Owners { kMine, kVisible };
  Owners owners = Owners::kMine;
  bool all_flag = false;                   // --all was given (repeated in Flags)
  std::string state, user, project, name;  // "" when not given; lists comma-separated

  bool Filters() const {
    return !state.empty() || !user.empty() || !project.empty() || !name.empty();
  }

  // "all=...&state=..."; InvalidArgument naming --state for an unknown state, before any request.
  Result<std::string> Query() const {
    std::string query = "all=" + std::string(owners == Owners::kVisible ? "1" : "0");
    if (!state.empty()) {
      CORRAL_RETURN_IF_ERROR(model::ParseJobStates(state, "--state").status());
      query += "&state=" + state;
    }
    for (const auto& [key, value] :
         {std::pair{"user", &user}, {"project", &project}, {"name", &name}}) {
      if (!value->empty()) query += "&" + std::string(key) + "=" + QueryValue(*value);
    }
    return query;
  }

  // " --all --state S ...": the flags as given.
  std::string Flags() const {
    std::string flags = all_flag ? " --all" : "";
    for (const auto& [flag, value] : {std::pair{"--state", &state},
                                      {"--user", &user},
                                      {"--project", &project},
                                      {"--name", &name}}) {
      if (!value->empty()) flags += " " + std::string(flag) + " " + *value;
    }
    return flags;
  }
};

// The ids of every job the listing `query` (JobSelection::Query) selects, all pages, oldest
// first. Errors: the server's.
Result<std::vector<int64_t>> SelectedJobs(ApiClient& client, const std::string& query) {
  std::vector<int64_t> ids;
  std::string cursor;
  do {
    auto reply = client.GetReply("/api/v1/jobs?" + query + "&sort=id&order=asc&limit=1000" +
                                 (cursor.empty() ? "" : "&cursor=" + QueryValue(cursor)));
    if (!reply.ok()) return reply.status();
    auto jobs = protocol::ParseJobSummaries(reply->body, kServerAnswerLimits);
    if (!jobs.ok()) return Status(StatusCode::kInternal, jobs.status().message());
    for (const protocol::JobSummary& j : *jobs) ids.push_back(j.id.value());
    cursor = reply->Header("X-Corral-Next-Cursor");
  } while (!cursor.empty());
  return ids;
}

// Cancels each of `ids` in turn whatever the others answer, but no more once the server cannot
// be reached; the first failure is the error, with every id not cancelled in its message.
// -o json: as `shape` says, the server's answer or [{"id": N, ...answer}] of those cancelled.
// How `corral cancel -o json` prints what it cancelled.
enum class CancelAnswers {
  kAsAsked,  // one id asked: the server's answer; several: the list
  kList,     // the list, even of one (filters select any number)
};

Status CancelJobs(ApiClient& client, const std::vector<int64_t>& ids, const std::string& output,
                  CancelAnswers shape = CancelAnswers::kAsAsked) {
  const bool list = shape == CancelAnswers::kList || ids.size() > 1;
  std::optional<Status> failed;
  std::string failures;
  json answers = json::array();
  size_t cancelled = 0, asked = 0;
  for (int64_t id : ids) {
    ++asked;
    auto r = client.Post("/api/v1/jobs/" + std::to_string(id) + "/cancel", json::object());
    if (!r.ok()) {
      if (!failed) failed = r.status();
      failures += (failures.empty() ? "" : "; ") + r.status().message();
      const StatusCode code = r.status().code();
      if (code == StatusCode::kIoError || code == StatusCode::kUnavailable) break;
      continue;
    }
    ++cancelled;
    if (output == "json") {
      json answer = *r;
      if (list) answer["id"] = id;
      answers.push_back(std::move(answer));
    } else {
      std::cout << "cancelling job " << id << "\n";
    }
  }
  if (output == "json" && (list || !answers.empty())) {
    std::cout << (list ? answers : answers[0]).dump(2) << "\n";
  }
  if (!failed) return Status::Ok();
  if (ids.size() == 1) return *failed;
  if (asked < ids.size()) {
    failures += "; not asked: " + std::to_string(ids.size() - asked) + " more";
  }
  return Status(failed->code(), "cancel: " + std::to_string(ids.size() - cancelled) + " of " +
                                    std::to_string(ids.size()) + " not cancelled: " + failures);
}

void AddJobCommands(CLI::App& app, int* exit_code) {
  struct Flags {
    bool all = false, follow = false, stderr_stream = false, script = false;
    std::string state, output = "table", user, project, name, sort, cursor;
    int64_t id = -1, before = 0, generation = 0, array = 0;
    std::vector<int64_t> ids;  // cancel's
    int task = 0, limit = 0;
  };
  auto f = std::make_shared<Flags>();
  auto out_opt = [&](CLI::App* c) {
    c->add_option("-o,--output", f->output, "table or json")
        ->check(CLI::IsMember({"table", "json"}));
  };

  CLI::App* jobs = app.add_subcommand("jobs", "List jobs (yours; --all: your projects', or all)");
  jobs->add_flag("--all", f->all, "All jobs you may see");
  std::string state_names;
  for (model::JobState state : model::kJobStates) {
    state_names += (state_names.empty() ? "" : ", ") + std::string(model::ToString(state));
  }
  jobs->add_option("--state", f->state, "Only these states, comma-separated: " + state_names);
  jobs->add_option("--limit", f->limit, "Jobs per page, newest first (default 100, at most 1000)");
  jobs->add_option("--before", f->before,
                   "Only jobs with smaller ids (deprecated: --cursor pages every sort)");
  jobs->add_option("--user", f->user, "Only these users' jobs, comma-separated (implies --all)");
  jobs->add_option("--project", f->project,
                   "Only these projects' jobs, comma-separated (implies --all)");
  jobs->add_option("--name", f->name, "Only jobs whose name starts with this");
  jobs->add_option("--sort", f->sort,
                   "id, submit_time, start_time, end_time or gpus, newest or most first; "
                   "append :asc for the other way (gpus:asc)");
  jobs->add_option("--cursor", f->cursor, "The next page's start, as the last page printed it");
  jobs->add_option("--array", f->array, "Only the elements of this array (its id)")
      ->check(CLI::PositiveNumber);
  out_opt(jobs);
  jobs->callback([f, exit_code, jobs] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      // The flags that select the jobs, repeated in the hint to the next page.
      const bool visible = f->all || !f->user.empty() || !f->project.empty();
      const JobSelection selection{
          visible ? JobSelection::Owners::kVisible : JobSelection::Owners::kMine,
          f->all,
          f->state,
          f->user,
          f->project,
          f->name};
      auto selected = selection.Query();
      if (!selected.ok()) return selected.status();
      std::string query = *selected, same_flags = selection.Flags();
      if (jobs->count("--limit")) {
        query += "&limit=" + std::to_string(f->limit);
        same_flags += " --limit " + std::to_string(f->limit);
      }
      if (jobs->count("--array")) {
        query += "&array=" + std::to_string(f->array);
        same_flags += " --array " + std::to_string(f->array);
      }
      if (!f->sort.empty()) {
        const size_t colon = f->sort.find(':');
        query += "&sort=" + QueryValue(f->sort.substr(0, colon));
        if (colon != std::string::npos) query += "&order=" + QueryValue(f->sort.substr(colon + 1));
        same_flags += " --sort " + f->sort;
      }
      if (jobs->count("--before")) query += "&before=" + std::to_string(f->before);
      if (!f->cursor.empty()) query += "&cursor=" + QueryValue(f->cursor);
      auto reply = client.GetReply("/api/v1/jobs?" + query);
      if (!reply.ok()) return reply.status();
      if (f->output == "json") {
        auto list = reply->Json();
        if (!list.ok()) return list.status();
        std::cout << list->dump(2) << "\n";
        return Status::Ok();
      }
      // Read a job at a time: a 1,000-job page never exists as one JSON tree.
      auto jobs = protocol::ParseJobSummaries(reply->body, kServerAnswerLimits);
      if (!jobs.ok()) return Status(StatusCode::kInternal, jobs.status().message());
      PrintJobs(*jobs);
      const std::string next = reply->Header("X-Corral-Next-Cursor");
      if (!next.empty()) {
        std::cout << "More jobs: corral jobs" << same_flags << " --cursor " << next << "\n";
      }
      return Status::Ok();
    });
  });

  CLI::App* job = app.add_subcommand("job", "One job");
  job->require_subcommand(1);
  CLI::App* show = job->add_subcommand("show", "A job's state, tasks and history");
  show->add_option("id", f->id, "Job id")->required();
  out_opt(show);
  show->add_flag("--script", f->script, "Print the batch script the job runs (corral batch)");
  show->callback([f, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      auto j = client.Get("/api/v1/jobs/" + std::to_string(f->id));
      if (!j.ok()) return j.status();
      if (f->output == "json" && !f->script) {
        std::cout << j->dump(2) << "\n";
        return Status::Ok();
      }
      auto view = protocol::ParseJobView(*j);
      if (!view.ok()) return view.status();
      if (f->script) {
        if (!view->spec.script) {
          return FailedPrecondition("job " + std::to_string(f->id) +
                                    " runs a command, not a batch script: corral job show " +
                                    std::to_string(f->id) + " prints it");
        }
        std::cout << view->spec.script->text;
        return Status::Ok();
      }
      PrintJob(*view);
      return Status::Ok();
    });
  });

  // The in-job channel (docs/in-job.md): inside a job, its own id and job token.
  auto channel_job = std::make_shared<std::optional<int64_t>>();
  auto in_job = [exit_code, channel_job](auto send) {
    auto id = ChannelJob(*channel_job);
    if (!id.ok()) {
      *exit_code = Fail(id.status());
      return;
    }
    *exit_code = WithClient([&](ApiClient& client) { return send(client, *id); },
                            [&](ClientConfig& config) { UseJobToken(config, *id); });
  };
  CLI::App* report = job->add_subcommand(
      "report",
      "Report metrics of a job: KEY=VALUE... (numbers as numbers; inside a job, its own)");
  auto metrics = std::make_shared<std::vector<std::string>>();
  report->add_option("metrics", *metrics, "KEY=VALUE items")->required();
  report->add_option("--job", *channel_job, "The job (default: CORRAL_JOB_ID, inside a job)");
  report->callback([metrics, in_job] {
    in_job([&](ApiClient& client, JobId id) -> Status {
      auto body = ReportBody(*metrics);
      if (!body.ok()) return body.status();
      return client.Post("/api/v1/jobs/" + std::to_string(id.value()) + "/report", *body).status();
    });
  });
  CLI::App* checkpoint = job->add_subcommand(
      "checkpoint", "Record a job's latest checkpoint: PATH (absolute) [--step N]");
  auto checkpoint_path = std::make_shared<std::string>();
  auto step = std::make_shared<std::optional<int64_t>>();
  checkpoint->add_option("path", *checkpoint_path, "The checkpoint's path")->required();
  checkpoint->add_option("--step", *step, "The training step it holds")
      ->check(CLI::NonNegativeNumber);
  checkpoint->add_option("--job", *channel_job, "The job (default: CORRAL_JOB_ID, inside a job)");
  checkpoint->callback([checkpoint_path, step, in_job] {
    in_job([&](ApiClient& client, JobId id) -> Status {
      // A relative path is the caller's folder's: the server records absolute paths.
      json body = {{"path", std::filesystem::absolute(*checkpoint_path).lexically_normal()}};
      if (*step) body["step"] = **step;
      return client.Post("/api/v1/jobs/" + std::to_string(id.value()) + "/checkpoint", body)
          .status();
    });
  });

  CLI::App* cancel = app.add_subcommand(
      "cancel",
      "Cancel jobs: by id, every element of an array not yet ended (--array), or every live job "
      "the filters select, as corral jobs lists them");
  cancel->add_option("id", f->ids, "Job ids (one element of an array cancels that element)")
      ->check(CLI::PositiveNumber);
  cancel->add_option("--array", f->array, "Array id")->check(CLI::PositiveNumber);
  cancel->add_option("--state", f->state,
                     "Only jobs in these states (default: pending,starting,running)");
  cancel->add_option("--user", f->user, "Only these users' jobs, comma-separated");
  cancel->add_option("--project", f->project, "Only these projects' jobs, comma-separated");
  cancel->add_option("--name", f->name, "Only jobs whose name starts with this");
  out_opt(cancel);
  cancel->callback([f, exit_code, cancel] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      const bool array = cancel->count("--array") > 0, ids = cancel->count("id") > 0;
      // Another user's jobs only by name (--user): a member's --project is their own jobs there,
      // as only a job's owner or an admin may cancel it.
      JobSelection selection{
          f->user.empty() ? JobSelection::Owners::kMine : JobSelection::Owners::kVisible,
          false,
          f->state,
          f->user,
          f->project,
          f->name};
      if (int(array) + int(ids) + int(selection.Filters()) != 1) {
        return InvalidArgument(
            "cancel: give job ids, --array ARRAY_ID, or filters (--user, --project, --state, "
            "--name): one of them");
      }
      if (array) {
        auto r =
            client.Post("/api/v1/arrays/" + std::to_string(f->array) + "/cancel", json::object());
        if (!r.ok()) return r.status();
        PrintAnswer(*r, f->output,
                    "cancelling array " + std::to_string(f->array) + ": " +
                        std::to_string(r->value("ids", json::array()).size()) + " jobs");
        return Status::Ok();
      }
      if (ids) return CancelJobs(client, f->ids, f->output);
      const std::string given = selection.Flags();  // without the default states
      if (selection.state.empty()) selection.state = "pending,starting,running";
      auto states = model::ParseJobStates(selection.state, "--state");
      if (!states.ok()) return states.status();
      for (model::JobState state : *states) {
        if (model::IsFinal(state)) {
          return InvalidArgument("--state: " + std::string(model::ToString(state)) +
                                 " jobs have ended; cancel takes pending, starting or running");
        }
      }
      auto query = selection.Query();
      if (!query.ok()) return query.status();
      auto selected = SelectedJobs(client, *query);
      if (!selected.ok()) return selected.status();
      if (selected->empty()) {
        if (f->output == "json") std::cout << "[]\n";
        std::cerr << "corral: no live job matches" << given << "\n";
        return Status::Ok();
      }
      return CancelJobs(client, *selected, f->output, CancelAnswers::kList);
    });
  });

  CLI::App* logs = app.add_subcommand("logs", "A task's output");
  logs->add_option("id", f->id, "Job id")->required();
  logs->add_option("--task", f->task, "Task index (default 0)");
  logs->add_option("--generation", f->generation,
                   "Run of the job: 1 is the first, each requeue adds one (default: the latest)");
  logs->add_flag("--stderr", f->stderr_stream, "Standard error instead of standard output");
  logs->add_flag("--all", f->all, "Standard output, then standard error, each under a heading");
  logs->add_flag("-f,--follow", f->follow, "Keep printing until the job ends");
  logs->callback([f, exit_code, logs] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      if (f->all && (f->stderr_stream || f->follow)) {
        return InvalidArgument(
            std::string("--all prints both outputs once; ") +
            (f->follow ? "-f follows one: stdout, or --stderr" : "--stderr is one of them"));
      }
      LogRequest request{.job = JobId(f->id), .task = f->task, .follow = f->follow};
      if (logs->count("--generation")) request.generation = f->generation;
      if (f->all) {
        for (LogStream stream : {LogStream::kStdout, LogStream::kStderr}) {
          request.stream = stream;
          std::cout << (stream == LogStream::kStdout ? "==> stdout <==\n" : "==> stderr <==\n")
                    << std::flush;
          auto printed = PrintLog(client, request, std::cout);
          if (!printed.ok()) return printed.status();
        }
        return Status::Ok();
      }
      if (f->stderr_stream) request.stream = LogStream::kStderr;
      auto printed = PrintLog(client, request, std::cout);
      if (!printed.ok()) return printed.status();
      if (*printed > 0 || f->stderr_stream) return Status::Ok();
      HintAtStderr(client, request);
      return Status::Ok();
    });
  });
}

// "KEY=VALUE" of `corral env clone --set` into the JSON merge patch `patch`: KEY is a spec field,
// dotted for nested ones (host.venv, gpus.min, env.NAME); VALUE is JSON when it parses as JSON
// (numbers, lists, null to remove a field), else a string.
Status AddSetting(const std::string& setting, json& patch) {
  const size_t eq = setting.find('=');
  if (eq == std::string::npos || eq == 0) {
    return InvalidArgument("--set: expected KEY=VALUE, got '" + setting + "'");
  }
  const std::string key = setting.substr(0, eq), text = setting.substr(eq + 1);
  // A JSON value (a number, a list), else the text as a string.
  json value = ParseJsonOrNull(text);
  if (value.is_null() && text != "null") value = text;
  json* target = &patch;
  size_t start = 0;
  for (size_t dot = key.find('.'); dot != std::string::npos; dot = key.find('.', start)) {
    target = &(*target)[key.substr(start, dot - start)];
    if (!target->is_null() && !target->is_object()) {
      return InvalidArgument("--set: '" + key + "' sets a field inside a value set before");
    }
    start = dot + 1;
  }
  (*target)[key.substr(start)] = value;
  return Status::Ok();
}

// "3 of 3 nodes", or "no: <why>" (docs/environments.md, "Runs here"); "-" from a server that
// does not say.
std::string RunsHereText(const std::optional<protocol::EnvironmentRunsHere>& here) {
  if (!here) return "-";
  if (here->nodes == 0) return "no: " + here->why_not;
  return std::to_string(here->nodes) + " of " + std::to_string(here->of) +
         (here->of == 1 ? " node" : " nodes");
}

void PrintEnvironments(const std::vector<protocol::EnvironmentView>& envs) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& e : envs) {
    rows.push_back({e.name, std::to_string(e.version), e.Builtin() ? "(built-in)" : e.owner,
                    Join(e.spec.Runtimes(), ","), Join(e.projects, ","), e.spec.description,
                    RunsHereText(e.runs_here)});
  }
  PrintTable({"NAME", "VERSION", "OWNER", "RUNTIMES", "SHARED WITH", "DESCRIPTION", "RUNS HERE"},
             rows);
}

void PrintEnvironment(const protocol::EnvironmentView& e) {
  std::cout << "Environment " << e.name << "@" << e.version
            << "  owner: " << (e.Builtin() ? "(built-in)" : e.owner)
            << "  runtimes: " << json(e.spec.Runtimes()).dump()
            << "  shared with: " << json(e.projects).dump() << "\n"
            << "Runs here: " << RunsHereText(e.runs_here) << "\n"
            << protocol::ToJson(e.spec).dump(2) << "\n";
}

void AddEnvironmentCommands(CLI::App& app, int* exit_code) {
  struct Flags {
    std::string name, target, file, project, image, description, output = "table";
    std::vector<std::string> settings;
  };
  auto f = std::make_shared<Flags>();
  auto out_opt = [&](CLI::App* c) {
    c->add_option("-o,--output", f->output, "table or json")
        ->check(CLI::IsMember({"table", "json"}));
  };
  // Prints an environment answer: JSON, or `verb` and NAME@VERSION.
  auto print = [f](const json& answer, const std::string& verb) -> Status {
    auto e = protocol::ParseEnvironmentView(answer);
    if (!e.ok()) return e.status();
    PrintAnswer(answer, f->output,
                verb + " environment " + e->name + "@" + std::to_string(e->version));
    return Status::Ok();
  };
  CLI::App* env =
      app.add_subcommand("environment", "Environments jobs run in (docs/environments.md)");
  env->alias("env");
  env->require_subcommand(1);
  // Names go into URL paths: only valid references (protocol::ParseEnvironmentRef) pass.
  const auto ref_check = CLI::Validator(
      [](std::string& text) {
        auto ref = protocol::ParseEnvironmentRef(text, "name");
        return ref.ok() ? std::string() : ref.status().message();
      },
      "NAME[@VERSION]");
  const auto name_check = CLI::Validator(
      [](std::string& text) {
        return protocol::CheckName(protocol::NameKind::kEnvironment, text).message();
      },
      "NAME");

  CLI::App* list = env->add_subcommand("list", "Environments you may use (latest versions)");
  out_opt(list);
  list->callback([f, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      return GetAndPrint(client, "/api/v1/environments", f->output, protocol::ParseEnvironmentViews,
                         PrintEnvironments);
    });
  });

  CLI::App* show = env->add_subcommand("show", "One environment: NAME (latest) or NAME@VERSION");
  show->add_option("name", f->name, "NAME or NAME@VERSION")->required()->check(ref_check);
  out_opt(show);
  show->callback([f, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      const size_t at = f->name.find('@');
      std::string path = "/api/v1/environments/" + f->name.substr(0, at);
      if (at != std::string::npos) path += "?version=" + f->name.substr(at + 1);
      auto r = client.Get(path);
      if (!r.ok()) return r.status();
      if (f->output == "json") {
        std::cout << r->dump(2) << "\n";
        return Status::Ok();
      }
      auto e = protocol::ParseEnvironmentView(*r);
      if (!e.ok()) return e.status();
      PrintEnvironment(*e);
      return Status::Ok();
    });
  });

  CLI::App* create = env->add_subcommand(
      "create", "Create an environment from a spec file, or a new version of one of yours");
  create->add_option("-f,--file", f->file, "Environment spec (YAML or JSON)")->required();
  out_opt(create);
  create->callback([f, print, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      auto spec = ReadJsonOrYamlFile(f->file);
      if (!spec.ok()) return spec.status();
      auto r = client.Post("/api/v1/environments", *spec);
      if (!r.ok()) return r.status();
      return print(*r, "created");
    });
  });

  CLI::App* clone = env->add_subcommand("clone", "Create environment NEW from SRC, changed");
  clone->add_option("source", f->name, "The environment to copy (its latest version)")
      ->required()
      ->check(name_check);
  clone->add_option("name", f->target, "The new environment's name")->required()->check(name_check);
  clone->add_option("--set", f->settings,
                    "KEY=VALUE: a spec field to change (dotted: host.venv, gpus.min, env.NAME; "
                    "VALUE is JSON or a string; null removes it); repeatable");
  clone->add_option("--image", f->image, "The container image (same as --set image=I)");
  clone->add_option("--description", f->description, "What it is for");
  out_opt(clone);
  clone->callback([f, print, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      json patch = json::object();
      for (const auto& setting : f->settings) CORRAL_RETURN_IF_ERROR(AddSetting(setting, patch));
      if (!f->image.empty()) patch["image"] = f->image;
      if (!f->description.empty()) patch["description"] = f->description;
      auto r = client.Post("/api/v1/environments/" + f->name + "/clone",
                           {{"name", f->target}, {"set", patch}});
      if (!r.ok()) return r.status();
      return print(*r, "created");
    });
  });

  CLI::App* share = env->add_subcommand("share", "Let a project's members use an environment");
  share->add_option("name", f->name, "Environment")->required()->check(name_check);
  share->add_option("--project", f->project, "Project")->required();
  out_opt(share);
  share->callback([f, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      auto r = client.Post("/api/v1/environments/" + f->name + "/share", {{"project", f->project}});
      if (!r.ok()) return r.status();
      PrintAnswer(*r, f->output, "shared environment " + f->name + " with " + f->project);
      return Status::Ok();
    });
  });
}

void AddClusterCommands(CLI::App& app, int* exit_code) {
  struct Flags {
    std::string name, output = "table", server, token, user, description, expires;
    std::string max_pending_jobs, max_submits_per_minute;  // set-limits: N or "none"
    std::vector<std::string> projects;
    bool admin = false;
    int64_t id = -1;
  };
  auto f = std::make_shared<Flags>();
  auto out_opt = [&](CLI::App* c) {
    c->add_option("-o,--output", f->output, "table or json")
        ->check(CLI::IsMember({"table", "json"}));
  };
  // A command that GETs `path`, decodes it with `parse` (a protocol codec of a list) and prints
  // a table of `header` with `row` of each item (or the JSON as the server sent it).
  auto list = [&](CLI::App* parent, const char* name, const char* help, std::string path,
                  std::vector<std::string> header, auto parse, auto row) {
    CLI::App* c = parent->add_subcommand(name, help);
    out_opt(c);
    c->callback([f, exit_code, path, header, parse, row] {
      *exit_code = WithClient([&](ApiClient& client) -> Status {
        return GetAndPrint(client, path, f->output, parse, [&](const auto& items) {
          std::vector<std::vector<std::string>> table;
          for (const auto& item : items) table.push_back(row(item));
          PrintTable(header, table);
        });
      });
    });
  };
  list(&app, "nodes", "Nodes and their free resources (-o json: per GPU, in milli)",
       "/api/v1/nodes", {"NAME", "STATE", "GPUS", "FREE GPUS", "FREE CPUS", "FREE MEMORY"},
       protocol::ParseNodeViews, [](const protocol::NodeView& n) -> std::vector<std::string> {
         std::string gpus = std::to_string(n.gpus);
         if (n.gpus > 0 && !n.gpu_model.empty()) gpus += " " + n.gpu_model;
         std::vector<std::string> row = {
             n.name, std::string(model::ToString(n.state)) + (n.unreachable ? ", unreachable" : ""),
             gpus};
         if (!n.free) {
           row.insert(row.end(), {"", "", ""});  // the scheduler does not model it
           return row;
         }
         int64_t free_milli = 0;
         for (int64_t milli : n.free->gpu_milli) free_milli += milli;
         row.push_back(Gpus(MilliGpu(free_milli)) + " of " + std::to_string(n.gpus));
         row.push_back(Cores(n.free->cpu) + " of " + Cores(n.cpu));
         row.push_back(Mebibytes(n.free->memory) + " of " + Mebibytes(n.memory));
         return row;
       });
  list(&app, "projects", "Projects you belong to (all, for admins), with quotas, limits and use",
       "/api/v1/projects",
       {"NAME", "QUOTA_GPUS", "WEIGHT", "LIMIT_GPUS", "MAX_PENDING_JOBS", "MAX_SUBMITS_PER_MINUTE",
        "RUNNING_GPUS", "BORROWED_GPUS", "DESCRIPTION"},
       protocol::ParseProjectViews, [](const protocol::ProjectView& p) -> std::vector<std::string> {
         return {p.name,
                 Gpus(p.sharing.quota),
                 Decimal(p.sharing.weight, 3),
                 p.sharing.limit ? Gpus(*p.sharing.limit) : "",
                 Cell(p.submit_limits.max_pending_jobs),
                 Cell(p.submit_limits.max_submits_per_minute),
                 Gpus(p.running),
                 Gpus(p.borrowed),
                 p.description};
       });
  CLI::App* queue = app.add_subcommand("queue", "Pending jobs in the order they will be served");
  queue->add_option("--limit", f->id, "At most this many (default 100, at most 1000)");
  out_opt(queue);
  queue->callback([f, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      auto answer = client.Get("/api/v1/queue" +
                               (f->id > 0 ? "?limit=" + std::to_string(f->id) : std::string()));
      if (!answer.ok()) return answer.status();
      if (f->output == "json") {
        std::cout << answer->dump(2) << "\n";
        return Status::Ok();
      }
      auto rows = protocol::ParseQueue(*answer);
      if (!rows.ok()) return rows.status();
      std::vector<std::vector<std::string>> table;
      for (const protocol::QueueRow& q : *rows) {
        table.push_back({std::to_string(q.position), std::to_string(q.id.value()), q.user,
                         q.project, Gpus(q.gpus),
                         q.estimated_start ? Time(q.estimated_start) : "unknown",
                         q.pending_reason.message});
      }
      PrintTable({"#", "ID", "USER", "PROJECT", "GPUS", "EST. START", "WAITS BECAUSE"}, table);
      return Status::Ok();
    });
  });
  CLI::App* policy = app.add_subcommand(
      "policy", "The scheduling rules in force: queue order, fair share, placement");
  out_opt(policy);
  policy->callback([f, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      return GetAndPrint(client, "/api/v1/policy", f->output, protocol::ParsePolicyView,
                         PrintPolicy);
    });
  });
  list(&app, "users", "Users and their submit limits (admin)", "/api/v1/users",
       {"NAME", "ADMIN", "MAX_PENDING_JOBS", "MAX_SUBMITS_PER_MINUTE"}, protocol::ParseUserViews,
       [](const protocol::UserView& u) -> std::vector<std::string> {
         return {u.name, json(u.admin).dump(), Cell(u.submit_limits.max_pending_jobs),
                 Cell(u.submit_limits.max_submits_per_minute)};
       });
  const auto token_row = [](const protocol::TokenView& t) -> std::vector<std::string> {
    return {std::to_string(t.id), t.name, Time(t.created_at),
            t.expires_at ? Time(t.expires_at) : "never", json(t.revoked).dump()};
  };
  const std::vector<std::string> token_header = {"ID", "NAME", "CREATED_AT", "EXPIRES_AT",
                                                 "REVOKED"};
  list(&app, "tokens", "Your API tokens (as corral token list)", "/api/v1/tokens", token_header,
       protocol::ParseTokenViews, token_row);

  CLI::App* node = app.add_subcommand("node", "Cordon, uncordon, drain or remove a node (admin)");
  node->require_subcommand(1);
  for (const char* action : {"cordon", "uncordon", "drain", "remove"}) {
    const std::string what = std::string(action) == "remove"
                                 ? "remove a node: lost now, its jobs requeued or ended lost"
                                 : std::string(action) + " a node";
    CLI::App* c = node->add_subcommand(action, what);
    c->add_option("name", f->name, "Node name")->required();
    out_opt(c);
    std::string a = action;
    c->callback([f, exit_code, a] {
      *exit_code = WithClient([&](ApiClient& client) -> Status {
        auto r = client.Post("/api/v1/nodes/" + f->name + "/" + a, json::object());
        if (!r.ok()) return r.status();
        PrintAnswer(*r, f->output, a + ": " + f->name);
        return Status::Ok();
      });
    });
  }

  CLI::App* login = app.add_subcommand("login", "Save the server and token for later commands");
  login
      ->add_option("--server", f->server,
                   "http(s)://host:port of the server, or of several servers comma-separated: "
                   "each request goes to the one that serves (the leader)")
      ->required();
  login->add_option("--token", f->token, "API token (or CORRAL_TOKEN)");
  out_opt(login);
  login->callback([f, exit_code] {
    Result<ServerList> servers = ServerList::Parse(f->server);
    if (!servers.ok()) {
      *exit_code = Fail(InvalidArgument("--server: " + servers.status().message()));
      return;
    }
    Result<std::chrono::milliseconds> retry_timeout = RetryTimeout();
    if (!retry_timeout.ok()) {
      *exit_code = Fail(retry_timeout.status());
      return;
    }
    ClientConfig config{*servers, f->token, "", *retry_timeout};
    if (config.token.empty()) {
      if (const char* t = std::getenv("CORRAL_TOKEN")) config.token = t;
    }
    ApiClient client(config);
    auto who = client.Get("/api/v1/whoami");
    if (!who.ok()) {
      *exit_code = Fail(who.status());
      return;
    }
    Status s = SaveClientConfig(config);
    *exit_code = s.ok() ? 0 : Fail(s);
    if (s.ok()) {
      PrintAnswer(*who, f->output, "logged in as " + Str(*who, "user") + " (" + ConfigPath() + ")");
    }
  });

  CLI::App* whoami = app.add_subcommand("whoami", "Who the configured token belongs to");
  out_opt(whoami);
  whoami->callback([f, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      auto who = client.Get("/api/v1/whoami");
      if (!who.ok()) return who.status();
      PrintAnswer(*who, f->output, Str(*who, "user"));
      return Status::Ok();
    });
  });

  CLI::App* user = app.add_subcommand("user", "Create users and set their limits (admin)");
  user->require_subcommand(1);
  CLI::App* user_create = user->add_subcommand("create", "Create a user; prints their token once");
  user_create->add_option("name", f->name, "User name")->required();
  user_create->add_flag("--admin", f->admin, "Make an admin");
  user_create->add_option("--project", f->projects, "Member of this project (repeatable)");
  out_opt(user_create);
  user_create->callback([f, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      auto r = client.Post("/api/v1/users",
                           {{"name", f->name}, {"admin", f->admin}, {"projects", f->projects}});
      if (!r.ok()) return r.status();
      auto user = protocol::ParseNewUser(*r);
      if (!user.ok()) return user.status();
      PrintAnswer(*r, f->output, "token for " + f->name + ": " + user->token);
      return Status::Ok();
    });
  });

  // `corral user set-limits` and `corral project set-limits` (admin): only the flags given
  // change, from the limits `current` reads; PUT to `path_of(name)`.
  auto set_limits = [&](CLI::App* parent, const std::string& what, auto current, auto path_of) {
    CLI::App* c = parent->add_subcommand(
        "set-limits", "Change a " + what +
                          "'s submit limits: pending jobs, jobs submitted a minute (flags given)");
    c->add_option("name", f->name, what == "user" ? "User" : "Project")->required();
    c->add_option("--max-pending-jobs", f->max_pending_jobs,
                  "Jobs pending at once (an array's elements count one by one), or none");
    c->add_option("--max-submits-per-minute", f->max_submits_per_minute,
                  "Jobs submitted in any 60 s (array elements count one by one), or none");
    out_opt(c);
    c->callback([f, exit_code, c, what, current, path_of] {
      // The flags first: a bad one is refused before any request.
      std::optional<std::optional<int64_t>> pending, per_minute;  // outer: the flag was given
      for (auto [flag, text, out] :
           {std::tuple{"--max-pending-jobs", &f->max_pending_jobs, &pending},
            {"--max-submits-per-minute", &f->max_submits_per_minute, &per_minute}}) {
        if (!c->count(flag)) continue;
        auto value = LimitFlag(*text, flag);
        if (!value.ok()) {
          *exit_code = Fail(value.status());
          return;
        }
        *out = *value;
      }
      *exit_code = WithClient([&](ApiClient& client) -> Status {
        Result<model::SubmitLimits> limits = current(client, f->name);
        if (!limits.ok()) return limits.status();
        if (pending) limits->max_pending_jobs = *pending;
        if (per_minute) limits->max_submits_per_minute = *per_minute;
        auto r = client.Put(path_of(f->name), protocol::ToJson(*limits));
        if (!r.ok()) return r.status();
        PrintAnswer(
            *r, f->output,
            "set the submit limits of " + what + " " + f->name + ": " + LimitsText(*limits));
        return Status::Ok();
      });
    });
  };
  set_limits(
      user, "user",
      [](ApiClient& client, const std::string& name) -> Result<model::SubmitLimits> {
        auto answer = client.Get("/api/v1/users");
        if (!answer.ok()) return answer.status();
        auto users = protocol::ParseUserViews(*answer);
        if (!users.ok()) return users.status();
        for (const protocol::UserView& u : *users) {
          if (u.name == name) return u.submit_limits;
        }
        return NotFound("user '" + name + "' not found");
      },
      [](const std::string& name) { return "/api/v1/users/" + name + "/limits"; });

  CLI::App* project =
      app.add_subcommand("project", "Create projects, add members, set quotas and limits (admin)");
  project->require_subcommand(1);
  CLI::App* project_create = project->add_subcommand("create", "Create a project");
  project_create->add_option("name", f->name, "Project name")->required();
  project_create->add_option("--description", f->description, "What it is for");
  out_opt(project_create);
  project_create->callback([f, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      auto r =
          client.Post("/api/v1/projects", {{"name", f->name}, {"description", f->description}});
      if (!r.ok()) return r.status();
      PrintAnswer(*r, f->output, "created project " + f->name);
      return Status::Ok();
    });
  });
  struct Quota {
    double gpus = 0, weight = 1, limit = -1, user_limit = -1;
    std::vector<std::string> model_gpus;
  };
  auto q = std::make_shared<Quota>();
  CLI::App* set_quota = project->add_subcommand(
      "set-quota", "Change a project's guaranteed GPUs, weight or limit (flags given)");
  set_quota->add_option("name", f->name, "Project")->required();
  set_quota->add_option("--gpus", q->gpus, "Guaranteed GPUs of any model")
      ->check(CLI::NonNegativeNumber);
  set_quota->add_option("--model-gpus", q->model_gpus, "Guaranteed GPUs of one model: MODEL=N");
  set_quota->add_option("--weight", q->weight, "Fair-share weight")->check(CLI::PositiveNumber);
  set_quota->add_option("--limit", q->limit, "Hard cap on GPUs running at once")
      ->check(CLI::NonNegativeNumber);
  set_quota->add_option("--user-limit", q->user_limit, "The same cap for each user of it")
      ->check(CLI::NonNegativeNumber);
  out_opt(set_quota);
  set_quota->callback([f, q, exit_code, set_quota] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      // Only the flags given change: start from the project's current sharing.
      auto answer = client.Get("/api/v1/projects");
      if (!answer.ok()) return answer.status();
      auto projects = protocol::ParseProjectViews(*answer);
      if (!projects.ok()) return projects.status();
      auto project =
          std::find_if(projects->begin(), projects->end(),
                       [&](const protocol::ProjectView& p) { return p.name == f->name; });
      if (project == projects->end()) return NotFound("project '" + f->name + "' not found");
      protocol::ProjectSharing& sharing = project->sharing;
      if (set_quota->count("--gpus")) sharing.quota = MilliOf(q->gpus);
      if (set_quota->count("--weight")) sharing.weight = q->weight;
      if (set_quota->count("--limit")) sharing.limit = MilliOf(q->limit);
      if (set_quota->count("--user-limit")) sharing.user_limit = MilliOf(q->user_limit);
      for (const std::string& mg : q->model_gpus) {
        const size_t eq = mg.find('=');
        char* end = nullptr;
        const double n = eq == std::string::npos ? -1 : std::strtod(mg.c_str() + eq + 1, &end);
        if (eq == std::string::npos || eq == 0 || n < 0 || end != mg.c_str() + mg.size()) {
          return InvalidArgument("--model-gpus: expected MODEL=N, got '" + mg + "'");
        }
        sharing.model_quota[mg.substr(0, eq)] = MilliOf(n);
      }
      auto r = client.Put("/api/v1/projects/" + f->name + "/sharing", protocol::ToJson(sharing));
      if (!r.ok()) return r.status();
      const json* stored = r->contains("sharing") ? &(*r)["sharing"] : nullptr;
      auto set = protocol::ParseProjectSharing(stored ? *stored : json());
      if (!set.ok()) return set.status();
      PrintAnswer(*r, f->output, "set the quota of " + f->name + ": " + SharingText(*set));
      return Status::Ok();
    });
  });
  set_limits(
      project, "project",
      [](ApiClient& client, const std::string& name) -> Result<model::SubmitLimits> {
        auto answer = client.Get("/api/v1/projects");
        if (!answer.ok()) return answer.status();
        auto projects = protocol::ParseProjectViews(*answer);
        if (!projects.ok()) return projects.status();
        for (const protocol::ProjectView& p : *projects) {
          if (p.name == name) return p.submit_limits;
        }
        return NotFound("project '" + name + "' not found");
      },
      [](const std::string& name) { return "/api/v1/projects/" + name + "/limits"; });
  CLI::App* add_member = project->add_subcommand("add-member", "Add a user to a project");
  add_member->add_option("name", f->name, "Project")->required();
  add_member->add_option("user", f->user, "User")->required();
  out_opt(add_member);
  add_member->callback([f, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      auto r = client.Post("/api/v1/projects/" + f->name + "/members", {{"user", f->user}});
      if (!r.ok()) return r.status();
      PrintAnswer(*r, f->output, "added " + f->user + " to " + f->name);
      return Status::Ok();
    });
  });

  CLI::App* token = app.add_subcommand("token", "Create, list or revoke your API tokens");
  token->require_subcommand(1);
  CLI::App* token_create = token->add_subcommand("create", "Create a token; printed once");
  token_create->add_option("name", f->name, "What it is for")->required();
  token_create->add_option("--expires", f->expires,
                           "It stops working after this long: 90s, 30m, 12h, 30d (default: the "
                           "server's --default-token-expiry; none there: until revoked)");
  out_opt(token_create);
  token_create->callback([f, exit_code, token_create] {
    json body = {{"name", f->name}};
    if (token_create->count("--expires")) {
      auto lifetime = ParseDuration(f->expires, "--expires");
      if (lifetime.ok() && lifetime->value() < 1) {
        lifetime = InvalidArgument("--expires: must be at least 1s, got '" + f->expires + "'");
      }
      if (!lifetime.ok()) {
        *exit_code = Fail(lifetime.status());
        return;
      }
      body["expires_in_s"] = lifetime->value();
    }
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      auto r = client.Post("/api/v1/tokens", body);
      if (!r.ok()) return r.status();
      auto token = protocol::ParseNewToken(*r);
      if (!token.ok()) return token.status();
      PrintAnswer(*r, f->output, token->token);
      if (f->output != "json" && token->expires_at) {
        std::cerr << "expires at " << Time(token->expires_at) << "\n";
      }
      return Status::Ok();
    });
  });
  list(token, "list", "Your API tokens, with when they expire", "/api/v1/tokens", token_header,
       protocol::ParseTokenViews, token_row);
  CLI::App* token_revoke = token->add_subcommand("revoke", "Revoke a token by id");
  token_revoke->add_option("id", f->id, "Token id")->required();
  out_opt(token_revoke);
  token_revoke->callback([f, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      auto r = client.Delete("/api/v1/tokens/" + std::to_string(f->id));
      if (!r.ok()) return r.status();
      PrintAnswer(*r, f->output, "revoked token " + std::to_string(f->id));
      return Status::Ok();
    });
  });
}

std::string IdleNotice(const protocol::SessionView& s) {
  if (!s.idle_notice) return "";
  return "stops at " + Time(s.idle_notice->stops_at) + " unless used";
}

void PrintSession(const protocol::SessionView& s) {
  std::cout << "Session " << s.id.value() << " (" << s.name
            << ")  state: " << model::ToString(s.state) << (s.stopping ? " (stopping)" : "")
            << "\n  user: " << s.user << "  project: " << s.project
            << "  environment: " << s.environment << "\n  node: " << s.node.value_or("")
            << "  port: " << Cell(s.port) << "\n  url: " << s.url << "\n";
  if (s.direct_url) {
    std::cout << "  direct url (on the node, with the app's token): " << *s.direct_url << "\n";
  }
  std::cout << "  idle timeout: " << s.idle_timeout.value() << " s"
            << "  last activity: " << Time(s.last_activity) << "\n";
  if (!IdleNotice(s).empty()) std::cout << "  idle: " << IdleNotice(s) << "\n";
  if (s.pending_reason) std::cout << "  waiting: " << s.pending_reason->message << "\n";
  std::cout << "  reason: " << s.reason << "\n";
}

// The lines `corral session start` prints once the session is known.
void PrintSessionStarted(const protocol::SessionView& s) {
  std::cout << "session " << s.id.value() << " " << model::ToString(s.state) << ": " << s.url
            << "\n";
  if (s.direct_url) {
    std::cout << "direct url (on the node, with the app's token): " << *s.direct_url << "\n";
  }
  std::cout << "Open the url in a browser (it asks for your API token once), or send "
               "'Authorization: Bearer <token>'.\n";
}

// A session answer of the server, decoded.
Result<protocol::SessionView> GetSession(ApiClient& client, int64_t id) {
  auto answer = client.Get("/api/v1/sessions/" + std::to_string(id));
  if (!answer.ok()) return answer.status();
  return protocol::ParseSessionView(*answer);
}

// Polls session `id` until it runs and its app answers through the session gateway (any answer
// but the gateway's 502 and 503): FailedPrecondition when it ends first, Internal (exit 1) when
// it is not ready after `timeout` seconds (0: no limit; the session is left as it is).
Result<protocol::SessionView> WaitForSession(ApiClient& client, int64_t id, int64_t timeout) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout);
  while (true) {
    auto s = GetSession(client, id);
    if (!s.ok()) return s.status();
    const std::string state(model::ToString(s->state));
    if (model::IsFinal(s->state)) {
      return FailedPrecondition("session " + std::to_string(id) + " ended (" + state +
                                "): " + s->reason);
    }
    std::string waiting = state;
    if (s->state == model::JobState::kRunning) {
      auto status = client.GetStatusAt(s->url);  // through the session gateway
      if (!status.ok()) return status.status();
      if (*status != 502 && *status != 503) return s;
      waiting = "running, its app not answering yet (HTTP " + std::to_string(*status) + ")";
    } else if (s->pending_reason) {
      waiting += ": " + s->pending_reason->message;
    }
    if (timeout > 0 && std::chrono::steady_clock::now() >= deadline) {
      return Status(StatusCode::kInternal,
                    "session " + std::to_string(id) + " not ready after --wait-timeout " +
                        std::to_string(timeout) + " s (" + waiting +
                        "); it was left as it is: corral session show " + std::to_string(id) +
                        ", corral session stop " + std::to_string(id));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // polling interval
  }
}

void AddSessionCommands(CLI::App& app, int* exit_code) {
  struct Flags {
    std::string environment, idle_timeout, project, name, output = "table";
    std::string wait_timeout = "10m";
    std::optional<int> gpus;  // given: checked by the spec's codec, whatever its sign
    bool wait = false, shell = false;
    int64_t id = -1;
    std::vector<std::string> env, command;
  };
  auto f = std::make_shared<Flags>();
  auto out_opt = [&](CLI::App* c) {
    c->add_option("-o,--output", f->output, "table or json")
        ->check(CLI::IsMember({"table", "json"}));
  };
  CLI::App* session = app.add_subcommand(
      "session", "Interactive sessions: Jupyter or any HTTP app, reached through the server");
  session->require_subcommand(1);

  CLI::App* start = session->add_subcommand(
      "start",
      "Start a session: corral session start --environment jupyter [--gpus 1] [-- CMD ...]");
  // The same flags as corral submit's: --environment names the environment, --env sets
  // variables.
  start->add_option("--environment", f->environment,
                    "Environment NAME or NAME@VERSION (e.g. jupyter); its command is the default");
  start->add_option("--env", f->env, "NAME=VALUE for the app (repeatable)");
  start->add_option("--gpus", f->gpus, "Whole GPUs (default 0)")->check(CLI::NonNegativeNumber);
  start->add_option("--project", f->project, "Project (default: the 'default' project)");
  start->add_option("--name", f->name, "Session name");
  start->add_option("--idle-timeout", f->idle_timeout,
                    "Stop after this long without use (90s, 30m, 2h; at least 1m; 0: never; "
                    "default: the server's)");
  start->add_flag("--wait", f->wait, "Wait until it runs and its app answers");
  start->add_option("--wait-timeout", f->wait_timeout,
                    "With --wait: give up (exit 1, the session left as it is) after this long "
                    "(90s, 30m, 2h; default 10m; 0: no limit)");
  start->add_flag("--shell", f->shell, "Run the command with /bin/sh -c");
  start->add_option("command", f->command,
                    "The app after -- (it must serve HTTP on $CORRAL_SESSION_PORT under "
                    "$CORRAL_SESSION_URL_PREFIX)");
  out_opt(start);
  // The session's spec from the flags, checked (CheckSpec) as corral submit's is.
  auto session_spec = [](const Flags& f) -> Result<json> {
    json spec = {{"session", json::object()}};
    auto env = EnvFlags(f.env);
    if (!env.ok()) return env.status();
    if (!env->empty()) spec["env"] = *env;
    if (!f.idle_timeout.empty()) {
      auto seconds = ParseDuration(f.idle_timeout, "--idle-timeout");
      if (!seconds.ok()) return seconds.status();
      if (seconds->value() != 0 && seconds->value() < 60) {
        return InvalidArgument("--idle-timeout: at least 1m (60 s), or 0 for never; got '" +
                               f.idle_timeout + "'");
      }
      spec["session"]["idle_timeout_s"] = seconds->value();
    }
    if (!f.environment.empty()) spec["environment"] = f.environment;
    if (!f.project.empty()) spec["project"] = f.project;
    if (!f.name.empty()) spec["name"] = f.name;
    if (f.gpus) spec["resources"] = {{"gpus", *f.gpus}};
    if (!f.command.empty()) {
      spec["command"] = f.shell ? ShellCommand(f.command) : json(f.command);
      if (f.shell) spec["shell"] = true;
    }
    if (f.environment.empty() && f.command.empty()) {
      return InvalidArgument("session start: give --environment NAME, or a command after --");
    }
    CORRAL_RETURN_IF_ERROR(CheckSpec(spec));
    return spec;
  };
  start->callback([f, exit_code, session_spec] {
    // Before any request, and before the config is read: a bad spec or flag is refused even
    // where no server is configured.
    auto spec = session_spec(*f);
    auto wait_timeout = ParseDuration(f->wait_timeout, "--wait-timeout");
    if (!spec.ok() || !wait_timeout.ok()) {
      *exit_code = Fail(spec.ok() ? wait_timeout.status() : spec.status());
      return;
    }
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      auto answer = client.Post("/api/v1/sessions", *spec);
      if (!answer.ok()) return answer.status();
      auto s = protocol::ParseSessionView(*answer);
      if (!s.ok()) return s.status();
      if (f->wait) {
        s = WaitForSession(client, s->id.value(), wait_timeout->value());
        if (!s.ok()) return s.status();
      }
      if (f->output == "json") {
        std::cout << protocol::ToJson(*s).dump(2) << "\n";
      } else {
        PrintSessionStarted(*s);
      }
      return Status::Ok();
    });
  });

  CLI::App* list = session->add_subcommand("list", "Your sessions not yet ended");
  out_opt(list);
  list->callback([f, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      auto rows = client.Get("/api/v1/sessions");
      if (!rows.ok()) return rows.status();
      if (f->output == "json") {
        std::cout << rows->dump(2) << "\n";
        return Status::Ok();
      }
      auto sessions = protocol::ParseSessionViews(*rows);
      if (!sessions.ok()) return sessions.status();
      std::vector<std::vector<std::string>> table;
      for (const auto& s : *sessions) {
        table.push_back({std::to_string(s.id.value()), s.name,
                         std::string(model::ToString(s.state)), s.environment, s.node.value_or(""),
                         Time(s.last_activity), IdleNotice(s), s.url});
      }
      PrintTable({"ID", "NAME", "STATE", "ENVIRONMENT", "NODE", "LAST ACTIVITY", "IDLE", "URL"},
                 table);
      return Status::Ok();
    });
  });

  CLI::App* show = session->add_subcommand("show", "A session: state, node, URLs, activity");
  show->add_option("id", f->id, "Session (job) id")->required();
  out_opt(show);
  show->callback([f, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      if (f->output == "json") {
        auto s = client.Get("/api/v1/sessions/" + std::to_string(f->id));
        if (!s.ok()) return s.status();
        std::cout << s->dump(2) << "\n";
        return Status::Ok();
      }
      auto s = GetSession(client, f->id);
      if (!s.ok()) return s.status();
      PrintSession(*s);
      return Status::Ok();
    });
  });

  CLI::App* stop = session->add_subcommand("stop", "Stop a session (cancels its job)");
  stop->add_option("id", f->id, "Session (job) id")->required();
  out_opt(stop);
  stop->callback([f, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      auto r = client.Delete("/api/v1/sessions/" + std::to_string(f->id));
      if (!r.ok()) return r.status();
      PrintAnswer(*r, f->output, "stopping session " + std::to_string(f->id));
      return Status::Ok();
    });
  });
}

}  // namespace

// `corral gpus` and `corral idle` (docs/monitoring.md): every GPU's last sample with the job
// holding it, or only the allocated GPUs flagged idle.
void AddMonitoringCommands(CLI::App& app, int* exit_code) {
  struct Flags {
    std::string output = "table";
    bool idle_only = false;
  };
  auto f = std::make_shared<Flags>();
  auto run = [f, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      auto answer = client.Get(std::string("/api/v1/gpus") + (f->idle_only ? "?idle=1" : ""));
      if (!answer.ok()) return answer.status();
      if (f->output == "json") {
        std::cout << answer->dump(2) << "\n";
        return Status::Ok();
      }
      std::vector<std::vector<std::string>> rows;
      for (const auto& g : (*answer)["gpus"]) {
        std::string job, user;
        for (const auto& h : g["holders"]) {
          // Another project's job, which the server shows only as "in use".
          const bool hidden = !h.contains("job");
          job += (job.empty() ? "" : ",") + (hidden ? std::string("in use") : Str(h, "job"));
          user += (user.empty() ? "" : ",") + (hidden ? std::string("-") : Str(h, "user"));
        }
        const std::string util = Str(g, "utilization_percent");
        rows.push_back({Str(g, "node"), Str(g, "index"), Str(g, "model"),
                        util.empty() ? "-" : util + "%", Str(g, "memory_used_mib"), job, user,
                        g.contains("idle_for_s") ? Str(g, "idle_for_s") + " s" : "",
                        g.value("idle", false) ? "yes" : ""});
      }
      if (f->idle_only && rows.empty()) {
        std::cout << "No idle GPUs (allocated, under " << Str(*answer, "idle_threshold_percent")
                  << "% for " << Str(*answer, "idle_after_s") << " s).\n";
        return Status::Ok();
      }
      PrintTable({"NODE", "GPU", "MODEL", "UTIL", "MEM MIB", "JOB", "USER", "IDLE FOR", "IDLE"},
                 rows);
      return Status::Ok();
    });
  };
  CLI::App* gpus = app.add_subcommand("gpus", "Every GPU: utilisation, memory, who holds it");
  gpus->add_flag("--idle", f->idle_only, "Only allocated GPUs flagged idle");
  CLI::App* idle =
      app.add_subcommand("idle", "Allocated GPUs under the idle threshold for the configured time");
  for (CLI::App* c : {gpus, idle}) {
    c->add_option("-o,--output", f->output, "table or json")
        ->check(CLI::IsMember({"table", "json"}));
  }
  gpus->callback(run);
  idle->callback([f, run] {
    f->idle_only = true;
    run();
  });

  struct CapacityFlags {
    std::string since = "30d", extra = "0,8,16,32,64", output = "table";
    int64_t target_p90_wait_s = 3600;
    int horizon_days = 7;
  };
  auto cap = std::make_shared<CapacityFlags>();
  CLI::App* capacity = app.add_subcommand(
      "capacity",
      "Capacity planning: the demand forecast, and how many more GPUs would have kept the p90 "
      "wait under a target (admin: replays the recorded jobs)");
  capacity->add_option("--since", cap->since, "Replay the jobs of the last Nd, or since YYYY-MM-DD")
      ->capture_default_str();
  capacity->add_option("--extra", cap->extra, "Extra GPU counts to try, comma-separated")
      ->capture_default_str();
  capacity->add_option("--target-p90-wait", cap->target_p90_wait_s, "Seconds")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  capacity->add_option("--horizon-days", cap->horizon_days, "Days of forecast to summarise")
      ->check(CLI::Range(1, 28))
      ->capture_default_str();
  capacity->add_option("-o,--output", cap->output, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  capacity->callback([cap, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      json extra = json::array();
      for (const std::string& word : Split(cap->extra, ',')) {
        int v = 0;
        auto [end, err] = std::from_chars(word.data(), word.data() + word.size(), v);
        if (err != std::errc() || end != word.data() + word.size() || v < 0) {
          return InvalidArgument("--extra: '" + word + "' is not a GPU count");
        }
        extra.push_back(v);
      }
      auto forecast =
          client.Get("/api/v1/capacity/forecast?horizon_days=" + std::to_string(cap->horizon_days));
      if (!forecast.ok()) return forecast.status();
      // The what-if is for admins; anyone else still gets the forecast.
      auto what_if =
          client.Post("/api/v1/capacity/what-if", {{"since", cap->since},
                                                   {"extra_gpus", extra},
                                                   {"target_p90_wait_s", cap->target_p90_wait_s}});
      const bool not_admin =
          !what_if.ok() && what_if.status().code() == StatusCode::kPermissionDenied;
      if (!what_if.ok() && !not_admin) return what_if.status();
      if (cap->output == "json") {
        std::cout << json({{"forecast", *forecast},
                           {"what_if", not_admin ? json(nullptr) : *what_if}})
                         .dump(2)
                  << "\n";
        return Status::Ok();
      }
      double peak = 0, mean = 0;
      for (const auto& p : (*forecast)["forecast"]) {
        peak = std::max(peak, p.value("high", 0.0));
        mean += p.value("demand_gpus", 0.0);
      }
      if (!(*forecast)["forecast"].empty()) mean /= (*forecast)["forecast"].size();
      std::printf(
          "Capacity %s GPUs. Forecast for the next %d days: mean %.1f GPUs, peak (80%% "
          "band) %.1f.\n",
          Decimal((*forecast).value("capacity_gpus", 0.0), 1).c_str(), cap->horizon_days, mean,
          peak);
      if (not_admin) {
        std::cout << "The what-if replay is for admins.\n";
        return Status::Ok();
      }
      std::cout << "Replaying the " << Str(*what_if, "jobs") << " jobs submitted since "
                << Str(*what_if, "since");
      if (what_if->value("too_big", 0) > 0) {
        std::cout << " (" << Str(*what_if, "too_big")
                  << " more ask for more GPUs than any node has: set aside)";
      }
      std::cout << ":\n";
      std::vector<std::vector<std::string>> rows;
      // Waits as durations, rounded to the second ("never": the p90 job never started).
      auto wait = [](const json& r, const char* key) -> std::string {
        if (!r.contains(key) || !r[key].is_number()) return "never";
        return FormatDuration(Seconds(std::llround(r[key].get<double>())));
      };
      for (const auto& r : (*what_if)["results"]) {
        rows.push_back({Str(r, "extra_gpus"), Str(r, "gpus"), wait(r, "p90_wait_s"),
                        wait(r, "mean_wait_s"), Str(r, "unfinished")});
      }
      PrintTable({"EXTRA GPUS", "GPUS", "P90 WAIT", "MEAN WAIT", "NEVER STARTED"}, rows);
      const json& smallest = (*what_if)["smallest_meeting_target"];
      const std::string target = FormatDuration(Seconds(cap->target_p90_wait_s));
      std::cout << (smallest.is_null()
                        ? "None of these meets the p90 wait target of " + target + "."
                        : "The smallest that meets the p90 wait target of " + target + ": " +
                              smallest.dump() + " extra GPUs.")
                << "\n";
      return Status::Ok();
    });
  });

  struct UsageFlags {
    std::string by = "project", since = "30d", until, output = "table";
    bool csv = false;
  };
  auto u = std::make_shared<UsageFlags>();
  CLI::App* usage = app.add_subcommand(
      "usage",
      "Allocated, used (utilisation-weighted) and lost (to preemptions and resizes, since the "
      "last checkpoint) GPU-hours per user, project or day");
  usage->add_option("--by", u->by, "user, project or day, or several: project,day")
      ->capture_default_str();
  usage->add_option("--since", u->since, "Nd (the last N days) or YYYY-MM-DD")
      ->capture_default_str();
  usage->add_option("--until", u->until, "YYYY-MM-DD (default: today, UTC)");
  usage->add_flag("--csv", u->csv, "Print CSV (for spreadsheets)");
  usage->add_option("-o,--output", u->output, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  usage->callback([u, exit_code] {
    *exit_code = WithClient([&](ApiClient& client) -> Status {
      // The words go into a query: only what the server would accept anyway.
      for (const std::string* v : {&u->by, &u->since, &u->until}) {
        if (v->find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789,-") != std::string::npos) {
          return InvalidArgument("--by/--since/--until: '" + *v + "' holds unexpected characters");
        }
      }
      std::string path = "/api/v1/usage?by=" + u->by + "&since=" + u->since;
      if (!u->until.empty()) path += "&until=" + u->until;
      if (u->csv) {
        auto reply = client.GetReply(path + "&format=csv");
        if (!reply.ok()) return reply.status();
        std::cout << reply->body;
        return Status::Ok();
      }
      auto answer = client.Get(path);
      if (!answer.ok()) return answer.status();
      if (u->output == "json") {
        std::cout << answer->dump(2) << "\n";
        return Status::Ok();
      }
      // The grouping columns the server sent, in its order (user, project, day).
      std::vector<std::string> header, keys;
      for (const char* k : {"user", "project", "day"}) {
        if (u->by.find(k) == std::string::npos) continue;
        keys.push_back(k);
        header.push_back(k);
        std::transform(header.back().begin(), header.back().end(), header.back().begin(),
                       ::toupper);
      }
      for (const char* h : {"ALLOCATED GPU-H", "USED GPU-H", "UTIL %", "LOST GPU-H"}) {
        header.push_back(h);
      }
      std::vector<std::vector<std::string>> rows;
      for (const auto& r : (*answer)["rows"]) {
        std::vector<std::string> row;
        for (const std::string& k : keys) row.push_back(Str(r, k.c_str()));
        for (const char* k :
             {"allocated_gpu_hours", "used_gpu_hours", "utilization_percent", "lost_gpu_hours"}) {
          row.push_back(Str(r, k));
        }
        rows.push_back(row);
      }
      std::cout << "GPU time from " << Str(*answer, "since") << " to " << Str(*answer, "until")
                << " (UTC days)\n";
      PrintTable(header, rows);
      return Status::Ok();
    });
  });
}

namespace {

// The client commands by group (a group's commands share helpers and flags), with the
// top-level names (and aliases) each group adds, space-separated: what AddClientCommands matches
// argv[1] against. commands_test.cc checks that they match what the groups add.
struct CommandGroup {
  void (*add)(CLI::App& app, int* exit_code);
  std::string_view names;
};

constexpr CommandGroup kCommandGroups[] = {
    {AddSubmitCommands, "submit batch partitions"},
    {AddShell, "shell"},
    {AddJobCommands, "jobs job cancel logs"},
    {AddEnvironmentCommands, "environment env"},
    {AddSessionCommands, "session"},
    {AddClusterCommands,
     "nodes projects queue policy users tokens node login whoami user project token"},
    {AddMonitoringCommands, "gpus idle capacity usage"},
};

bool Names(const CommandGroup& group, std::string_view command) {
  std::string_view names = group.names;
  while (!names.empty()) {
    const size_t space = std::min(names.find(' '), names.size());
    if (names.substr(0, space) == command) return true;
    names.remove_prefix(std::min(space + 1, names.size()));
  }
  return false;
}

}  // namespace

void AddClientCommands(CLI::App& app, int* exit_code, std::string_view command) {
  app.footer(
      "The client commands talk to the servers in CORRAL_SERVER, else those 'corral login' "
      "saved: one http(s)://host:port, or several comma-separated (at most 16), of which each "
      "request finds the one that serves (the leader), for CORRAL_RETRY_TIMEOUT seconds at "
      "most (default 10). The token is CORRAL_TOKEN's, else the saved one.");
  for (const CommandGroup& group : kCommandGroups) {
    if (!command.empty() && Names(group, command)) {
      group.add(app, exit_code);
      return;
    }
  }
  for (const CommandGroup& group : kCommandGroups) group.add(app, exit_code);
}

}  // namespace corral::cli
