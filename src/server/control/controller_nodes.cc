// Controller, nodes and agents (docs/control-plane.md): registration, launch and stop orders
// (the heartbeat path itself is controller_reports.cc), node checks and node loss, cordon and
// drain, and the node and cluster-summary views.

#include <algorithm>

#include "model/allocation.h"
#include "model/node.h"
#include "model/session.h"
#include "protocol/batch_script.h"
#include "server/control/controller.h"
#include "server/control/controller_internal.h"
#include "server/control/environment_runnable.h"
#include "server/http/job_token.h"

namespace corral::server {

using namespace controller_internal;  // NOLINT(google-build-using-namespace)

namespace {

// The launch's "environment" (docs/environments.md): what the agent's runtime sets up, on a
// node whose agent reported `inventory` (none: as the spec prefers).
protocol::LaunchEnvironment LaunchEnvironmentOf(const EnvironmentVersion& env,
                                                const protocol::NodeInventory* inventory) {
  const std::string runtime =
      inventory == nullptr
          ? env.spec.PreferredRuntime()
          : LaunchRuntime(env.spec, NodeOffers(inventory->runtimes, inventory->tools,
                                               inventory->env_prefixes));
  return {env.record.name, env.record.version, runtime,
          env.spec.image,  env.spec.venv,      env.spec.conda};
}

// The scheduler's node from an agent inventory (see docs/control-plane.md); the codec checked
// the inventory's fields, model::Validate checks the node.
Result<model::Node> NodeFromInventory(const std::string& name, const protocol::NodeInventory& inv) {
  model::Node node;
  node.name = name;
  node.cpu = inv.cpu;
  node.memory = inv.memory;
  node.gpu_model = inv.gpu_model;
  for (size_t i = 0; i < inv.gpus.size(); ++i) {
    model::Gpu gpu;
    gpu.index = static_cast<int>(i);
    gpu.uuid = inv.gpus[i].uuid;
    gpu.memory = inv.gpus[i].memory;
    gpu.nvlink_domain = inv.gpus[i].nvlink_domain;
    node.gpus.push_back(gpu);
  }
  node.labels = inv.labels;
  std::vector<std::string> runtimes;
  for (const std::string& runtime : inv.runtimes) {
    // A newer agent may offer runtimes this server does not know: they place nothing.
    if (runtime == model::kProcessRuntime || runtime == model::kContainerRuntime) {
      runtimes.push_back(runtime);
    }
  }
  // Its tools and folders too, which environments may need (environment_runnable.h).
  node.runtimes = NodeOffers(runtimes, inv.tools, inv.env_prefixes);
  if (Status valid = model::Validate(node); !valid.ok()) {
    return InvalidArgument("inventory of node '" + name + "': " + valid.message());
  }
  return node;
}

}  // namespace

// --- Nodes and agents ------------------------------------------------------------------------

namespace {

// True when two node inventories differ at most in the CPU and memory offered.
bool OnlyResourcesDiffer(protocol::NodeInventory a, protocol::NodeInventory b) {
  a.cpu = b.cpu;
  a.memory = b.memory;
  return a == b;
}

}  // namespace

Status Controller::AddNodeToSchedulerLocked(const std::string& name,
                                            const protocol::NodeInventory& inventory) {
  auto node = NodeFromInventory(name, inventory);
  if (!node.ok()) return node.status();
  auto added = scheduler_->AddNode(*node);
  return added.ok() ? Status::Ok() : added.status();
}

store::NodeRecord Controller::NodeRecordOf(const std::string& name, const LiveNode& node) {
  return {name,
          protocol::ToJson(node.inventory).dump(),
          node.state,
          node.last_heartbeat,
          node.node_id_hash,
          node.token_hash};
}

Result<protocol::RegisterAnswer> Controller::RegisterNode(
    const protocol::RegisterRequest& request) {
  const std::string& name = request.name;
  const protocol::NodeInventory& inventory = request.inventory;
  CORRAL_RETURN_IF_ERROR(NodeFromInventory(name, inventory).status());
  auto token = GenerateToken();
  if (!token.ok()) return token.status();
  const std::string id_hash = HashToken(request.node_id);
  auto lock = LockState();
  SettleWritesLocked();  // a replaced node's jobs are changed directly
  auto it = nodes_.find(name);
  bool live = it != nodes_.end() && it->second.state != NodeState::kLost;
  if (live && !it->second.node_id_hash.empty() && !SecureEquals(it->second.node_id_hash, id_hash)) {
    return AlreadyExists("node name '" + name +
                         "' is held by another agent (a different node id); stop that agent and "
                         "remove the node (corral node remove " +
                         name + "), or wait until its node is lost (" +
                         std::to_string(config_.node_give_up.value()) + " s without heartbeat)");
  }
  if (live && it->second.inventory != inventory &&
      OnlyResourcesDiffer(it->second.inventory, inventory)) {
    // Another --cpus or --memory-mib (or an upgrade that declares more CPU for fake GPUs): the
    // node keeps its tasks when they still fit.
    Result<model::Node> resized = NodeFromInventory(name, inventory);
    if (resized.ok() && scheduler_->ResizeNode(name, resized->cpu, resized->memory).ok()) {
      it->second.inventory = inventory;
    }
  }
  if (live && it->second.inventory != inventory) {
    LoseNodeLocked(name, it->second, "node " + name + " re-registered with another inventory");
    // (LoseNodeLocked forgets its GPU readings: the new inventory may have fewer GPUs.)
    live = false;
  }
  if (!live) CORRAL_RETURN_IF_ERROR(AddNodeToSchedulerLocked(name, inventory));
  LiveNode& node = nodes_[name];
  if (!live) {
    // A cordoned or drained node stays so across an inventory change.
    if (node.state != NodeState::kCordoned && node.state != NodeState::kDrained) {
      node.state = NodeState::kReady;
    }
    if (node.state != NodeState::kReady) (void)scheduler_->SetSchedulable(name, false);
    node.inventory = inventory;
  }
  node.node_id_hash = id_hash;
  node.token_hash = HashToken(*token);
  node.registration = credentials_.Set(name, node.token_hash);
  node.reports = {};  // a new agent process numbers its reports from 1 again
  node.last_heartbeat = clock_.Now();
  if (node.unreachable) ReachableAgainLocked(name, node);
  ++node.version;
  CORRAL_RETURN_IF_ERROR(store_.UpsertNode(NodeRecordOf(name, node)));
  WakeLoop();
  PublishLocked(PendingRebuild::kKeep);  // the node is seen at once
  lock.unlock();
  changed_.notify_all();
  protocol::RegisterAnswer answer;
  answer.node_token = *token;
  answer.cluster_id = store_.ClusterId();
  answer.heartbeat_interval_s = config_.heartbeat_interval_s;
  answer.fence =
      protocol::FenceTimings{config_.node_timeout, config_.fence_after, config_.kill_grace};
  return answer;
}

void Controller::CheckNodesLocked() {
  std::vector<reconcile::NodeLiveness> nodes;
  for (const auto& [name, node] : nodes_) {
    nodes.push_back({name, node.state, node.last_heartbeat, node.unreachable});
  }
  const reconcile::NodeTimings timings{config_.node_timeout, config_.fence_after,
                                       config_.kill_grace, config_.node_give_up};
  const std::vector<reconcile::LostNode> timed_out_nodes =
      reconcile::TimedOutNodes(nodes, timings, clock_.Now());
  for (const reconcile::LostNode& timed_out : timed_out_nodes) {
    LiveNode& node = nodes_.at(timed_out.name);
    if (timed_out.verdict == reconcile::NodeVerdict::kGiveUp) {
      LoseNodeLocked(timed_out.name, node, timed_out.reason);
    } else {
      UnreachableNodeLocked(timed_out.name, node, timed_out.reason);
    }
  }
  // Seen at once, not after the rest of the round: a job requeued off the node is already
  // pending in the store.
  if (!timed_out_nodes.empty()) PublishLocked(PendingRebuild::kKeep);
}

namespace {

bool RunsOn(const std::vector<store::TaskRecord>& tasks, const std::string& node) {
  return std::any_of(tasks.begin(), tasks.end(),
                     [&](const auto& t) { return t.node == node && !model::IsEnded(t.state); });
}

// What a job kept on an unreachable node hears (after the node check's reason).
constexpr char kKeepRunning[] = ": its tasks there keep running";

}  // namespace

std::optional<std::string> Controller::UnreachableReasonLocked(JobId id) const {
  auto job = jobs_.find(id);
  if (job == jobs_.end()) return std::nullopt;
  for (const store::TaskRecord& t : job->second.tasks) {
    if (model::IsEnded(t.state)) continue;
    auto node = nodes_.find(t.node);
    if (node != nodes_.end() && node->second.unreachable) {
      return node->second.unreachable_reason + kKeepRunning;
    }
  }
  return std::nullopt;
}

void Controller::UnreachableNodeLocked(const std::string& name, LiveNode& node,
                                       const std::string& reason) {
  const Seconds now = clock_.Now();
  node.unreachable = true;
  node.unreachable_reason = reason;
  (void)scheduler_->SetSchedulable(name, false);  // no agent hears launches there
  gpu_monitor_.ForgetNode(name);                  // its GPUs' last readings are stale
  auto on = jobs_on_node_.find(name);
  if (on == jobs_on_node_.end()) return;
  const std::set<JobId> ids = on->second;  // a fenced job's end changes the set
  for (JobId id : ids) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || !RunsOn(it->second.tasks, name)) continue;
    LiveJob& job = it->second;
    std::optional<reconcile::NodeLoss> fenced = reconcile::NodeUnreachable(
        FactsOf(job, job.record.state), job.end, job.tasks, name, reason, now);
    if (!fenced) {
      // It keeps running, its GPUs allocated: its agent's reports re-adopt it.
      (void)store_.AddJobEvent(id, reason + kKeepRunning, now);
      continue;
    }
    // As for a lost node: memory first; a task left running in the store is fenced again
    // after a restart (the node times out again).
    ReplaceTasks(job.tasks, fenced->lost);
    for (const store::TaskRecord& lost : fenced->lost) (void)store_.UpdateTask(lost);
    job.end = std::move(fenced->end);
    EvaluateJobLocked(job);
  }
}

void Controller::ReachableAgainLocked(const std::string& name, LiveNode& node) {
  const Seconds now = clock_.Now();
  node.unreachable = false;
  node.unreachable_reason.clear();
  if (node.state == NodeState::kReady) (void)scheduler_->SetSchedulable(name, true);
  WakeLoop();
  auto on = jobs_on_node_.find(name);
  if (on == jobs_on_node_.end()) return;
  for (JobId id : on->second) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || !RunsOn(it->second.tasks, name)) continue;
    (void)store_.AddJobEvent(id, "node " + name + " reachable again", now);
  }
}

void Controller::LoseNodeLocked(const std::string& name, LiveNode& node,
                                const std::string& reason) {
  const Seconds now = clock_.Now();
  node.state = NodeState::kLost;
  node.unreachable = false;
  node.unreachable_reason.clear();
  gpu_monitor_.ForgetNode(name);  // its GPUs' last readings would show jobs that are gone
  credentials_.Withdraw(name);    // it must register again; its stale tasks are then killed
  node.token_hash.clear();        // also for the next leader
  ++node.version;                 // a heartbeat waiting for it hears it is not registered
  changed_.notify_all();
  (void)store_.UpsertNode(NodeRecordOf(name, node));
  ReleaseWaitsLocked(name, [](int64_t) { return true; });  // its tasks are gone with it
  auto affected = scheduler_->RemoveNode(name);
  if (!affected.ok()) return;
  for (JobId id : *affected) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    LiveJob& job = it->second;
    reconcile::NodeLoss loss = reconcile::LoseNode(job.end, job.tasks, name, reason, now);
    // Memory first: the node and its GPUs are gone whatever the store says. A task left running
    // in the store is settled again after a restart (its node is lost then too).
    ReplaceTasks(job.tasks, loss.lost);
    for (const store::TaskRecord& lost : loss.lost) (void)store_.UpdateTask(lost);
    job.end = std::move(loss.end);
    EvaluateJobLocked(job);
  }
}

Status Controller::SetNodeState(const std::string& name, const std::string& action) {
  auto lock = LockState();
  SettleWritesLocked();  // a removed node's jobs are changed directly
  const Status done = SetNodeStateLocked(name, action);
  PublishLocked(PendingRebuild::kKeep);  // an admin sees the node's new state at once
  return done;
}

Status Controller::SetNodeStateLocked(const std::string& name, const std::string& action) {
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return NotFound("node '" + name + "' not found");
  if (action != "cordon" && action != "uncordon" && action != "drain" && action != "remove") {
    return InvalidArgument("action must be cordon, uncordon, drain or remove");
  }
  LiveNode& node = it->second;
  if (node.state == NodeState::kLost) return FailedPrecondition("node '" + name + "' is lost");
  if (action == "remove") {
    // What the give-up time would do, now: an admin knows the node is gone.
    LoseNodeLocked(name, node, "node " + name + " removed by an admin");
    WakeLoop();
    return Status::Ok();
  }
  // An unreachable node takes work again only once its agent is heard.
  const bool schedulable = action == "uncordon" && !node.unreachable;
  CORRAL_RETURN_IF_ERROR(scheduler_->SetSchedulable(name, schedulable));
  node.state = action == "uncordon"
                   ? NodeState::kReady
                   : (action == "drain" ? NodeState::kDrained : NodeState::kCordoned);
  WakeLoop();
  return store_.UpsertNode(NodeRecordOf(name, node));
}

bool Controller::SeesWorkOf(const Principal& who, const std::string& project) const {
  return config_.work_visibility == WorkVisibility::kAll || who.CanAccessProject(project);
}

void Controller::RecordSummaryLocked() {
  const Seconds now = clock_.Now();
  if (now < next_summary_at_) return;
  next_summary_at_ = now + Seconds(60);
  // A new deque (views published before hold the old one): once a minute.
  auto history = std::make_shared<std::deque<protocol::ClusterSummary>>(*summary_history_);
  history->push_back(ClusterSummaryLocked(StartedJobsLocked()));
  while (history->size() > static_cast<size_t>(kSummaryHistoryMinutes)) history->pop_front();
  summary_history_ = std::move(history);
}

protocol::ClusterSummary Controller::ClusterSummaryLocked(
    const std::vector<const LiveJob*>& started) {
  const auto& state = scheduler_->state();
  int64_t nodes = 0, ready = 0, gpus = 0, free_milli = 0;
  for (const auto& [name, node] : nodes_) {
    // Capacity is what the cluster has now: a lost node's GPUs are not in it (as for capacity
    // planning, LiveNodes()).
    if (node.state == NodeState::kLost) continue;
    ++nodes;
    ready += node.state == NodeState::kReady;
    const size_t count = node.inventory.gpus.size();
    gpus += static_cast<int64_t>(count);
    const sched::NodeIndex n = state.FindNode(name);
    if (n < 0) {
      free_milli += static_cast<int64_t>(count) * 1000;
      continue;
    }
    for (int32_t f : state.node(n).gpu_free) free_milli += f;
  }
  // Not a walk of every live job: the queue's length is the scheduler's.
  int64_t starting = 0, running = 0;
  for (const LiveJob* job : started) {
    starting += job->record.state == JobState::kStarting;
    running += job->record.state == JobState::kRunning;
  }
  // Jobs held for their dependencies are pending too, beside the queue.
  const auto pending = static_cast<int64_t>(scheduler_->pending_count()) + held_jobs_;
  return {.time = clock_.Now(),
          .nodes = nodes,
          .nodes_ready = ready,
          .gpus = gpus,
          .allocated = MilliGpu(gpus * 1000 - free_milli),
          .gpus_used = gpu_monitor_.UsedGpus(),
          .jobs_pending = pending,
          .jobs_starting = starting,
          .jobs_running = running};
}

protocol::TaskLaunch Controller::LaunchFor(const LiveJob& job, const store::TaskRecord& t) const {
  const model::Allocation& a = t.allocation;
  protocol::TaskLaunch launch;
  for (const model::GpuShare& g : a.gpus) {
    launch.gpus.push_back(g.index);
    launch.gpu_milli = g.milli;  // a task's GPUs are all whole, or it has one share
  }
  launch.job_id = job.record.id;
  launch.task_index = t.task_index;
  // The run's size: an elastic --nodes job's spec says its MIN, a resized run has more or fewer.
  launch.tasks = static_cast<int>(job.tasks.size());
  launch.key = {protocol::AllocationId(t.allocation_id), t.generation};
  launch.argv = job.spec.command;
  launch.shell = job.spec.shell;
  launch.workdir = job.spec.workdir;
  launch.submit_dir = job.spec.submit_dir;
  launch.warning_signal = job.spec.warning_signal;
  launch.env = job.spec.env;
  launch.cpu = a.cpu;
  launch.memory = a.memory;
  launch.time_limit = Seconds(job.spec.time_limit_s);
  // A generation launched while the job runs (an elastic resize) has what is left of the run's
  // limit, at least a second (0 would mean none).
  if (job.spec.time_limit_s > 0 && job.record.start_time) {
    launch.time_limit = Seconds(std::max<int64_t>(
        1, TimeLeftS(job.spec.time_limit_s, *job.record.start_time, clock_.Now())));
  }
  launch.user = job.record.user;
  launch.project = job.record.project;
  launch.array_index = job.record.array_index;
  if (job.record.array_id) launch.array_id = job.record.array_id->value();
  if (job.spec.script) {
    launch.script = job.spec.script->text;
    launch.argv = job.spec.script->args;
    launch.job_name = job.spec.name;
  }
  const protocol::OutputNames names{
      .job_id = job.record.id.value(),
      .array_id = job.record.array_id ? job.record.array_id->value() : job.record.id.value(),
      .array_index = job.record.array_index,
      .job_name = job.spec.name,
      .user = job.record.user};
  if (!job.spec.output_file.empty()) {
    launch.output_file = protocol::ExpandOutputPattern(job.spec.output_file, names);
  }
  if (!job.spec.error_file.empty()) {
    launch.error_file = protocol::ExpandOutputPattern(job.spec.error_file, names);
  }
  // What its agent fences when it reaches no server: what the node's timeout requeues.
  launch.requeueable = reconcile::Fenceable(FactsOf(job, job.record.state));
  // The in-job channel (docs/in-job.md): derived, so every server of the cluster sends the same.
  if (!config_.session_key.empty()) {
    launch.job_token = JobToken(config_.session_key, job.record.id, job.record.submit_time);
  }
  launch.checkpoint_dir = CheckpointDirOf(job.record.id).value_or("");
  if (job.environment) {
    const auto node = nodes_.find(t.node);
    launch.environment = LaunchEnvironmentOf(
        *job.environment, node == nodes_.end() ? nullptr : &node->second.inventory);
  }
  if (job.spec.session && a.session) {
    // The agent sets the session variables from this (protocol::LaunchSession).
    launch.session =
        protocol::LaunchSession{a.session->port, model::SessionUrlPrefix(job.record.id.value()),
                                SessionToken(*job.spec.session), job.spec.session->shell};
  }
  if (a.rendezvous) {
    launch.distributed = protocol::Distributed{
        job.spec.launcher,         job.spec.procs_per_node, t.task_index,        launch.tasks,
        a.rendezvous->master_addr, a.rendezvous->port,      a.rendezvous->hosts,
    };
  }
  return launch;
}

protocol::ReportAnswer Controller::ResponseForLocked(const std::string& name) {
  protocol::ReportAnswer answer;
  answer.heartbeat_interval_s = config_.heartbeat_interval_s;
  static const std::set<int64_t> kNoneStarting;
  auto node = nodes_.find(name);
  const std::set<int64_t>& starting =
      node == nodes_.end() ? kNoneStarting : node->second.reports.starting;
  // Only the jobs with tasks on this node: a heartbeat costs O(the node's tasks), not O(jobs).
  static const std::set<JobId> kNone;
  auto on = jobs_on_node_.find(name);
  const bool reported = unreported_nodes_.count(name) == 0;
  for (JobId id : on == jobs_on_node_.end() ? kNone : on->second) {
    LiveJob& job = jobs_.at(id);
    const reconcile::NodeOrders orders =
        reconcile::HeartbeatOrders(name, job.tasks, job.end, job.waits_for, starting);
    // A job whose change is decided but not yet applied (a cancel, a gang's failure) may be
    // about to stop its unlaunched tasks and free their GPUs: it launches nothing until then
    // (the apply wakes its nodes). Stop orders are safe either way.
    if (reported && !JobHasPendingWriteLocked(id)) {
      for (const store::TaskRecord* t : orders.launch) {
        answer.run.push_back(LaunchFor(job, *t));
        job.launched.insert(t->allocation_id);
      }
    }
    for (const store::TaskRecord* t : orders.stop) {
      answer.kill.push_back({{protocol::AllocationId(t->allocation_id), t->generation},
                             config_.kill_grace,
                             orders.stop_reason});
    }
  }
  return answer;
}

std::map<int64_t, GpuHolder> Controller::GpuHoldersLocked(const std::string& node,
                                                          const std::vector<ReportedGpu>& gpus) {
  std::map<int64_t, GpuHolder> holders;
  for (const ReportedGpu& g : gpus) {
    for (int64_t allocation : g.allocations) {
      auto job_id = job_of_allocation_.find(allocation);
      if (job_id == job_of_allocation_.end()) continue;
      auto job = jobs_.find(job_id->second);
      if (job == jobs_.end()) continue;
      const LiveJob& j = job->second;
      const bool here = std::any_of(j.tasks.begin(), j.tasks.end(), [&](const auto& t) {
        return t.allocation_id == allocation && t.node == node;
      });
      if (!here) continue;  // an agent may speak only for its own tasks
      const model::TaskResources& r = j.spec.resources;
      holders[allocation] = GpuHolder{j.record.id, j.record.user, j.record.project,
                                      r.gpu_milli.value() / 1000.0, j.spec.session.has_value()};
    }
  }
  return holders;
}

std::vector<model::Node> Controller::LiveNodes() {
  const std::shared_ptr<const ReadView> view = view_.Get();
  std::vector<model::Node> out;
  for (const NodeEntryView& entry : view->nodes) {
    if (entry.row.state == NodeState::kLost) continue;
    if (auto n = NodeFromInventory(entry.row.name, entry.inventory); n.ok()) {
      out.push_back(std::move(*n));
    }
  }
  return out;
}

int64_t Controller::RejectedGpuReports() { return rejected_gpu_reports_.load(); }

int64_t Controller::StoreCommits() { return store_.Commits(); }

int64_t Controller::StoreRoundTrips() { return store_.RoundTrips(); }

}  // namespace corral::server
