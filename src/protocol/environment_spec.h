// Environment assets (docs/environments.md): what a job runs in, as data, with the one codec of
// the spec that the server stores and shows and the CLI reads. A spec
//
//   {"name": "pytorch", "description": "PyTorch 2.3 with CUDA 12.4",
//    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
//    "host": {"venv": "/opt/corral/envs/pytorch"},      // or {"conda": "/abs/prefix"}, or
//                                                       // {"tools": ["python3"], "install": ".."}
//    "command": ["python3"], "ports": [6006], "gpus": {"min": 1, "cuda": "12.4"},
//    "env": {"NCCL_DEBUG": "WARN"}}
//
// names a container image and/or a host setup; with neither it is the plain host. It runs on the
// "container" runtime when it has an image, on the "process" runtime when it has a host setup or
// neither. Unknown fields are errors; every error names the field.
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace corral::protocol {

struct EnvironmentSpec {
  std::string name;  // an environment name (names.h)
  std::string description;
  std::string image;  // a container image reference; empty: none
  std::string venv;   // absolute path of a Python venv on the node; empty: none
  std::string conda;  // absolute path of a conda prefix on the node; empty: none (not with venv)
  // host.tools: on the plain host (no venv or conda), the known tools (model::kHostTools) of
  // which a node needs at least one on its agent's PATH; host.install says how to get them
  // ("install jupyter-notebook (Debian) or jupyterlab"), at most 256 bytes.
  std::vector<std::string> tools;
  std::string install;
  std::vector<std::string> command;  // the default argv of jobs that give none; may be empty
  std::vector<int> ports;            // ports its programs serve on, 1..65535, unique
  int min_gpus = 0;                  // gpus.min
  std::string cuda;                  // gpus.cuda: the CUDA version it needs ("12.4"); may be empty
  std::map<std::string, std::string> env;  // variables; a job's own override them

  bool HasHost() const { return !venv.empty() || !conda.empty() || !tools.empty(); }
  // The runtimes that can run it: "container" with an image, "process" with a host setup or
  // with neither.
  std::vector<std::string> Runtimes() const;
  // The runtime a launch uses: "process" when it can run there (the plain host is always at
  // hand), else "container".
  std::string PreferredRuntime() const;
  bool operator==(const EnvironmentSpec&) const = default;
};

// Refuses, in the variables `env` (reported as `field`), values a container cannot get: engines
// read variables from an env file, one per line, so a value may not hold a line break.
Status CheckContainerEnv(const std::map<std::string, std::string>& env, const std::string& field);

// Parses and validates a spec: "field 'host.venv': must be an absolute path".
Result<EnvironmentSpec> ParseEnvironmentSpec(const nlohmann::json& json);
// The spec in its normalised JSON form (absent optional fields left out): what the store keeps
// and the API shows; ParseEnvironmentSpec(ToJson(s)) == s.
nlohmann::json ToJson(const EnvironmentSpec& spec);

}  // namespace corral::protocol
