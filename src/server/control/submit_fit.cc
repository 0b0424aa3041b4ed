#include "server/control/submit_fit.h"

#include <algorithm>
#include <limits>
#include <string>

#include "common/strings.h"
#include "server/control/environment_runnable.h"

namespace corral::server {

namespace {

constexpr int64_t kUnbounded = std::numeric_limits<int64_t>::max();

// `have / need`, kUnbounded when nothing is needed.
int64_t Copies(int64_t have, int64_t need) { return need > 0 ? have / need : kUnbounded; }

bool AcceptsModel(const model::TaskResources& task, const protocol::NodeView& node) {
  return task.gpu_models.empty() || std::find(task.gpu_models.begin(), task.gpu_models.end(),
                                              node.gpu_model) != task.gpu_models.end();
}

std::string Refused(const std::string& field, const std::string& why) {
  return "field '" + field + "': " + why + "; no registered node could ever run it";
}

// "the largest node has 8 (n1)": the node with the most of `amount`, among `nodes`.
template <typename Amount>
std::string Largest(const std::vector<const protocol::NodeView*>& nodes, Amount amount) {
  const protocol::NodeView* best = nodes.front();
  for (const protocol::NodeView* n : nodes) {
    if (amount(*n) > amount(*best)) best = n;
  }
  return "the largest node has " + std::to_string(amount(*best)) + " (" + best->name + ")";
}

}  // namespace

int64_t TasksThatFitIdle(const model::TaskResources& task, const protocol::NodeView& node) {
  if (task.gpus.value() > 0 && !AcceptsModel(task, node)) return 0;
  int64_t gpus = Copies(node.gpus, task.gpus.value());
  if (task.IsShare()) gpus = node.gpus * Copies(kWholeGpu.value(), task.gpu_milli.value());
  return std::min({gpus, Copies(node.cpu.value(), task.cpu.value()),
                   Copies(node.memory.value(), task.memory.value())});
}

Status CheckFitsRegisteredNodes(const model::TaskResources& task, int tasks,
                                const protocol::EnvironmentSpec* environment,
                                const std::vector<const protocol::NodeView*>& all) {
  if (all.empty()) return Status::Ok();
  std::vector<const protocol::NodeView*> nodes;  // those that can run its environment
  const std::vector<std::string> needs =
      environment == nullptr ? std::vector<std::string>() : EnvironmentNeeds(*environment);
  for (const protocol::NodeView* n : all) {
    if (OffersOneOf(needs, *n)) nodes.push_back(n);
  }
  if (nodes.empty()) return InvalidArgument(Refused("environment", WhyNotRunnable(*environment)));
  int64_t room = 0, holding = 0;  // copies the idle cluster holds, on how many nodes
  for (const protocol::NodeView* n : nodes) {
    const int64_t fit = TasksThatFitIdle(task, *n);
    if (fit > 0) ++holding;
    room += std::min<int64_t>(fit, tasks);
  }
  if (room >= tasks) return Status::Ok();
  if (holding > 0) {
    return InvalidArgument(Refused("tasks", "needs " + std::to_string(tasks) +
                                                " tasks started together; the registered "
                                                "nodes hold " +
                                                std::to_string(room) + " of them at most (on " +
                                                std::to_string(holding) +
                                                (holding == 1 ? " node" : " nodes") + ")"));
  }
  // Not even one task fits: name the first resource no node has enough of.
  std::vector<const protocol::NodeView*> models;  // the nodes of an accepted model
  for (const protocol::NodeView* n : nodes) {
    if (task.gpus.value() == 0 || AcceptsModel(task, *n)) models.push_back(n);
  }
  if (models.empty()) return Status::Ok();  // a model to come: it waits (unknown_gpu_model)
  const int64_t gpus = task.IsShare() ? 1 : task.gpus.value();
  if (std::none_of(models.begin(), models.end(),
                   [&](const protocol::NodeView* n) { return n->gpus >= gpus; })) {
    return InvalidArgument(
        Refused("resources.gpus", "needs " + std::to_string(gpus) + " GPUs on one node; " +
                                      Largest(models, [](const auto& n) { return n.gpus; })));
  }
  if (std::none_of(models.begin(), models.end(),
                   [&](const protocol::NodeView* n) { return n->cpu >= task.cpu; })) {
    return InvalidArgument(Refused(
        "resources.cpu_milli", "needs " + std::to_string(task.cpu.value()) +
                                   " CPU milli on one node; " +
                                   Largest(models, [](const auto& n) { return n.cpu.value(); })));
  }
  if (std::none_of(models.begin(), models.end(),
                   [&](const protocol::NodeView* n) { return n->memory >= task.memory; })) {
    return InvalidArgument(
        Refused("resources.memory_mib",
                "needs " + std::to_string(task.memory.value()) + " MiB on one node; " +
                    Largest(models, [](const auto& n) { return n.memory.value(); })));
  }
  return InvalidArgument(Refused(
      "resources", "needs " + std::to_string(gpus) + " GPUs, " + std::to_string(task.cpu.value()) +
                       " CPU milli and " + std::to_string(task.memory.value()) +
                       " MiB on one node; no node has all of them together"));
}

}  // namespace corral::server
