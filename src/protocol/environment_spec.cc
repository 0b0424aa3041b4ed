#include "protocol/environment_spec.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <limits>
#include <set>

#include "model/launcher.h"
#include "model/node.h"
#include "protocol/environment_ref.h"
#include "protocol/spec_fields.h"

namespace corral::protocol {

namespace {

constexpr size_t kMaxPorts = 64;

constexpr size_t kMaxPathLength = 4096;
constexpr size_t kMaxInstallHint = 256;

// A host prefix goes first on PATH and into VIRTUAL_ENV/CONDA_PREFIX: an absolute, normalised
// path (no '.' or '..' components) without ':' (PATH's separator) or control characters.
Result<std::string> GetHostPrefix(const nlohmann::json& j, const std::string& field) {
  auto v = GetString(j, field);
  if (!v.ok()) return v.status();
  const std::string& path = *v;
  if (path.empty() || path[0] != '/' || path.size() > kMaxPathLength) {
    return FieldError(
        field, "must be an absolute path of at most " + std::to_string(kMaxPathLength) + " bytes");
  }
  if (std::any_of(path.begin(), path.end(),
                  [](char c) { return c == ':' || static_cast<unsigned char>(c) < 0x20; })) {
    return FieldError(field, "must not contain ':' or control characters");
  }
  for (const auto& part : std::filesystem::path(path)) {
    if (part == "." || part == "..") {
      return FieldError(field, "must not contain '.' or '..' components, got '" + path + "'");
    }
  }
  return v;
}

// "host.tools": known tools (model::kHostTools), unique.
Status ParseHostTools(const nlohmann::json& t, EnvironmentSpec& spec) {
  if (!t.is_array() || t.empty() || t.size() > std::size(model::kHostTools)) {
    return FieldError("host.tools", "must be a list of 1.." +
                                        std::to_string(std::size(model::kHostTools)) + " tools");
  }
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string field = "host.tools[" + std::to_string(i) + "]";
    auto v = GetString(t[i], field);
    if (!v.ok()) return v.status();
    if (std::find(std::begin(model::kHostTools), std::end(model::kHostTools), *v) ==
        std::end(model::kHostTools)) {
      std::string known;
      for (const char* k : model::kHostTools) known += (known.empty() ? "" : ", ") + std::string(k);
      return FieldError(field, "'" + *v + "' is not a tool agents look for (" + known + ")");
    }
    if (std::find(spec.tools.begin(), spec.tools.end(), *v) != spec.tools.end()) {
      return FieldError(field, "'" + *v + "' is listed twice");
    }
    spec.tools.push_back(*v);
  }
  return Status::Ok();
}

Status ParseHost(const nlohmann::json& h, EnvironmentSpec& spec) {
  if (!h.is_object()) return FieldError("host", "must be an object");
  CORRAL_RETURN_IF_ERROR(CheckKeys(h, {"venv", "conda", "tools", "install"}, "host."));
  if (h.contains("venv") && h.contains("conda")) {
    return FieldError("host", "must have one of 'venv' and 'conda', not both");
  }
  if (h.contains("venv")) {
    auto v = GetHostPrefix(h["venv"], "host.venv");
    if (!v.ok()) return v.status();
    spec.venv = *v;
  } else if (h.contains("conda")) {
    auto v = GetHostPrefix(h["conda"], "host.conda");
    if (!v.ok()) return v.status();
    spec.conda = *v;
  } else if (!h.contains("tools")) {
    return FieldError("host", "must have 'venv', 'conda' or 'tools'");
  }
  if (h.contains("tools")) {
    if (!spec.venv.empty() || !spec.conda.empty()) {
      return FieldError("host.tools",
                        "is for the plain host: a venv or conda prefix is checked as a folder");
    }
    CORRAL_RETURN_IF_ERROR(ParseHostTools(h["tools"], spec));
  }
  if (h.contains("install")) {
    if (spec.tools.empty()) {
      return FieldError("host.install", "says how to get 'host.tools': give them");
    }
    auto v = GetString(h["install"], "host.install");
    if (!v.ok()) return v.status();
    if (v->size() > kMaxInstallHint || std::any_of(v->begin(), v->end(), [](char c) {
          return static_cast<unsigned char>(c) < 0x20;
        })) {
      return FieldError("host.install", "must be at most " + std::to_string(kMaxInstallHint) +
                                            " bytes without control characters");
    }
    spec.install = *v;
  }
  return Status::Ok();
}

Status ParseGpus(const nlohmann::json& g, EnvironmentSpec& spec) {
  if (!g.is_object()) return FieldError("gpus", "must be an object");
  CORRAL_RETURN_IF_ERROR(CheckKeys(g, {"min", "cuda"}, "gpus."));
  if (g.contains("min")) {
    auto v = GetInt(g["min"], "gpus.min", 0, 1024);
    if (!v.ok()) return v.status();
    spec.min_gpus = static_cast<int>(*v);
  }
  if (g.contains("cuda")) {
    auto v = GetString(g["cuda"], "gpus.cuda");
    if (!v.ok()) return v.status();
    if (v->empty() || v->find_first_not_of("0123456789.") != std::string::npos) {
      return FieldError("gpus.cuda", "must be a version such as \"12.4\", got '" + *v + "'");
    }
    spec.cuda = *v;
  }
  return Status::Ok();
}

}  // namespace

Status CheckContainerEnv(const std::map<std::string, std::string>& env, const std::string& field) {
  for (const auto& [name, value] : env) {
    if (value.find_first_of("\r\n") != std::string::npos) {
      return FieldError(field + "." + name,
                        "may not contain a line break in a job that may run in a container (its "
                        "variables go through an env file; docs/container-runtime.md)");
    }
  }
  return Status::Ok();
}

std::vector<std::string> EnvironmentSpec::Runtimes() const {
  std::vector<std::string> runtimes;
  if (!image.empty()) runtimes.push_back(model::kContainerRuntime);
  if (HasHost() || image.empty()) runtimes.push_back(model::kProcessRuntime);
  return runtimes;
}

std::string EnvironmentSpec::PreferredRuntime() const {
  return HasHost() || image.empty() ? model::kProcessRuntime : model::kContainerRuntime;
}

Result<EnvironmentSpec> ParseEnvironmentSpec(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("environment spec: must be an object");
  CORRAL_RETURN_IF_ERROR(CheckKeys(
      j, {"name", "description", "image", "host", "command", "ports", "gpus", "env"}, ""));
  EnvironmentSpec spec;
  if (!j.contains("name")) return FieldError("name", "is required");
  auto name = GetName(j["name"], "name", NameKind::kEnvironment);
  if (!name.ok()) return name.status();
  spec.name = *name;
  if (j.contains("description")) {
    auto v = GetString(j["description"], "description");
    if (!v.ok()) return v.status();
    spec.description = *v;
  }
  if (j.contains("image")) {
    auto v = GetString(j["image"], "image");
    if (!v.ok()) return v.status();
    if (!IsImageReference(*v)) {
      return FieldError("image",
                        "must be a container image reference (letters, digits and "
                        "'._-/:@', starting with a letter or digit, at most " +
                            std::to_string(kMaxImageReferenceLength) + " bytes), got '" + *v + "'");
    }
    spec.image = *v;
  }
  if (j.contains("host")) CORRAL_RETURN_IF_ERROR(ParseHost(j["host"], spec));
  if (j.contains("command")) {
    auto argv = GetArgv(j["command"], "command", kMaxSpecArgv);
    if (!argv.ok()) return argv.status();
    spec.command = std::move(argv).value();
  }
  if (j.contains("ports")) {
    if (!j["ports"].is_array() || j["ports"].size() > kMaxPorts) {
      return FieldError("ports",
                        "must be a list of at most " + std::to_string(kMaxPorts) + " port numbers");
    }
    std::set<int> seen;
    for (size_t i = 0; i < j["ports"].size(); ++i) {
      const std::string field = "ports[" + std::to_string(i) + "]";
      auto v = GetInt(j["ports"][i], field, 1, 65535);
      if (!v.ok()) return v.status();
      if (!seen.insert(static_cast<int>(*v)).second) {
        return FieldError(field, std::to_string(*v) + " is repeated");
      }
      spec.ports.push_back(static_cast<int>(*v));
    }
  }
  if (j.contains("gpus")) CORRAL_RETURN_IF_ERROR(ParseGpus(j["gpus"], spec));
  if (j.contains("env")) {
    CORRAL_RETURN_IF_ERROR(ParseEnv(j["env"], "env", spec.env));
    for (const auto& [name, value] : spec.env) {
      if (model::IsTaskEnvName(name)) {
        return FieldError("env." + name, "is set by corral in every task");
      }
    }
  }
  if (!spec.image.empty()) {
    CORRAL_RETURN_IF_ERROR(CheckContainerEnv(spec.env, "env"));
  }
  return spec;
}

nlohmann::json ToJson(const EnvironmentSpec& s) {
  nlohmann::json j = {{"name", s.name}};
  if (!s.description.empty()) j["description"] = s.description;
  if (!s.image.empty()) j["image"] = s.image;
  if (!s.venv.empty()) j["host"] = {{"venv", s.venv}};
  if (!s.conda.empty()) j["host"] = {{"conda", s.conda}};
  if (!s.tools.empty()) j["host"] = {{"tools", s.tools}};
  if (!s.install.empty()) j["host"]["install"] = s.install;
  if (!s.command.empty()) j["command"] = s.command;
  if (!s.ports.empty()) j["ports"] = s.ports;
  if (s.min_gpus > 0 || !s.cuda.empty()) {
    nlohmann::json gpus = nlohmann::json::object();
    if (s.min_gpus > 0) gpus["min"] = s.min_gpus;
    if (!s.cuda.empty()) gpus["cuda"] = s.cuda;
    j["gpus"] = gpus;
  }
  if (!s.env.empty()) j["env"] = s.env;
  return j;
}

}  // namespace corral::protocol
