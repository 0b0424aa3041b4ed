// What the submit path's fit check costs (server/control/submit_fit.h, Controller::Admit): per
// submission, the list of the published view's node rows (as Admit builds it) and
// CheckFitsRegisteredNodes over 1 to 10,000 registered nodes of 8 A100s, for a job of 2 GPUs
// (accepted: the common case, which walks every node) and one in an environment with a host
// folder (each node's environment checked too). docs/benchmarks.md, "Submit fit check".
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "protocol/api_node.h"
#include "protocol/environment_spec.h"
#include "server/control/submit_fit.h"

namespace corral::server {
namespace {

std::vector<protocol::NodeView> Nodes(int count) {
  std::vector<protocol::NodeView> nodes(static_cast<size_t>(count));
  for (int i = 0; i < count; ++i) {
    protocol::NodeView& n = nodes[static_cast<size_t>(i)];
    n.name = "gpu-" + std::to_string(i);
    n.gpu_model = "A100-80GB";
    n.gpus = 8;
    n.cpu = CpuMilli(128000);
    n.memory = MemoryMib(1024 * 1024);
    n.runtimes = {"process"};
    n.tools = {"python3"};
    n.env_prefixes = {"/opt/corral/envs/pytorch"};
  }
  return nodes;
}

void Check(benchmark::State& state, const protocol::EnvironmentSpec* environment) {
  const std::vector<protocol::NodeView> rows = Nodes(static_cast<int>(state.range(0)));
  model::TaskResources task;
  task.gpus = GpuCount(2);
  task.gpu_milli = MilliGpu(1000);
  task.cpu = CpuMilli(16000);
  task.memory = MemoryMib(65536);
  for (auto _ : state) {
    std::vector<const protocol::NodeView*> nodes;  // as Admit lists the view's rows
    nodes.reserve(rows.size());
    for (const protocol::NodeView& n : rows) nodes.push_back(&n);
    Status s = CheckFitsRegisteredNodes(task, 1, environment, nodes);
    if (!s.ok()) state.SkipWithError(s.message().c_str());
    benchmark::DoNotOptimize(s);
  }
}

void BM_FitCheck(benchmark::State& state) { Check(state, nullptr); }
BENCHMARK(BM_FitCheck)->Arg(1)->Arg(100)->Arg(1000)->Arg(10000);

void BM_FitCheckWithEnvironment(benchmark::State& state) {
  protocol::EnvironmentSpec env;
  env.name = "pytorch";
  env.venv = "/opt/corral/envs/pytorch";
  Check(state, &env);
}
BENCHMARK(BM_FitCheckWithEnvironment)->Arg(1)->Arg(100)->Arg(1000)->Arg(10000);

}  // namespace
}  // namespace corral::server

BENCHMARK_MAIN();
