// Controller, nodes and agents (docs/control-plane.md): registration, the heartbeat path
// (launch and stop orders, task reports, logs), node checks and node loss, cordon and drain,
// and the node and cluster-summary views.

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <system_error>

#include "model/allocation.h"
#include "model/node.h"
#include "model/session.h"
#include "server/control/controller.h"
#include "server/control/controller_internal.h"

namespace corral::server {

using namespace controller_internal;  // NOLINT(google-build-using-namespace)

namespace {

// The launch's "environment" (docs/environments.md): what the agent's runtime sets up.
protocol::LaunchEnvironment LaunchEnvironmentOf(const EnvironmentVersion& env) {
  return {env.record.name, env.record.version, env.spec.PreferredRuntime(),
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
  for (const std::string& runtime : inv.runtimes) {
    // A newer agent may offer runtimes this server does not know: they place nothing.
    if (runtime == model::kProcessRuntime || runtime == model::kContainerRuntime) {
      node.runtimes.push_back(runtime);
    }
  }
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

Result<protocol::RegisterAnswer> Controller::RegisterNode(
    const protocol::RegisterRequest& request) {
  const std::string& name = request.name;
  const protocol::NodeInventory& inventory = request.inventory;
  // Agents use the name as a path component on their host: refused here too, so that no agent
  // of another version can register one that today's agents could not use.
  if (Status valid = model::ValidateNodeName(name); !valid.ok()) {
    return InvalidArgument("field 'name': " + valid.message());
  }
  CORRAL_RETURN_IF_ERROR(NodeFromInventory(name, inventory).status());
  auto token = GenerateToken();
  if (!token.ok()) return token.status();
  const std::string id_hash = HashToken(request.node_id);
  std::unique_lock lock(mu_);
  auto it = nodes_.find(name);
  bool live = it != nodes_.end() && it->second.state != NodeState::kLost;
  if (live && !it->second.node_id_hash.empty() && !SecureEquals(it->second.node_id_hash, id_hash)) {
    return AlreadyExists("node name '" + name +
                         "' is held by another agent (a different node id); stop that agent, or "
                         "wait until its node is lost (" +
                         std::to_string(config_.node_timeout.value()) + " s without heartbeat)");
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
  node.reports = {};  // a new agent process numbers its reports from 1 again
  node.last_heartbeat = clock_.Now();
  ++node.version;
  store::NodeRecord record{name, protocol::ToJson(node.inventory).dump(), node.state,
                           node.last_heartbeat, node.node_id_hash};
  CORRAL_RETURN_IF_ERROR(store_.UpsertNode(record));
  wake_ = true;
  lock.unlock();
  changed_.notify_all();
  protocol::RegisterAnswer answer;
  answer.node_token = *token;
  answer.cluster_id = store_.ClusterId();
  answer.heartbeat_interval_s = config_.heartbeat_interval_s;
  return answer;
}

bool Controller::AuthenticateNode(const std::string& name, const std::string& token) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  return it != nodes_.end() && !it->second.token_hash.empty() &&
         SecureEquals(it->second.token_hash, HashToken(token));
}

void Controller::CheckNodesLocked() {
  std::vector<reconcile::NodeLiveness> nodes;
  for (const auto& [name, node] : nodes_) nodes.push_back({name, node.state, node.last_heartbeat});
  for (const reconcile::LostNode& lost :
       reconcile::TimedOutNodes(nodes, config_.node_timeout, clock_.Now())) {
    LoseNodeLocked(lost.name, nodes_.at(lost.name), lost.reason);
  }
}

void Controller::LoseNodeLocked(const std::string& name, LiveNode& node,
                                const std::string& reason) {
  const Seconds now = clock_.Now();
  node.state = NodeState::kLost;
  gpu_monitor_.ForgetNode(name);  // its GPUs' last readings would show jobs that are gone
  node.token_hash.clear();        // it must register again; its stale tasks are then killed
  (void)store_.UpsertNode({name, protocol::ToJson(node.inventory).dump(), NodeState::kLost,
                           node.last_heartbeat, node.node_id_hash});
  ReleaseWaitsLocked(name, [](int64_t) { return true; });  // its tasks are gone with it
  auto affected = scheduler_->RemoveNode(name);
  if (!affected.ok()) return;
  for (JobId id : *affected) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    LiveJob& job = it->second;
    reconcile::NodeLoss loss = reconcile::LoseNode(job.end, job.tasks, name, reason, now);
    for (const store::TaskRecord& lost : loss.lost) {
      // Memory first: the node and its GPUs are gone whatever the store says. A task left
      // running in the store is settled again after a restart (its node is lost then too).
      for (auto& t : job.tasks) {
        if (t.allocation_id == lost.allocation_id) t = lost;
      }
      (void)store_.UpdateTask(lost);
    }
    job.end = std::move(loss.end);
    EvaluateJobLocked(job);
  }
}

Status Controller::SetNodeState(const std::string& name, const std::string& action) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return NotFound("node '" + name + "' not found");
  if (action != "cordon" && action != "uncordon" && action != "drain") {
    return InvalidArgument("action must be cordon, uncordon or drain");
  }
  LiveNode& node = it->second;
  if (node.state == NodeState::kLost) return FailedPrecondition("node '" + name + "' is lost");
  const bool schedulable = action == "uncordon";
  CORRAL_RETURN_IF_ERROR(scheduler_->SetSchedulable(name, schedulable));
  node.state = action == "uncordon"
                   ? NodeState::kReady
                   : (action == "drain" ? NodeState::kDrained : NodeState::kCordoned);
  wake_ = true;
  return store_.UpsertNode({name, protocol::ToJson(node.inventory).dump(), node.state,
                            node.last_heartbeat, node.node_id_hash});
}

nlohmann::json Controller::Nodes() {
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  const auto& state = scheduler_->state();
  // node -> GPU index -> the tasks on it, built once (not per node) from the live jobs.
  std::map<std::string, std::map<int, nlohmann::json>> on_gpu;
  for (const auto& [id, job] : jobs_) {
    if (job.record.state != JobState::kStarting && job.record.state != JobState::kRunning) {
      continue;
    }
    for (const auto& t : job.tasks) {
      for (const model::GpuShare& g : t.allocation.gpus) {
        nlohmann::json& list = on_gpu[t.node][g.index];
        list.push_back({{"job", id.value()},
                        {"task", t.task_index},
                        {"user", job.record.user},
                        {"project", job.record.project},
                        {"milli", g.milli.value()}});
      }
    }
  }
  for (const auto& [name, node] : nodes_) {
    nlohmann::json row = {{"name", name},
                          {"state", Name(node.state)},
                          {"last_heartbeat", node.last_heartbeat.value()},
                          {"gpu_model", node.inventory.gpu_model},
                          {"gpus", node.inventory.gpus.size()},
                          {"cpu_milli", node.inventory.cpu.value()},
                          {"memory_mib", node.inventory.memory.value()},
                          {"labels", node.inventory.labels},
                          {"runtimes", node.inventory.runtimes}};
    if (!node.inventory.container_engine.empty()) {
      row["container_engine"] = node.inventory.container_engine;
    }
    if (!node.gpu_metrics_error.empty()) row["gpu_metrics_error"] = node.gpu_metrics_error;
    const sched::NodeIndex n = state.FindNode(name);
    if (n >= 0) {
      row["gpu_free_milli"] = state.node(n).gpu_free;
      row["cpu_free_milli"] = state.node(n).cpu_free;
      row["memory_free_mib"] = state.node(n).memory_free;
    }
    nlohmann::json gpu_tasks = nlohmann::json::array();
    const auto tasks = on_gpu.find(name);
    for (size_t i = 0; i < row["gpus"].get<size_t>(); ++i) {
      nlohmann::json list = nlohmann::json::array();
      if (tasks != on_gpu.end()) {
        if (auto it = tasks->second.find(static_cast<int>(i)); it != tasks->second.end()) {
          list = it->second;
        }
      }
      gpu_tasks.push_back(std::move(list));
    }
    row["gpu_tasks"] = std::move(gpu_tasks);
    out.push_back(row);
  }
  return out;
}

nlohmann::json Controller::ClusterSummary() {
  std::lock_guard lock(mu_);
  return ClusterSummaryLocked();
}

void Controller::RecordSummaryLocked() {
  const Seconds now = clock_.Now();
  if (now < next_summary_at_) return;
  next_summary_at_ = now + Seconds(60);
  summary_history_.push_back(ClusterSummaryLocked());
  while (summary_history_.size() > static_cast<size_t>(kSummaryHistoryMinutes)) {
    summary_history_.pop_front();
  }
}

nlohmann::json Controller::SummaryHistory(Seconds since) {
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  for (const nlohmann::json& s : summary_history_) {
    if (s.value("time", int64_t{0}) >= since.value()) out.push_back(s);
  }
  return out;
}

nlohmann::json Controller::ClusterSummaryLocked() {
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
  int64_t pending = 0, starting = 0, running = 0;
  for (const auto& [id, job] : jobs_) {
    pending += job.record.state == JobState::kPending;
    starting += job.record.state == JobState::kStarting;
    running += job.record.state == JobState::kRunning;
  }
  return {{"time", clock_.Now().value()},
          {"nodes", nodes},
          {"nodes_ready", ready},
          {"gpus", gpus},
          {"gpus_allocated", static_cast<double>(gpus * 1000 - free_milli) / 1000},
          {"gpus_used", gpu_monitor_.UsedGpus()},
          {"jobs_pending", pending},
          {"jobs_starting", starting},
          {"jobs_running", running}};
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
  launch.tasks = job.spec.tasks;
  launch.key = {protocol::AllocationId(t.allocation_id), t.generation};
  launch.argv = job.spec.command;
  launch.shell = job.spec.shell;
  launch.workdir = job.spec.workdir;
  launch.env = job.spec.env;
  launch.cpu = a.cpu;
  launch.memory = a.memory;
  launch.time_limit = Seconds(job.spec.time_limit_s);
  launch.user = job.record.user;
  launch.project = job.record.project;
  launch.array_index = job.record.array_index;
  if (job.environment) launch.environment = LaunchEnvironmentOf(*job.environment);
  if (job.spec.session && a.session) {
    // The agent sets the session variables from this (protocol::LaunchSession).
    launch.session = protocol::LaunchSession{
        a.session->port, model::SessionUrlPrefix(job.record.id.value()), job.spec.session->token};
  }
  if (a.rendezvous) {
    launch.distributed = protocol::Distributed{
        job.spec.launcher,         job.spec.procs_per_node, t.task_index,        job.spec.tasks,
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
  for (JobId id : on == jobs_on_node_.end() ? kNone : on->second) {
    LiveJob& job = jobs_.at(id);
    const reconcile::NodeOrders orders =
        reconcile::HeartbeatOrders(name, job.tasks, job.end, job.waits_for, starting);
    for (const store::TaskRecord* t : orders.launch) {
      answer.run.push_back(LaunchFor(job, *t));
      job.launched.insert(t->allocation_id);
    }
    for (const store::TaskRecord* t : orders.stop) {
      answer.kill.push_back({{protocol::AllocationId(t->allocation_id), t->generation},
                             config_.kill_grace,
                             orders.stop_reason});
    }
  }
  return answer;
}

Status Controller::ApplyTaskReportLocked(const std::string& node, const protocol::TaskStatus& s,
                                         std::vector<protocol::StopOrder>& kills) {
  const int64_t alloc = s.key.allocation.value();
  auto owner = job_of_allocation_.find(alloc);
  LiveJob* job = owner == job_of_allocation_.end() ? nullptr : &jobs_.at(owner->second);
  reconcile::ReportDecision d =
      reconcile::DecideReport(job ? &job->tasks : nullptr, node, s, clock_.Now());
  switch (d.action) {
    case reconcile::ReportAction::kIgnore:
      return Status::Ok();
    case reconcile::ReportAction::kKill:
      kills.push_back({s.key, config_.kill_grace, d.kill_reason});
      return Status::Ok();
    case reconcile::ReportAction::kUpdate:
      break;
  }
  if (d.end_note) job->end_notes[alloc] = std::move(*d.end_note);
  CORRAL_RETURN_IF_ERROR(UpdateTaskLocked(*job, d.updated));
  EvaluateJobLocked(*job);
  return Status::Ok();
}

Status Controller::ReconcileUnreportedLocked(const std::string& node,
                                             const std::set<int64_t>& reported) {
  auto on = jobs_on_node_.find(node);
  if (on == jobs_on_node_.end()) return Status::Ok();
  const std::vector<JobId> ids(on->second.begin(), on->second.end());  // evaluation may erase
  for (JobId id : ids) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    LiveJob& job = it->second;
    bool changed = false;
    for (const store::TaskRecord& t : std::vector<store::TaskRecord>(job.tasks)) {
      if (t.node != node || reported.count(t.allocation_id)) continue;
      std::optional<store::TaskRecord> ended = reconcile::DecideUnreported(
          t, job.launched.count(t.allocation_id) > 0, job.Stopping(), clock_.Now());
      if (!ended) continue;
      CORRAL_RETURN_IF_ERROR(UpdateTaskLocked(job, *ended));
      changed = true;
    }
    if (changed) EvaluateJobLocked(job);
  }
  return Status::Ok();
}

void Controller::WriteLogLocked(const std::string& node, const protocol::LogChunk& chunk) {
  const int64_t alloc = chunk.key.allocation.value();
  const int64_t generation = chunk.key.generation;
  const std::string stream = protocol::LogStreamName(chunk.stream);
  if (config_.logs_dir.empty()) return;
  // The target comes from the server's own records, never from the chunk (no path from input).
  std::optional<LogTarget> target;
  if (auto owner = job_of_allocation_.find(alloc); owner != job_of_allocation_.end()) {
    const LiveJob& job = jobs_.at(owner->second);
    for (const auto& t : job.tasks) {
      if (t.allocation_id == alloc && t.node == node) {
        target = LogTarget{job.record.id, t.task_index, t.generation, t.node};
      }
    }
  } else if (auto ended = ended_allocations_.find(alloc);
             ended != ended_allocations_.end() && ended->second.node == node) {
    target = ended->second;
  }
  if (!target || target->generation != generation) return;
  const std::string& data = chunk.data;
  const int64_t offset = chunk.offset;  // >= 0 (the codec)
  const std::string dir = config_.logs_dir + "/" + std::to_string(target->job.value());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/" + std::to_string(target->task_index) + "-g" +
                           std::to_string(target->generation) + "." + stream;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return;
  // Chunks arrive in order from one agent: never leave a hole (no sparse files from bad input).
  if (offset > ::lseek(fd, 0, SEEK_END)) {
    ::close(fd);
    return;
  }
  // Written at the agent's offset: a chunk sent twice lands on the same bytes.
  (void)::pwrite(fd, data.data(), data.size(), offset);
  ::close(fd);
}

int Controller::WaitingHeartbeats() {
  std::lock_guard lock(mu_);
  return waiting_heartbeats_;
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
  std::lock_guard lock(mu_);
  std::vector<model::Node> out;
  for (const auto& [name, node] : nodes_) {
    if (node.state == NodeState::kLost) continue;
    if (auto n = NodeFromInventory(name, node.inventory); n.ok()) out.push_back(std::move(*n));
  }
  return out;
}

int64_t Controller::RejectedGpuReports() { return rejected_gpu_reports_.load(); }

Result<protocol::ReportAnswer> Controller::Heartbeat(const std::string& name,
                                                     const protocol::Report& report) {
  // GPU metrics are an aside: a malformed report of them (refused by the codec) is counted and
  // dropped, and the task reports (which must be acknowledged) go on.
  if (!report.gpu_metrics_error.empty()) ++rejected_gpu_reports_;
  const int wait_ms = std::clamp(report.wait_ms, 0, protocol::kMaxWaitMs);
  std::set<int64_t> starting;
  for (const protocol::TaskKey& k : report.starting) starting.insert(k.allocation.value());
  std::unique_lock lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end() || it->second.state == NodeState::kLost) {
    return NotFound("node '" + name + "' is not registered");
  }
  it->second.last_heartbeat = clock_.Now();
  if (!report.gpu_metrics_error.empty()) it->second.gpu_metrics_error = report.gpu_metrics_error;
  if (report.gpu_metrics) {
    const std::vector<ReportedGpu> gpus = ReportedGpus(*report.gpu_metrics);
    GpuMonitor::NodeGpus identity{it->second.inventory.gpu_model, {}};
    for (const protocol::InventoryGpu& g : it->second.inventory.gpus) {
      identity.gpus.push_back({g.uuid, g.memory.value()});
    }
    gpu_monitor_.Record(name, identity, gpus, GpuHoldersLocked(name, gpus),
                        it->second.last_heartbeat.value() * 1000);
  }
  // Output first: a task's last lines arrive in the same report as its end.
  for (const protocol::LogChunk& chunk : report.logs) WriteLogLocked(name, chunk);
  std::vector<protocol::StopOrder> kills;
  // Two reports of one agent may be in flight at once (a push overtaking a heartbeat): one older
  // than a report already taken from this registration says nothing the server may act on, and
  // taking it could undo what the newer one said (mark a task it started lost).
  const int64_t seq = report.seq;
  const bool stale = seq <= it->second.reports.last_seq;
  if (!stale) {
    it->second.reports.starting = std::move(starting);
    std::set<int64_t> reported = it->second.reports.starting;  // accepted: not lost, not resent
    std::set<int64_t> running, ended;
    for (const protocol::TaskStatus& s : report.tasks) {
      const int64_t alloc = s.key.allocation.value();
      reported.insert(alloc);
      (s.state == protocol::TaskState::kRunning ? running : ended).insert(alloc);
      CORRAL_RETURN_IF_ERROR(ApplyTaskReportLocked(name, s, kills));
    }
    if (report.partial) {
      // Only the tasks it lists: the others keep their states, and the waits on them.
      ReleaseWaitsLocked(name, [&](int64_t alloc) { return ended.count(alloc) > 0; });
    } else {
      CORRAL_RETURN_IF_ERROR(ReconcileUnreportedLocked(name, reported));
      ReleaseWaitsLocked(name, [&](int64_t alloc) { return running.count(alloc) == 0; });
    }
    nodes_[name].reports.last_seq = seq;
    // An end may have freed GPUs: schedule now, not at the loop's next tick, so that the next
    // job's launch goes out on the node's waiting heartbeat within milliseconds.
    if (wake_) changed_.notify_all();
  }
  // What every answer says about the report: whether it was stale, and the newest report taken.
  auto about_report = [&](protocol::ReportAnswer& answer) {
    answer.stale_report = stale;
    answer.taken_seq = nodes_[name].reports.last_seq;
  };
  protocol::ReportAnswer response = ResponseForLocked(name);
  auto quiet = [&] { return response.run.empty() && response.kill.empty() && kills.empty(); };
  if (quiet() && wait_ms > 0 && waiting_heartbeats_ >= kMaxWaitingHeartbeats) {
    // Every waiting heartbeat holds an HTTP thread: past the cap, answer now and let the agent
    // pause instead, so that API requests always find a thread.
    response.retry_after_ms = wait_ms;
    about_report(response);
    return response;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  ++waiting_heartbeats_;
  while (quiet() && !stopping_) {
    const uint64_t seen = nodes_[name].version;
    if (!changed_.wait_until(lock, deadline,
                             [&] { return stopping_ || nodes_[name].version != seen; })) {
      break;
    }
    response = ResponseForLocked(name);
  }
  --waiting_heartbeats_;
  for (auto& k : kills) response.kill.push_back(std::move(k));
  about_report(response);
  return response;
}

}  // namespace corral::server
