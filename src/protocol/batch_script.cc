#include "protocol/batch_script.h"

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>

#include "common/duration.h"
#include "common/strings.h"
#include "model/warning_signal.h"
#include "protocol/array_spec.h"
#include "protocol/job_spec.h"
#include "protocol/names.h"
#include "protocol/size_flag.h"

namespace corral::protocol {
namespace {

using nlohmann::json;

// How one option reads its value.
enum class Arity { kValue, kFlag };

// What the #SBATCH lines asked, in Slurm's terms, before it becomes corral's parts and
// processes (FinishSlurm).
struct GpuAsk {
  std::string type;  // empty: any model
  int64_t count = 0;
};
struct SlurmAsk {
  std::optional<SizeFlag> nodes;  // a range: elastic by nodes
  std::optional<int64_t> ntasks, ntasks_per_node, cpus_per_task;
  std::optional<int64_t> mem_mib, mem_per_cpu_mib, mem_per_gpu_mib;
  std::optional<GpuAsk> gpus_total, gpus_per_node, gpus_per_task;
  json fields = json::object();  // the fields that map one to one
};

// Where an option's value goes; `where` names the line and option for errors.
using SbatchHandler =
    std::function<Status(const std::string& value, const std::string& where, SlurmAsk& ask)>;
using CorralHandler =
    std::function<Status(const std::string& value, const std::string& where, json& spec)>;

struct SbatchOption {
  std::vector<std::string> names;  // "--time", "-t"
  Arity arity = Arity::kValue;
  SbatchHandler apply;  // null: ignored, with `unsupported` as the warning
  std::string unsupported;
};
struct CorralOption {
  std::string name;  // "--gpus"
  Arity arity = Arity::kValue;
  CorralHandler apply;
};

Status DirectiveError(const std::string& where, const std::string& what) {
  return InvalidArgument("script: " + where + ": " + what);
}

// The error of a parser that already names the directive (it was given `where` as its what).
Status InScript(const Status& named) { return InvalidArgument("script: " + named.message()); }

Result<int64_t> WholeNumber(const std::string& value, const std::string& where, int64_t low = 0) {
  int64_t n = 0;
  auto [end, err] = std::from_chars(value.data(), value.data() + value.size(), n);
  if (err != std::errc() || end != value.data() + value.size() || n < low || n > (1 << 30)) {
    return DirectiveError(where, "expected a whole number of at least " + std::to_string(low) +
                                     ", got '" + value + "'");
  }
  return n;
}

// "N" or "MIN-MAX" (Slurm's node range: an elastic job, docs/elastic.md).
Result<SizeFlag> SlurmNodeCount(const std::string& value, const std::string& where) {
  auto nodes = ParseSizeFlag(value, where);
  if (!nodes.ok()) return InScript(nodes.status());
  if (nodes->min < 1) return DirectiveError(where, "expected at least 1 node, got '" + value + "'");
  return *nodes;
}

// Slurm's memory size: a number with K, M (the default), G or T; in MiB, rounded up.
Result<int64_t> SlurmMebibytes(const std::string& value, const std::string& where) {
  std::string number = value;
  int64_t per_unit_kib = 1024;  // M
  if (!number.empty() && std::isalpha(static_cast<unsigned char>(number.back()))) {
    const char unit = static_cast<char>(std::toupper(static_cast<unsigned char>(number.back())));
    number.pop_back();
    const std::map<char, int64_t> units = {
        {'K', 1}, {'M', 1024}, {'G', 1024 * 1024}, {'T', int64_t{1024} * 1024 * 1024}};
    auto it = units.find(unit);
    if (it == units.end()) {
      return DirectiveError(where,
                            "expected a size like 4000, 500M, 16G or 1T, got '" + value + "'");
    }
    per_unit_kib = it->second;
  }
  auto n = WholeNumber(number, where, 1);
  if (!n.ok())
    return DirectiveError(where, "expected a size like 4000, 500M, 16G or 1T, got '" + value + "'");
  return (*n * per_unit_kib + 1023) / 1024;
}

// "[type:]N" (--gpus, --gpus-per-node, --gpus-per-task).
Result<GpuAsk> ParseGpuAsk(const std::string& value, const std::string& where) {
  GpuAsk ask;
  std::string count = value;
  if (const size_t colon = value.rfind(':'); colon != std::string::npos) {
    ask.type = value.substr(0, colon);
    count = value.substr(colon + 1);
  }
  auto n = WholeNumber(count, where, 0);
  if (!n.ok()) return DirectiveError(where, "expected [TYPE:]COUNT GPUs, got '" + value + "'");
  ask.count = *n;
  return ask;
}

// --gres: comma-separated "NAME[:TYPE][:COUNT]"; only gpu is a resource corral schedules.
Status ParseGres(const std::string& value, const std::string& where, SlurmAsk& ask) {
  for (const std::string& item : Split(value, ',')) {
    std::vector<std::string> parts = Split(item, ':');
    if (parts.empty() || parts[0] != "gpu") {
      return DirectiveError(where,
                            "only gpu resources are scheduled by corral, got '" + item + "'");
    }
    GpuAsk gpus{.type = "", .count = 1};
    if (parts.size() > 3)
      return DirectiveError(where, "expected gpu[:TYPE][:COUNT], got '" + item + "'");
    if (parts.size() >= 2) {
      auto n = WholeNumber(parts.back(), where, 0);
      if (n.ok()) {
        gpus.count = *n;
        parts.pop_back();
      } else if (parts.size() == 3) {
        return DirectiveError(where, "expected gpu[:TYPE][:COUNT], got '" + item + "'");
      }
      if (parts.size() == 2) gpus.type = parts[1];
    }
    ask.gpus_per_node = gpus;
  }
  return Status::Ok();
}

// Slurm's --signal: "[{R|B}:]SIG[@SECONDS]" (B: and R: say which processes; corral signals the
// job's processes).
Status SlurmSignal(const std::string& value, const std::string& where, SlurmAsk& ask) {
  std::string text = value;
  if (text.size() > 2 && (text[0] == 'B' || text[0] == 'R') && text[1] == ':') text.erase(0, 2);
  auto warning = model::ParseWarningSignal(text, where);
  if (!warning.ok()) return InScript(warning.status());
  ask.fields["signal"] = SignalJson(*warning);
  return Status::Ok();
}

SbatchHandler ToField(const std::string& field) {
  return [field](const std::string& value, const std::string&, SlurmAsk& ask) {
    ask.fields[field] = value;
    return Status::Ok();
  };
}

SbatchHandler ToCount(std::optional<int64_t> SlurmAsk::*member, int64_t low) {
  return [member, low](const std::string& value, const std::string& where, SlurmAsk& ask) {
    auto n = WholeNumber(value, where, low);
    if (!n.ok()) return n.status();
    ask.*member = *n;
    return Status::Ok();
  };
}

SbatchHandler ToMemory(std::optional<int64_t> SlurmAsk::*member) {
  return [member](const std::string& value, const std::string& where, SlurmAsk& ask) {
    auto mib = SlurmMebibytes(value, where);
    if (!mib.ok()) return mib.status();
    ask.*member = *mib;
    return Status::Ok();
  };
}

SbatchHandler ToGpus(std::optional<GpuAsk> SlurmAsk::*member) {
  return [member](const std::string& value, const std::string& where, SlurmAsk& ask) {
    auto gpus = ParseGpuAsk(value, where);
    if (!gpus.ok()) return gpus.status();
    ask.*member = *gpus;
    return Status::Ok();
  };
}

SbatchOption IgnoredOption(std::vector<std::string> names, Arity arity, std::string why) {
  return {std::move(names), arity, nullptr, std::move(why)};
}

// The #SBATCH options corral reads, and those it knows and ignores (each with why).
const std::vector<SbatchOption>& SbatchTable() {
  static const std::vector<SbatchOption> kTable = {
      {{"--job-name", "-J"}, Arity::kValue, ToField("name"), ""},
      {{"--account", "-A"}, Arity::kValue, ToField("project"), ""},
      {{"--nodes", "-N"},
       Arity::kValue,
       [](const std::string& value, const std::string& where, SlurmAsk& ask) {
         auto n = SlurmNodeCount(value, where);
         if (!n.ok()) return n.status();
         ask.nodes = *n;
         return Status::Ok();
       },
       ""},
      {{"--ntasks", "-n"}, Arity::kValue, ToCount(&SlurmAsk::ntasks, 1), ""},
      {{"--ntasks-per-node"}, Arity::kValue, ToCount(&SlurmAsk::ntasks_per_node, 1), ""},
      {{"--cpus-per-task", "-c"}, Arity::kValue, ToCount(&SlurmAsk::cpus_per_task, 1), ""},
      {{"--mem"}, Arity::kValue, ToMemory(&SlurmAsk::mem_mib), ""},
      {{"--mem-per-cpu"}, Arity::kValue, ToMemory(&SlurmAsk::mem_per_cpu_mib), ""},
      {{"--mem-per-gpu"}, Arity::kValue, ToMemory(&SlurmAsk::mem_per_gpu_mib), ""},
      {{"--gres"}, Arity::kValue, ParseGres, ""},
      {{"--gpus", "-G"}, Arity::kValue, ToGpus(&SlurmAsk::gpus_total), ""},
      {{"--gpus-per-node"}, Arity::kValue, ToGpus(&SlurmAsk::gpus_per_node), ""},
      {{"--gpus-per-task"}, Arity::kValue, ToGpus(&SlurmAsk::gpus_per_task), ""},
      {{"--time", "-t"},
       Arity::kValue,
       [](const std::string& value, const std::string& where, SlurmAsk& ask) {
         auto seconds = ParseSlurmTime(value, where);
         if (!seconds.ok()) return InScript(seconds.status());
         ask.fields["time_limit_s"] = *seconds;
         return Status::Ok();
       },
       ""},
      {{"--array", "-a"},
       Arity::kValue,
       [](const std::string& value, const std::string& where, SlurmAsk& ask) {
         auto array = ParseArrayFlag(value);
         if (!array.ok()) return DirectiveError(where, array.status().message());
         ask.fields["array"] = *array;
         return Status::Ok();
       },
       ""},
      {{"--output", "-o"}, Arity::kValue, ToField("output_file"), ""},
      {{"--error", "-e"}, Arity::kValue, ToField("error_file"), ""},
      {{"--chdir", "-D"}, Arity::kValue, ToField("workdir"), ""},
      {{"--dependency", "-d"}, Arity::kValue, ToField("dependency"), ""},
      {{"--kill-on-invalid-dep"},
       Arity::kValue,
       [](const std::string& value, const std::string& where, SlurmAsk& ask) {
         if (value != "yes" && value != "no") {
           return DirectiveError(where, "expected yes or no, got '" + value + "'");
         }
         ask.fields["kill_on_invalid_dep"] = value == "yes";
         return Status::Ok();
       },
       ""},
      {{"--signal"}, Arity::kValue, SlurmSignal, ""},
      {{"--partition", "-p"}, Arity::kValue, ToField("partition"), ""},
      {{"--qos", "-q"}, Arity::kValue, ToField("qos"), ""},
      IgnoredOption(
          {"--mail-type", "--mail-user"}, Arity::kValue,
          "corral sends no mail (corral batch --wait, or the dashboard, says when it ends)"),
      IgnoredOption({"--exclusive"}, Arity::kFlag,
                    "corral shares nodes; ask the GPUs, CPUs and memory the job needs"),
      IgnoredOption({"--constraint", "-C", "--nodelist", "-w", "--exclude", "-x"}, Arity::kValue,
                    "corral places by GPU model: --gres=gpu:MODEL:N or a partition"),
      IgnoredOption({"--export"}, Arity::kValue,
                    "a job gets its --env variables and its environment's, not the submitting "
                    "shell's (docs/batch.md)"),
      IgnoredOption({"--requeue", "--no-requeue"}, Arity::kFlag,
                    "use #CORRAL --max-restarts N for requeues after a failure or a lost node"),
      IgnoredOption({"--open-mode"}, Arity::kValue,
                    "output files are truncated when a one-part job starts, appended to otherwise"),
      IgnoredOption({"--wait", "-W"}, Arity::kFlag, "use corral batch --wait"),
      IgnoredOption({"--parsable", "--quiet", "-Q", "--verbose", "-v"}, Arity::kFlag,
                    "corral batch -o json prints the answer as JSON"),
      IgnoredOption({"--hold", "-H"}, Arity::kFlag,
                    "corral holds jobs only for their dependencies (--dependency)"),
  };
  return kTable;
}

const SbatchOption* FindSbatch(const std::string& flag) {
  for (const SbatchOption& o : SbatchTable()) {
    if (std::find(o.names.begin(), o.names.end(), flag) != o.names.end()) return &o;
  }
  return nullptr;
}

CorralHandler SetField(const std::string& field) {
  return [field](const std::string& value, const std::string&, json& spec) {
    spec[field] = value;
    return Status::Ok();
  };
}

// An integer flag into `path` ("tasks", "resources.gpus"); the spec's check bounds it.
CorralHandler SetNumber(const std::string& path) {
  return [path](const std::string& value, const std::string& where, json& spec) {
    int64_t n = 0;
    auto [end, err] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (err != std::errc() || end != value.data() + value.size()) {
      return DirectiveError(where, "expected a whole number, got '" + value + "'");
    }
    const size_t dot = path.find('.');
    if (dot == std::string::npos) {
      spec[path] = n;
    } else {
      spec[path.substr(0, dot)][path.substr(dot + 1)] = n;
    }
    return Status::Ok();
  };
}

// A size flag (--gpus, --nodes: "N" or "MIN-MAX") into `path` ("resources.gpus", "tasks"), or
// for a range into "elastic" of `unit` (keeping a --gpu-step given before it).
CorralHandler SetSize(const std::string& path, model::ElasticUnit unit) {
  return [path, unit](const std::string& value, const std::string& where, json& spec) {
    auto size = ParseSizeFlag(value, where);
    if (!size.ok()) return InScript(size.status());
    if (!size->IsRange()) return SetNumber(path)(value, where, spec);
    const int step = spec.contains("elastic") ? spec["elastic"].value("step", 0) : 0;
    spec["elastic"] = ElasticJson({.unit = unit, .min = size->min, .max = size->max, .step = step});
    return Status::Ok();
  };
}

// --after ID and its kind: appended to the dependency (all of them must be met).
CorralHandler AppendAfter(const std::string& kind) {
  return [kind](const std::string& value, const std::string&, json& spec) {
    const std::string item = kind + ":" + value;
    spec["dependency"] =
        spec.contains("dependency") ? spec["dependency"].get<std::string>() + "," + item : item;
    return Status::Ok();
  };
}

// corral submit's long flags, as #CORRAL lines give them.
const std::vector<CorralOption>& CorralTable() {
  static const std::vector<CorralOption> kTable = {
      {"--name", Arity::kValue, SetField("name")},
      {"--project", Arity::kValue, SetField("project")},
      {"--gpus", Arity::kValue, SetSize("resources.gpus", model::ElasticUnit::kGpus)},
      {"--gpus-per-node", Arity::kValue, SetSize("resources.gpus", model::ElasticUnit::kGpus)},
      {"--gpu-step", Arity::kValue, SetNumber("elastic.step")},
      {"--gpu-milli", Arity::kValue, SetNumber("resources.gpu_milli")},
      {"--gpu-model", Arity::kValue,
       [](const std::string& value, const std::string&, json& spec) {
         spec["resources"]["gpu_models"].push_back(value);
         return Status::Ok();
       }},
      {"--cpus", Arity::kValue, SetNumber("resources.cpus")},
      {"--cpu-milli", Arity::kValue, SetNumber("resources.cpu_milli")},
      {"--memory-mib", Arity::kValue, SetNumber("resources.memory_mib")},
      {"--tasks", Arity::kValue, SetSize("tasks", model::ElasticUnit::kNodes)},
      {"--nodes", Arity::kValue, SetSize("tasks", model::ElasticUnit::kNodes)},
      {"--procs-per-node", Arity::kValue, SetNumber("procs_per_node")},
      {"--launcher", Arity::kValue, SetField("launcher")},
      {"--priority", Arity::kValue, SetNumber("priority")},
      {"--max-restarts", Arity::kValue, SetNumber("max_restarts")},
      {"--time-limit", Arity::kValue,
       [](const std::string& value, const std::string& where, json& spec) {
         auto limit = ParseTimeLimit(value, where);
         if (!limit.ok()) return InScript(limit.status());
         spec["time_limit_s"] = limit->value();
         return Status::Ok();
       }},
      {"--signal", Arity::kValue,
       [](const std::string& value, const std::string& where, json& spec) {
         auto warning = model::ParseWarningSignal(value, where);
         if (!warning.ok()) return InScript(warning.status());
         spec["signal"] = SignalJson(*warning);
         return Status::Ok();
       }},
      {"--workdir", Arity::kValue, SetField("workdir")},
      {"--environment", Arity::kValue, SetField("environment")},
      {"--env", Arity::kValue,
       [](const std::string& value, const std::string& where, json& spec) {
         const size_t eq = value.find('=');
         if (eq == std::string::npos || eq == 0) {
           return DirectiveError(where, "expected NAME=VALUE, got '" + value + "'");
         }
         spec["env"][value.substr(0, eq)] = value.substr(eq + 1);
         return Status::Ok();
       }},
      {"--array", Arity::kValue,
       [](const std::string& value, const std::string& where, json& spec) {
         auto array = ParseArrayFlag(value);
         if (!array.ok()) return DirectiveError(where, array.status().message());
         spec["array"] = *array;
         return Status::Ok();
       }},
      {"--output-file", Arity::kValue, SetField("output_file")},
      {"--error-file", Arity::kValue, SetField("error_file")},
      {"--partition", Arity::kValue, SetField("partition")},
      {"--qos", Arity::kValue, SetField("qos")},
      {"--dependency", Arity::kValue, SetField("dependency")},
      {"--after", Arity::kValue, AppendAfter("after")},
      {"--afterok", Arity::kValue, AppendAfter("afterok")},
      {"--afternotok", Arity::kValue, AppendAfter("afternotok")},
      {"--afterany", Arity::kValue, AppendAfter("afterany")},
      {"--kill-on-invalid-dep", Arity::kFlag,
       [](const std::string&, const std::string&, json& spec) {
         spec["kill_on_invalid_dep"] = true;
         return Status::Ok();
       }},
  };
  return kTable;
}

const CorralOption* FindCorral(const std::string& flag) {
  for (const CorralOption& o : CorralTable()) {
    if (o.name == flag) return &o;
  }
  return nullptr;
}

// The words of a directive's rest, as /bin/sh splits them: blanks separate, '...' is literal,
// "..." takes \" and \\, a backslash outside quotes takes the next character, and a word that
// starts with '#' ends the line (a comment).
Result<std::vector<std::string>> ShellWords(std::string_view text, const std::string& where) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      if (in_word) words.push_back(std::move(word));
      word.clear();
      in_word = false;
      continue;
    }
    if (!in_word && c == '#') break;
    in_word = true;
    if (c == '\\' && i + 1 < text.size()) {
      word += text[++i];
    } else if (c == '\'' || c == '"') {
      const size_t close = text.find(c, i + 1);
      if (close == std::string_view::npos) return DirectiveError(where, "unterminated quote");
      std::string_view inner = text.substr(i + 1, close - i - 1);
      for (size_t k = 0; k < inner.size(); ++k) {
        if (c == '"' && inner[k] == '\\' && k + 1 < inner.size() &&
            (inner[k + 1] == '"' || inner[k + 1] == '\\')) {
          ++k;
        }
        word += inner[k];
      }
      i = close;
    } else {
      word += c;
    }
  }
  if (in_word) words.push_back(std::move(word));
  return words;
}

// Whether `flag` of `kind` takes a value; an option neither table knows takes the next word
// when that does not look like an option.
std::optional<Arity> DirectiveArity(DirectiveKind kind, const std::string& flag) {
  if (kind == DirectiveKind::kSbatch) {
    const SbatchOption* o = FindSbatch(flag);
    return o == nullptr ? std::nullopt : std::optional(o->arity);
  }
  const CorralOption* o = FindCorral(flag);
  return o == nullptr ? std::nullopt : std::optional(o->arity);
}

const char* DirectivePrefix(DirectiveKind kind) {
  return kind == DirectiveKind::kSbatch ? "#SBATCH" : "#CORRAL";
}

// The options of one directive line.
Status ParseDirectiveOptions(const std::vector<std::string>& words, int line, DirectiveKind kind,
                             std::vector<Directive>& out) {
  const std::string where = "line " + std::to_string(line) + ": " + DirectivePrefix(kind);
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& word = words[i];
    if (word.size() < 2 || word[0] != '-') {
      return DirectiveError(where, "'" + word + "' is not an option (options start with -)");
    }
    Directive d{.line = line, .kind = kind, .flag = word, .value = std::nullopt};
    if (word[1] == '-') {
      if (const size_t eq = word.find('='); eq != std::string::npos) {
        d.flag = word.substr(0, eq);
        d.value = word.substr(eq + 1);
      }
    } else if (word.size() > 2) {  // -Jname
      d.flag = word.substr(0, 2);
      d.value = word.substr(word[2] == '=' ? 3 : 2);
    }
    const std::optional<Arity> arity = DirectiveArity(kind, d.flag);
    if (!d.value && arity != Arity::kFlag) {
      const bool next_is_value =
          i + 1 < words.size() && (words[i + 1].empty() || words[i + 1][0] != '-' || arity);
      if (next_is_value) {
        d.value = words[++i];
      } else if (arity) {
        return DirectiveError(where + " " + d.flag, "needs a value");
      }
    }
    if (d.value && arity == Arity::kFlag) {
      return DirectiveError(where + " " + d.flag, "takes no value, got '" + *d.value + "'");
    }
    out.push_back(std::move(d));
    if (out.size() > kMaxDirectives) {
      return DirectiveError(where,
                            "more than " + std::to_string(kMaxDirectives) + " directive options");
    }
  }
  return Status::Ok();
}

// Parts, processes per part, GPUs and memory per part from Slurm's counts (the header).
Status FinishSlurm(const SlurmAsk& ask, json& spec, std::vector<std::string>& warnings) {
  const std::string where = "#SBATCH";
  const bool elastic = ask.nodes && ask.nodes->IsRange();
  // Ranks and GPUs of the whole job do not divide onto a number of nodes that changes.
  if (elastic && ask.ntasks) {
    return DirectiveError(where, "--ntasks with a node range: give --ntasks-per-node");
  }
  if (elastic && ask.gpus_total) {
    return DirectiveError(where, "--gpus with a node range: give --gpus-per-node");
  }
  int64_t parts = ask.nodes ? ask.nodes->min : 1;
  int64_t procs = 1;
  if (ask.ntasks_per_node) {
    procs = *ask.ntasks_per_node;
    if (!ask.nodes && ask.ntasks) {
      if (*ask.ntasks % procs != 0) {
        return DirectiveError(where, "--ntasks " + std::to_string(*ask.ntasks) +
                                         " is not a multiple of --ntasks-per-node " +
                                         std::to_string(procs));
      }
      parts = *ask.ntasks / procs;
    } else if (ask.ntasks && *ask.ntasks != parts * procs) {
      return DirectiveError(where, "--ntasks " + std::to_string(*ask.ntasks) + " is not --nodes " +
                                       std::to_string(parts) + " x --ntasks-per-node " +
                                       std::to_string(procs));
    }
  } else if (ask.ntasks) {
    if (*ask.ntasks % parts != 0) {
      return DirectiveError(where, "--ntasks " + std::to_string(*ask.ntasks) +
                                       " does not divide onto " + std::to_string(parts) +
                                       " nodes: corral's parts are alike (give --ntasks-per-node)");
    }
    procs = *ask.ntasks / parts;
  }
  if (elastic) {
    spec["elastic"] = ElasticJson(
        {.unit = model::ElasticUnit::kNodes, .min = ask.nodes->min, .max = ask.nodes->max});
  } else if (ask.nodes || parts != 1) {
    spec["tasks"] = parts;
  }
  if (ask.ntasks || ask.ntasks_per_node) spec["procs_per_node"] = procs;
  if (ask.cpus_per_task) spec["resources"]["cpus"] = *ask.cpus_per_task;
  std::optional<GpuAsk> gpus;  // per part
  if (ask.gpus_per_node) {
    gpus = ask.gpus_per_node;
  } else if (ask.gpus_per_task) {
    gpus = GpuAsk{ask.gpus_per_task->type, ask.gpus_per_task->count * procs};
  } else if (ask.gpus_total) {
    if (ask.gpus_total->count % parts != 0) {
      return DirectiveError(where, "--gpus " + std::to_string(ask.gpus_total->count) +
                                       " does not divide onto " + std::to_string(parts) +
                                       " nodes (give --gpus-per-node)");
    }
    gpus = GpuAsk{ask.gpus_total->type, ask.gpus_total->count / parts};
  }
  if (gpus) {
    spec["resources"]["gpus"] = gpus->count;
    if (!gpus->type.empty()) spec["resources"]["gpu_models"] = json::array({gpus->type});
  }
  if (ask.mem_mib) {
    if (*ask.mem_mib == 0) {
      warnings.push_back(
          "#SBATCH --mem=0 (all of a node's memory): ignored; the server's "
          "default applies");
    } else {
      spec["resources"]["memory_mib"] = *ask.mem_mib;
    }
  } else if (ask.mem_per_cpu_mib) {
    spec["resources"]["memory_mib"] = *ask.mem_per_cpu_mib * ask.cpus_per_task.value_or(1) * procs;
  } else if (ask.mem_per_gpu_mib && gpus) {
    spec["resources"]["memory_mib"] = *ask.mem_per_gpu_mib * gpus->count;
  } else if (ask.mem_per_gpu_mib) {
    warnings.push_back("#SBATCH --mem-per-gpu: ignored: the job asks no GPU");
  }
  for (const auto& [field, value] : ask.fields.items()) spec[field] = value;
  return Status::Ok();
}

// `over`'s fields over `under`'s; "resources" and "env" key by key. A `cpus` or `cpu_milli`
// above replaces both below (a spec gives one of them).
void OverlaySpec(json& under, const json& over) {
  for (const auto& [field, value] : over.items()) {
    if ((field == "resources" || field == "env") && value.is_object() && under.contains(field) &&
        under[field].is_object()) {
      json& target = under[field];
      if (field == "resources" && (value.contains("cpus") || value.contains("cpu_milli"))) {
        target.erase("cpus");
        target.erase("cpu_milli");
      }
      for (const auto& [key, inner] : value.items()) target[key] = inner;
    } else {
      under[field] = value;
    }
  }
}

// A relative workdir of a directive, from the submit folder (as corral submit does for
// --workdir); left relative (the spec's check refuses it) without one.
void ResolveDirectiveWorkdir(json& spec, const json& request) {
  if (!spec.contains("workdir") || !spec["workdir"].is_string()) return;
  if (!request.contains("submit_dir") || !request["submit_dir"].is_string()) return;
  spec["workdir"] =
      WorkdirFrom(request["submit_dir"].get<std::string>(), spec["workdir"].get<std::string>());
}

}  // namespace

Result<std::vector<Directive>> ParseDirectives(std::string_view script) {
  if (script.size() > kMaxScriptBytes) {
    return InvalidArgument("script: longer than " + std::to_string(kMaxScriptBytes) + " bytes");
  }
  if (script.find('\0') != std::string_view::npos) {
    return InvalidArgument("script: holds a NUL byte (a binary file?)");
  }
  if (script.substr(0, 2) != "#!") {
    return InvalidArgument(
        "script: line 1: must start with #! and its interpreter (#!/bin/bash), as sbatch "
        "requires");
  }
  std::vector<Directive> out;
  int line = 0;
  size_t start = 0;
  while (start < script.size()) {
    size_t end = script.find('\n', start);
    if (end == std::string_view::npos) end = script.size();
    std::string_view text = script.substr(start, end - start);
    start = end + 1;
    if (++line == 1) continue;  // the #! line
    const size_t first = text.find_first_not_of(" \t\r");
    if (first == std::string_view::npos) continue;  // blank
    text.remove_prefix(first);
    if (text[0] != '#') break;  // the first command: directives end (Slurm's rule)
    for (DirectiveKind kind : {DirectiveKind::kSbatch, DirectiveKind::kCorral}) {
      const std::string_view prefix = DirectivePrefix(kind);
      if (text.substr(0, prefix.size()) != prefix) continue;
      const std::string_view rest = text.substr(prefix.size());
      if (!rest.empty() && rest[0] != ' ' && rest[0] != '\t') continue;  // #SBATCHX
      const std::string where = "line " + std::to_string(line) + ": " + std::string(prefix);
      auto words = ShellWords(rest, where);
      if (!words.ok()) return words.status();
      CORRAL_RETURN_IF_ERROR(ParseDirectiveOptions(*words, line, kind, out));
    }
  }
  return out;
}

Result<BatchExpansion> ExpandBatchScript(const json& request) {
  BatchExpansion expansion;
  if (!request.is_object() || !request.contains("script")) {
    expansion.spec = request;
    return expansion;
  }
  const json& script = request["script"];
  if (!script.is_object() || !script.contains("text") || !script["text"].is_string()) {
    return InvalidArgument("field 'script.text': is required: the script, as a string");
  }
  auto directives = ParseDirectives(script["text"].get<std::string>());
  if (!directives.ok()) return directives.status();
  SlurmAsk slurm;
  json corral = json::object();
  for (const Directive& d : *directives) {
    const std::string where =
        "line " + std::to_string(d.line) + ": " + DirectivePrefix(d.kind) + " " + d.flag;
    const std::string value = d.value.value_or("");
    if (d.kind == DirectiveKind::kCorral) {
      const CorralOption* o = FindCorral(d.flag);
      if (o == nullptr) {
        return DirectiveError(where,
                              "unknown option (#CORRAL lines take corral submit's long flags)");
      }
      CORRAL_RETURN_IF_ERROR(o->apply(value, where, corral));
      continue;
    }
    const SbatchOption* o = FindSbatch(d.flag);
    if (o == nullptr) {
      expansion.warnings.push_back(where + ": ignored: not an option corral knows");
    } else if (!o->apply) {
      expansion.warnings.push_back(where + ": ignored: " + o->unsupported);
    } else {
      CORRAL_RETURN_IF_ERROR(o->apply(value, where, slurm));
    }
  }
  json spec = json::object();
  CORRAL_RETURN_IF_ERROR(FinishSlurm(slurm, spec, expansion.warnings));
  OverlaySpec(spec, corral);
  ResolveDirectiveWorkdir(spec, request);
  OverlaySpec(spec, request);
  // Without -J the job is named after its script's file, as sbatch names it.
  if (!spec.contains("name") && script.contains("name") && script["name"].is_string() &&
      IsValidName(NameKind::kJob, script["name"].get<std::string>())) {
    spec["name"] = script["name"];
  }
  expansion.spec = std::move(spec);
  return expansion;
}

Result<int64_t> ParseSlurmTime(std::string_view text, const std::string& what) {
  if (text == "UNLIMITED" || text == "INFINITE" || text == "unlimited" || text == "infinite") {
    return int64_t{0};
  }
  if (!text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos) {
    auto minutes = ParseDuration(std::string(text) + "m", what);
    if (minutes.ok()) return minutes->value();
  } else if (text.find_first_of(":-") != std::string_view::npos) {
    auto clock = ParseTimeLimit(text, what);
    if (clock.ok()) return clock->value();
  }
  return InvalidArgument(what +
                         ": expected minutes, M:S, H:M:S, D-H, D-H:M or D-H:M:S (Slurm's "
                         "forms), got '" +
                         std::string(text) + "'");
}

std::string ExpandOutputPattern(std::string_view pattern, const OutputNames& names) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] != '%' || i + 1 == pattern.size()) {
      out += pattern[i];
      continue;
    }
    const char c = pattern[++i];
    switch (c) {
      case 'j':
        out += std::to_string(names.job_id);
        break;
      case 'A':
        out += std::to_string(names.array_id);
        break;
      case 'a':
        out += names.array_index ? std::to_string(*names.array_index) : "4294967294";
        break;
      case 'x':
        out += names.job_name;
        break;
      case 'u':
        out += names.user;
        break;
      case '%':
        out += '%';
        break;
      default:
        out += '%';
        out += c;
    }
  }
  return out;
}

}  // namespace corral::protocol
