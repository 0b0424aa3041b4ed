// The container engine of a node (podman or docker, through its CLI) and how a task becomes one
// `ENGINE run` command line. ProcessRuntime (process_runtime.h) runs that command under the task
// supervisor (shim.h) exactly as it runs a process, so that exit codes, logs, time limits, kills
// and adoption after an agent restart work the same for containers. docs/container-runtime.md.
//
//   FindContainerEngine()  the `--container-engine auto|none|PATH` choice: runs `CLI --version`
//                          once (no shell), and records the kind and version;
//   PlanContainerRun()     a launch -> the engine's argv and the content of its env file: a pure
//                          function, no shell anywhere (every value is its own argv element; the
//                          task's variables go through a private env file, never argv);
//   RemoveContainer()      `ENGINE rm -f NAME`: nothing of a task survives its end.
//
// Not supported: rootless engines (the engine runs as the agent's user, root; the container's
// processes run as the task user through --user, without capabilities and with
// no-new-privileges), pulling images (the engine's business: the image must be present or
// pullable by the engine).
#pragma once

#include <sys/types.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/task_setup.h"
#include "common/status.h"
#include "common/units.h"

namespace corral::agent {

enum class EngineKind { kPodman, kDocker };

// "podman", "docker".
const char* EngineKindName(EngineKind kind);

// How a task's GPUs reach its container.
enum class GpuPassing {
  kCdi,       // `--device <cdi kind>=<index>` per GPU (Container Device Interface specs in
              // /etc/cdi or /var/run/cdi, e.g. from `nvidia-ctk cdi generate`); podman's default
  kGpusFlag,  // `--gpus "device=1,3"` (docker with the NVIDIA container toolkit); docker's default
};

// "cdi", "gpus-flag".
const char* GpuPassingName(GpuPassing passing);
// The agent flag --container-gpus: "cdi" | "gpus-flag"; InvalidArgument naming the flag.
Result<GpuPassing> ParseGpuPassing(const std::string& text);

// The CDI device kind of the node's GPUs (agent flag --cdi-kind).
inline constexpr char kDefaultCdiKind[] = "nvidia.com/gpu";
// A CDI kind is VENDOR/CLASS: VENDOR of letters, digits, '.', '-' and CLASS of letters, digits,
// '-', '_', each starting with a letter or digit. InvalidArgument naming --cdi-kind.
Status ValidateCdiKind(const std::string& kind);

// A host directory or file that an admin makes visible in every container (agent flag
// --container-mount SRC:DST[:ro], repeatable), e.g. a dataset share.
struct DataMount {
  std::string source;  // absolute host path; existed when the flag was parsed
  std::string target;  // absolute path in the container
  bool read_only = false;
  bool operator==(const DataMount&) const = default;
};

// Parses "SRC:DST" or "SRC:DST:ro". Both paths absolute, without '..' components, ',' or ':'
// (the engine's -v syntax cannot carry them); DST not "/"; SRC must exist. Errors name the flag
// and the item: "--container-mount '/data:x': DST must be an absolute path".
Result<DataMount> ParseDataMount(const std::string& spec);

// The engine's CLI as found on the node.
struct EngineCli {
  EngineKind kind = EngineKind::kPodman;
  std::string path;     // absolute path of the CLI, exec'd directly
  std::string version;  // "4.3.1"
};

// "podman 4.3.1": what the agent reports as its inventory's `container_engine`.
std::string Describe(const EngineCli& cli);

// Reads `CLI --version` output: "podman version 4.3.1" -> podman 4.3.1; "Docker version 28.2.2,
// build e6534b4" -> docker 28.2.2 (the kind is the output's, not the file name's: podman-docker
// installs a `docker` that is podman). InvalidArgument for anything else.
Result<EngineCli> ParseVersionOutput(const std::string& path, const std::string& output);

// The agent's container settings (agent flags) with the engine they apply to.
struct ContainerEngine {
  EngineCli cli;
  GpuPassing gpu_passing = GpuPassing::kCdi;
  std::string cdi_kind = kDefaultCdiKind;
  std::vector<DataMount> mounts;
  // The whole environment of every engine process ("NAME=value"): EngineEnvironment() of the
  // agent's. Never the task's variables: a job's LD_PRELOAD must not reach a root process.
  std::vector<std::string> env;
};

// What the admin asked for; FindContainerEngine() completes it into a ContainerEngine.
struct ContainerSettings {
  std::string choice = "auto";            // --container-engine: "auto" | "none" | a path
  std::optional<GpuPassing> gpu_passing;  // nullopt: podman kCdi, docker kGpusFlag
  std::string cdi_kind = kDefaultCdiKind;
  std::vector<DataMount> mounts;
};

// The variables an engine process gets from the agent's environment `agent_env`: PATH (a
// default when unset) and, when set, HOME, TMPDIR, XDG_RUNTIME_DIR, XDG_CONFIG_HOME and the
// engines' own (CONTAINERS_CONF, CONTAINERS_STORAGE_CONF, CONTAINERS_REGISTRIES_CONF,
// CONTAINER_HOST, CONTAINER_CONNECTION, CONTAINER_SSHKEY, REGISTRY_AUTH_FILE, DOCKER_HOST,
// DOCKER_CONFIG, DOCKER_CONTEXT, DOCKER_CERT_PATH, DOCKER_TLS_VERIFY); "NAME=value", sorted.
std::vector<std::string> EngineEnvironment(const std::map<std::string, std::string>& agent_env);

// The outcome of FindContainerEngine(): an engine, or why there is none.
struct EngineSearch {
  std::optional<ContainerEngine> engine;
  std::string why_none;  // when !engine: "--container-engine none", "no podman or docker in PATH"
};

// Finds the engine of `settings.choice` with this process's environment (EngineEnvironment()):
// "none" -> no engine; "auto" -> `podman`, else `docker`, searched in PATH, the first whose
// `--version` answers (one that does not is named in why_none); a path -> that CLI, which must
// answer. Runs each candidate's `--version` (10 s at most). Errors (InvalidArgument naming the
// flag): a path that is not absolute, not executable or does not answer as podman or docker, a
// --cdi-kind that ValidateCdiKind() refuses.
Result<EngineSearch> FindContainerEngine(const ContainerSettings& settings);

// The user the container's processes run as (--user UID:GID, --group-add per extra group).
struct ContainerUser {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups; the primary one may be among them
};

// "corral-<scope>-<alloc>-<gen>": the container of a task run, where the scope is the agent's
// namespace ("<cluster id>-<node name>", process_runtime.h), so that agents of several
// clusters, or several agents of one, on a host never name (or remove) each other's
// containers. An empty scope gives "corral-<alloc>-<gen>", the name before cluster ids.
std::string ContainerName(const std::string& scope, const TaskKey& key);

// The engine command of one container task and the env file it reads.
struct ContainerRun {
  std::vector<std::string> argv;  // argv[0] is the engine CLI's path
  std::string env_file;           // content for the file at `env_file_path`: "NAME=value\n" lines
};

// Plans the container of `launch` (a launch that Validate() accepts, with its workdir set, and
// whose environment's runtime is "container"):
//   ENGINE run --rm --init --name NAME --log-driver=none --network=host
//     --security-opt=no-new-privileges --cap-drop=all
//     --user UID:GID [--group-add GID]... -w WORKDIR -v WORKDIR_SOURCE:WORKDIR
//     [-v HOSTFILE:HOSTFILE:ro] [-v STOP_DIR:STOP_DIR:ro] [-v CHECKPOINT_DIR:CHECKPOINT_DIR]
//     [-v SRC:DST[:ro]]... [--memory=Nm --memory-swap=Nm]
//     [--cpus=X] [--device KIND=INDEX... | --gpus "device=I,J"] --env-file ENV_FILE_PATH
//     -- IMAGE ARGV...
// where ARGV is the launch's argv (under /bin/sh -c with `shell`, and as LaunchArgv() makes it
// for a distributed launch); stdout and stderr stay attached to the engine process. The
// container's processes get no capabilities and cannot gain privileges (setuid binaries of the
// image do not make them root), whatever user they run as. The env
// file holds ContainerEnvironment(). Errors name the task and the field: an image that is
// missing or not an image reference, a workdir or hostfile path with ':' or ',' (or the target
// of a data mount), a variable whose value has a line break or is too long for the engine's env
// file reader (64 KiB lines), a distributed launch that needs `corral launch` (launchers none,
// deepspeed, tf and jax with procs_per_node > 1, mpi parts other than 0): not in containers yet.
// `name` is the container's (ContainerName()); `workdir_source` is the host directory mounted
// at the workdir: the workdir itself when empty, else the agent's staging mount of it
// (workdir_mount.h). `channel` is the task's in-job channel (TaskChannel): the folder of its stop
// file is mounted read-only, and the launch's checkpoint folder read-write, each at its host path.
Result<ContainerRun> PlanContainerRun(const ContainerEngine& engine, const TaskLaunch& launch,
                                      const std::string& name, const ContainerUser& user,
                                      const std::string& node_name, const std::string& hostfile,
                                      const std::string& env_file_path,
                                      const std::string& workdir_source = "",
                                      const TaskChannel& channel = {});

// The variables of a container task, "NAME=value" sorted: TaskEnvironment() without anything of
// the agent's (no PATH, HOME or LANG: the image's own apply) and without the environment's venv
// or conda (a host setup means nothing in an image), then with the GPU variables of the
// container: CUDA_VISIBLE_DEVICES "0,1,..,n-1" (the container's ordinals: the engine exposes
// only the task's GPUs; "" for CPU-only tasks), NVIDIA_VISIBLE_DEVICES the node indices ("void"
// for CPU-only tasks: the NVIDIA toolkit's hooks read it as host devices), and
// CORRAL_GPU_INDICES the node indices ("" for CPU-only tasks).
std::vector<std::string> ContainerEnvironment(const TaskLaunch& launch,
                                              const std::string& node_name,
                                              const std::string& hostfile,
                                              const TaskChannel& channel = {});

// Removes the container `name` whatever its state (`ENGINE rm -f [--time 0] NAME`; podman's
// --time 0 kills at once). OK when it is gone, also when there was none; IoError with the
// engine's output otherwise, also when the engine has not finished within 10 s (it is killed
// then; the caller runs on the reconcile loop's thread and retries later).
Status RemoveContainer(const ContainerEngine& engine, const std::string& name);

// What an engine command printed (stdout and stderr together) and its exit code.
struct EngineOutput {
  int exit_code = -1;  // -1: killed by a signal (or at the timeout)
  std::string output;  // at most 64 KiB
};

// Runs `argv` (argv[0] an absolute path) with exactly `env`, stdin /dev/null, no shell, and waits
// at most `timeout`, then kills it. IoError when it cannot be started.
Result<EngineOutput> RunEngineCommand(const std::vector<std::string>& argv,
                                      const std::vector<std::string>& env, Seconds timeout);

}  // namespace corral::agent
