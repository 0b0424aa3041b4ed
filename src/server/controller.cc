#include "server/controller.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>

#include "sched/fragmentation.h"

namespace corral::server {

namespace {

constexpr int kHistoryForProfile = 10000;  // recent jobs that shape FGD's workload profile

bool IsTerminalTask(const std::string& state) { return state != "assigned" && state != "running"; }

bool TaskFailed(const store::TaskRecord& t) {
  return t.state == "lost" || (t.signal.has_value()) || (t.exit_code.value_or(0) != 0) ||
         (t.state == "killed" && !t.exit_code.has_value());
}

std::string DescribeEnd(const store::TaskRecord& t) {
  std::string what = "task " + std::to_string(t.task_index);
  if (t.state == "lost") return what + " was lost";
  if (t.signal) return what + " was killed by signal " + std::to_string(*t.signal);
  if (t.exit_code) return what + " exited with code " + std::to_string(*t.exit_code);
  return what + " ended (" + t.state + ")";
}

nlohmann::json AllocationJson(const sched::Allocation& a, const std::string& node) {
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& g : a.gpus) gpus.push_back({{"index", g.index}, {"milli", g.milli.value()}});
  return {{"node", node},
          {"gpus", gpus},
          {"cpu_milli", a.cpu.value()},
          {"memory_mib", a.memory.value()}};
}

// The scheduler's node from an agent inventory (see docs/control-plane.md).
Result<model::Node> NodeFromInventory(const std::string& name, const nlohmann::json& inv) {
  try {
    model::Node node;
    node.name = name;
    node.cpu = CpuMilli(inv.at("cpu_milli").get<int64_t>());
    node.memory = MemoryMib(inv.at("memory_mib").get<int64_t>());
    node.gpu_model = inv.value("gpu_model", "");
    int index = 0;
    for (const auto& g : inv.value("gpus", nlohmann::json::array())) {
      model::Gpu gpu;
      gpu.index = index++;
      gpu.uuid = g.value("uuid", "");
      gpu.memory = MemoryMib(g.value("memory_mib", int64_t{0}));
      gpu.nvlink_domain = g.value("nvlink_domain", 0);
      node.gpus.push_back(gpu);
    }
    if (inv.contains("labels")) {
      for (const auto& [k, v] : inv["labels"].items()) node.labels[k] = v.get<std::string>();
    }
    CORRAL_RETURN_IF_ERROR(model::Validate(node));
    return node;
  } catch (const nlohmann::json::exception& e) {
    return InvalidArgument("inventory of node '" + name + "': " + e.what());
  }
}

}  // namespace

Result<std::unique_ptr<Controller>> Controller::Create(ControllerConfig config, store::Store& store,
                                                       Clock& clock) {
  // FGD scores against the workload's typical tasks: learn them from recent history.
  store::JobFilter recent;
  recent.limit = kHistoryForProfile;
  auto history = store.ListJobs(recent);
  if (!history.ok()) return history.status();
  std::vector<model::TaskResources> tasks;
  for (const auto& j : *history) {
    auto spec = ParseJobSpec(nlohmann::json::parse(j.spec_json, nullptr, false));
    if (spec.ok()) tasks.push_back(spec->resources);
  }
  sched::PolicyContext context{sched::ComputeTypicalTasks(tasks)};
  auto scheduler = sched::Scheduler::Create(sched::SchedulerConfig{config.policy}, context);
  if (!scheduler.ok()) return scheduler.status();
  std::unique_ptr<Controller> c(
      new Controller(std::move(config), store, clock, std::move(scheduler).value()));
  CORRAL_RETURN_IF_ERROR(c->Recover());
  return c;
}

Controller::Controller(ControllerConfig config, store::Store& store, Clock& clock,
                       std::unique_ptr<sched::Scheduler> scheduler)
    : config_(std::move(config)),
      store_(store),
      clock_(clock),
      batcher_(&store),
      scheduler_(std::move(scheduler)) {}

Controller::~Controller() { Stop(); }

Status Controller::Recover() {
  std::lock_guard lock(mu_);
  auto nodes = store_.ListNodes();
  if (!nodes.ok()) return nodes.status();
  for (const auto& n : *nodes) {
    if (n.state == "lost") continue;
    auto inventory = nlohmann::json::parse(n.inventory_json, nullptr, false);
    if (!AddNodeToSchedulerLocked(n.name, inventory).ok()) continue;
    LiveNode& live = nodes_[n.name];
    live.inventory = inventory;
    live.state = n.state;
    // Agents get a full timeout to come back before their node is declared lost.
    live.last_heartbeat = clock_.Now();
    if (n.state != "ready") (void)scheduler_->SetSchedulable(n.name, false);
  }
  store::JobFilter active;
  active.states = {"pending", "starting", "running"};
  active.limit = 0;
  auto jobs = store_.ListJobs(active);
  if (!jobs.ok()) return jobs.status();
  for (const auto& record : *jobs) {
    auto spec = ParseJobSpec(nlohmann::json::parse(record.spec_json, nullptr, false));
    if (!spec.ok()) continue;  // validated at submission; a corrupt row is left alone
    LiveJob& job = jobs_[record.id];
    job.record = record;
    job.spec = *spec;
    const model::Job model_job = ToModelJob(*spec, record.id, record.user, record.submit_time);
    if (record.state == "pending") {
      (void)scheduler_->Submit(model_job);
      continue;
    }
    auto tasks = store_.TasksOfJob(record.id);
    if (!tasks.ok()) return tasks.status();
    std::vector<sched::Allocation> allocations;
    for (const auto& t : *tasks) {
      if (t.generation != record.restarts + 1) continue;  // an older run
      job.tasks.push_back(t);
      auto a = nlohmann::json::parse(t.allocation_json, nullptr, false);
      sched::Allocation alloc;
      alloc.node = scheduler_->state().FindNode(t.node);
      alloc.cpu = CpuMilli(a.value("cpu_milli", int64_t{0}));
      alloc.memory = MemoryMib(a.value("memory_mib", int64_t{0}));
      for (const auto& g : a.value("gpus", nlohmann::json::array())) {
        alloc.gpus.push_back({g.value("index", 0), MilliGpu(g.value("milli", 0))});
      }
      if (!IsTerminalTask(t.state) && alloc.node >= 0) allocations.push_back(alloc);
    }
    IndexAllocationsLocked(job);
    if (scheduler_->Adopt(model_job, allocations).ok()) EvaluateJobLocked(job);
  }
  return Status::Ok();
}

void Controller::Start() {
  std::lock_guard lock(mu_);
  if (loop_.joinable()) return;
  stopping_ = false;
  loop_ = std::thread([this] { LoopMain(); });
}

void Controller::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (loop_.joinable()) loop_.join();
  batcher_.Close();
}

void Controller::Wake() {
  {
    std::lock_guard lock(mu_);
    wake_ = true;
  }
  changed_.notify_all();
}

void Controller::LoopMain() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    changed_.wait_for(lock, std::chrono::seconds(1), [&] { return wake_ || stopping_; });
    if (stopping_) break;
    wake_ = false;
    CheckNodesLocked();
    ScheduleLocked();
  }
}

void Controller::Tick() {
  std::lock_guard lock(mu_);
  CheckNodesLocked();
  ScheduleLocked();
}

// --- Submissions and jobs --------------------------------------------------------------------

Result<Principal> Controller::CheckAccess(const Principal& who, const std::string& project) const {
  if (!who.CanAccessProject(project)) {
    return PermissionDenied("user '" + who.name + "' is not a member of project '" + project + "'");
  }
  return who;
}

Result<store::JobRecord> Controller::Submit(const Principal& who, const nlohmann::json& json) {
  auto spec = ParseJobSpec(json);
  if (!spec.ok()) return spec.status();
  if (spec->project.empty()) spec->project = config_.default_project;
  auto access = CheckAccess(who, spec->project);
  if (!access.ok()) return access.status();

  store::JobRecord record;
  record.name = spec->name;
  record.user = who.name;
  record.project = spec->project;
  record.spec_json = ToJson(*spec).dump();
  record.state = "pending";
  record.priority = spec->priority;
  record.submit_time = clock_.Now();
  auto id = batcher_.Submit(record);  // commits (group commit) before returning
  if (!id.ok()) return id.status();
  record.id = *id;
  {
    std::lock_guard lock(mu_);
    LiveJob& job = jobs_[record.id];
    job.record = record;
    job.spec = *spec;
    (void)scheduler_->Submit(ToModelJob(*spec, record.id, record.user, record.submit_time));
    wake_ = true;
  }
  changed_.notify_all();
  return record;
}

Status Controller::Cancel(const Principal& who, JobId id) {
  std::unique_lock lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    auto record = store_.GetJob(id);
    if (!record.ok()) return record.status();
    if (!who.CanAccessProject(record->project)) {
      return NotFound("job " + std::to_string(id.value()) + " not found");
    }
    return FailedPrecondition("job " + std::to_string(id.value()) + " already ended (" +
                              record->state + ")");
  }
  LiveJob& job = it->second;
  if (!who.CanAccessProject(job.record.project)) {
    return NotFound("job " + std::to_string(id.value()) + " not found");
  }
  const std::string reason = "cancelled by " + who.name;
  if (job.record.state == "pending") {
    (void)scheduler_->Cancel(id);
    EndJobLocked(job, "cancelled", reason);
    return Status::Ok();
  }
  job.cancel_requested = true;
  job.failure = reason;
  // Tasks that no agent has reported yet are considered stopped now; if an agent starts one
  // anyway, its report is stale and answered with a kill.
  for (auto& t : job.tasks) {
    if (t.state == "assigned") {
      t.state = "killed";
      t.end_time = clock_.Now();
      (void)store_.UpdateTask(t);
    }
  }
  NotifyNodesLocked(job);
  EvaluateJobLocked(job);
  lock.unlock();
  changed_.notify_all();
  return Status::Ok();
}

Result<nlohmann::json> Controller::JobView(const Principal& who, JobId id) {
  auto record = store_.GetJob(id);
  if (!record.ok()) return record.status();
  if (!who.CanAccessProject(record->project)) {
    return NotFound("job " + std::to_string(id.value()) + " not found");
  }
  auto events = store_.JobEvents(id);
  auto tasks = store_.TasksOfJob(id);
  if (!events.ok()) return events.status();
  if (!tasks.ok()) return tasks.status();
  nlohmann::json out = {{"id", record->id.value()},
                        {"name", record->name},
                        {"user", record->user},
                        {"project", record->project},
                        {"state", record->state},
                        {"priority", record->priority},
                        {"restarts", record->restarts},
                        {"submit_time", record->submit_time.value()},
                        {"reason", record->reason},
                        {"spec", nlohmann::json::parse(record->spec_json, nullptr, false)}};
  if (record->start_time) out["start_time"] = record->start_time->value();
  if (record->end_time) out["end_time"] = record->end_time->value();
  out["events"] = nlohmann::json::array();
  for (const auto& e : *events) {
    out["events"].push_back({{"time", e.time.value()},
                             {"from", e.from_state},
                             {"to", e.to_state},
                             {"reason", e.reason}});
  }
  out["tasks"] = nlohmann::json::array();
  for (const auto& t : *tasks) {
    nlohmann::json task = {
        {"index", t.task_index},
        {"allocation_id", t.allocation_id},
        {"generation", t.generation},
        {"node", t.node},
        {"state", t.state},
        {"allocation", nlohmann::json::parse(t.allocation_json, nullptr, false)}};
    if (t.exit_code) task["exit_code"] = *t.exit_code;
    if (t.signal) task["signal"] = *t.signal;
    out["tasks"].push_back(task);
  }
  std::lock_guard lock(mu_);
  if (auto reason = scheduler_->PendingReasonOf(id)) {
    out["pending_reason"] = {{"code", reason->code}, {"message", reason->message}};
  }
  return out;
}

Result<nlohmann::json> Controller::ListJobs(const Principal& who,
                                            const std::vector<std::string>& states,
                                            bool all_projects) {
  store::JobFilter filter;
  filter.states = states;
  if (!who.admin || !all_projects) {
    if (!who.admin) {
      filter.projects = who.projects;
      if (filter.projects.empty()) return nlohmann::json::array();
    }
    if (!all_projects) filter.users = {who.name};
  }
  auto jobs = store_.ListJobs(filter);
  if (!jobs.ok()) return jobs.status();
  nlohmann::json out = nlohmann::json::array();
  std::lock_guard lock(mu_);
  for (const auto& j : *jobs) {
    nlohmann::json row = {{"id", j.id.value()},
                          {"name", j.name},
                          {"user", j.user},
                          {"project", j.project},
                          {"state", j.state},
                          {"priority", j.priority},
                          {"submit_time", j.submit_time.value()},
                          {"reason", j.reason}};
    if (auto reason = scheduler_->PendingReasonOf(j.id)) {
      row["pending_reason"] = {{"code", reason->code}, {"message", reason->message}};
    }
    out.push_back(row);
  }
  return out;
}

Result<std::string> Controller::LogPath(const Principal& who, JobId id, int task,
                                        const std::string& stream) {
  if (stream != "stdout" && stream != "stderr") {
    return InvalidArgument("field 'stream': must be stdout or stderr");
  }
  auto record = store_.GetJob(id);
  if (!record.ok()) return record.status();
  if (!who.CanAccessProject(record->project)) {
    return NotFound("job " + std::to_string(id.value()) + " not found");
  }
  return config_.logs_dir + "/" + std::to_string(id.value()) + "/" + std::to_string(task) + "-g" +
         std::to_string(record->restarts + 1) + "." + stream;
}

// --- Scheduling ------------------------------------------------------------------------------

void Controller::ScheduleLocked() {
  const Seconds now = clock_.Now();
  for (const sched::JobStart& start : scheduler_->Schedule()) {
    auto it = jobs_.find(start.job);
    if (it == jobs_.end()) continue;
    LiveJob& job = it->second;
    std::vector<store::TaskRecord> tasks;
    bool ok = true;
    for (size_t i = 0; i < start.tasks.size(); ++i) {
      auto alloc_id = store_.NextAllocationId();
      if (!alloc_id.ok()) {
        ok = false;
        break;
      }
      const std::string& node = scheduler_->state().node(start.tasks[i].node).name;
      store::TaskRecord t;
      t.job = job.record.id;
      t.task_index = static_cast<int>(i);
      t.allocation_id = *alloc_id;
      t.generation = job.record.restarts + 1;
      t.node = node;
      t.allocation_json = AllocationJson(start.tasks[i], node).dump();
      t.state = "assigned";
      tasks.push_back(std::move(t));
    }
    // Committed before any agent hears of it; on failure the job goes back to the queue.
    if (!ok || !store_.AssignJob(job.record.id, tasks, now).ok()) {
      (void)scheduler_->Finish(job.record.id);
      (void)scheduler_->Submit(
          ToModelJob(job.spec, job.record.id, job.record.user, job.record.submit_time));
      continue;
    }
    job.record.state = "starting";
    job.tasks = std::move(tasks);
    IndexAllocationsLocked(job);
    NotifyNodesLocked(job);
  }
}

void Controller::NotifyNodesLocked(const LiveJob& job) {
  for (const auto& t : job.tasks) {
    auto n = nodes_.find(t.node);
    if (n != nodes_.end()) ++n->second.version;
  }
  changed_.notify_all();
}

void Controller::EndJobLocked(LiveJob& job, std::string_view state, const std::string& reason) {
  const JobId id = job.record.id;
  (void)store_.TransitionJob(id, job.record.state, std::string(state), reason, clock_.Now());
  (void)scheduler_->Finish(id);  // releases the allocations of a started job; no-op otherwise
  ForgetAllocationsLocked(job);
  jobs_.erase(id);
}

void Controller::IndexAllocationsLocked(const LiveJob& job) {
  for (const auto& t : job.tasks) {
    job_of_allocation_[t.allocation_id] = job.record.id;
    jobs_on_node_[t.node].insert(job.record.id);
  }
}

void Controller::ForgetAllocationsLocked(const LiveJob& job) {
  constexpr size_t kRecentAllocations = 10000;
  for (const auto& t : job.tasks) {
    job_of_allocation_.erase(t.allocation_id);
    if (auto on = jobs_on_node_.find(t.node); on != jobs_on_node_.end()) {
      on->second.erase(job.record.id);
      if (on->second.empty()) jobs_on_node_.erase(on);
    }
    ended_allocations_[t.allocation_id] = {job.record.id, t.task_index, t.generation, t.node};
  }
  while (ended_allocations_.size() > kRecentAllocations) {
    ended_allocations_.erase(ended_allocations_.begin());
  }
}

void Controller::RequeueOrEndLocked(LiveJob& job, std::string_view end_state,
                                    const std::string& reason) {
  if (job.record.restarts >= job.spec.max_restarts || job.cancel_requested) {
    EndJobLocked(job, end_state, reason);
    return;
  }
  const JobId id = job.record.id;
  const std::string why = reason + "; requeued (restart " +
                          std::to_string(job.record.restarts + 1) + " of " +
                          std::to_string(job.spec.max_restarts) + ")";
  if (!store_.TransitionJob(id, job.record.state, "pending", why, clock_.Now()).ok()) {
    EndJobLocked(job, end_state, reason);
    return;
  }
  (void)scheduler_->Finish(id);
  ForgetAllocationsLocked(job);
  job.tasks.clear();
  job.failing = false;
  job.failure.clear();
  job.record.state = "pending";
  ++job.record.restarts;
  (void)scheduler_->Submit(ToModelJob(job.spec, id, job.record.user, job.record.submit_time));
  wake_ = true;
}

void Controller::EvaluateJobLocked(LiveJob& job) {
  bool all_ended = !job.tasks.empty();
  bool all_running = !job.tasks.empty();
  for (const auto& t : job.tasks) {
    all_ended &= IsTerminalTask(t.state);
    all_running &= t.state == "running";
    if (IsTerminalTask(t.state) && TaskFailed(t) && !job.failing && !job.cancel_requested) {
      job.failing = true;
      job.failure = DescribeEnd(t);
      NotifyNodesLocked(job);  // the rest of the gang is stopped
    }
  }
  if (all_running && job.record.state == "starting") {
    if (store_
            .TransitionJob(job.record.id, "starting", "running", "all tasks running", clock_.Now())
            .ok()) {
      job.record.state = "running";
    }
  }
  if (!all_ended) return;
  if (job.cancel_requested) {
    EndJobLocked(job, "cancelled", job.failure);
  } else if (job.failing) {
    RequeueOrEndLocked(job, "failed", job.failure);
  } else {
    EndJobLocked(job, "succeeded", "all tasks exited with code 0");
  }
}

// --- Nodes and agents ------------------------------------------------------------------------

Status Controller::AddNodeToSchedulerLocked(const std::string& name,
                                            const nlohmann::json& inventory) {
  auto node = NodeFromInventory(name, inventory);
  if (!node.ok()) return node.status();
  auto added = scheduler_->AddNode(*node);
  return added.ok() ? Status::Ok() : added.status();
}

Result<std::string> Controller::RegisterNode(const std::string& name,
                                             const nlohmann::json& inventory) {
  if (name.empty() || name.size() > 253) return InvalidArgument("field 'name': 1..253 characters");
  auto token = GenerateToken();
  if (!token.ok()) return token.status();
  std::unique_lock lock(mu_);
  auto it = nodes_.find(name);
  const bool known = it != nodes_.end() && it->second.state != "lost";
  if (!known) {
    CORRAL_RETURN_IF_ERROR(AddNodeToSchedulerLocked(name, inventory));
  }
  LiveNode& node = nodes_[name];
  if (!known) {
    node.inventory = inventory;
    node.state = "ready";
  }
  node.token_hash = HashToken(*token);
  node.last_heartbeat = clock_.Now();
  ++node.version;
  store::NodeRecord record{name, node.inventory.dump(), node.state, node.last_heartbeat};
  CORRAL_RETURN_IF_ERROR(store_.UpsertNode(record));
  wake_ = true;
  lock.unlock();
  changed_.notify_all();
  return *token;
}

bool Controller::AuthenticateNode(const std::string& name, const std::string& token) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  return it != nodes_.end() && !it->second.token_hash.empty() &&
         SecureEquals(it->second.token_hash, HashToken(token));
}

void Controller::CheckNodesLocked() {
  const Seconds now = clock_.Now();
  for (auto& [name, node] : nodes_) {
    if (node.state == "lost" || now - node.last_heartbeat <= config_.node_timeout) continue;
    node.state = "lost";
    node.token_hash.clear();  // it must register again; its stale tasks are then killed
    (void)store_.UpsertNode({name, node.inventory.dump(), "lost", node.last_heartbeat});
    auto affected = scheduler_->RemoveNode(name);
    if (!affected.ok()) continue;
    for (JobId id : *affected) {
      auto it = jobs_.find(id);
      if (it == jobs_.end()) continue;
      LiveJob& job = it->second;
      for (auto& t : job.tasks) {
        if (!IsTerminalTask(t.state)) {
          t.state = t.node == name ? "lost" : "killed";
          t.end_time = now;
          (void)store_.UpdateTask(t);
        }
      }
      // Tasks of this job on other nodes are now stale and get killed at their next heartbeat.
      NotifyNodesLocked(job);
      RequeueOrEndLocked(job, "lost",
                         "node " + name + " lost (no heartbeat for " +
                             std::to_string(config_.node_timeout.value()) + " s)");
    }
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
  if (node.state == "lost") return FailedPrecondition("node '" + name + "' is lost");
  const bool schedulable = action == "uncordon";
  CORRAL_RETURN_IF_ERROR(scheduler_->SetSchedulable(name, schedulable));
  node.state = action == "uncordon" ? "ready" : (action == "drain" ? "drained" : "cordoned");
  wake_ = true;
  return store_.UpsertNode({name, node.inventory.dump(), node.state, node.last_heartbeat});
}

nlohmann::json Controller::Nodes() {
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  const auto& state = scheduler_->state();
  for (const auto& [name, node] : nodes_) {
    nlohmann::json row = {{"name", name},
                          {"state", node.state},
                          {"last_heartbeat", node.last_heartbeat.value()},
                          {"gpu_model", node.inventory.value("gpu_model", "")},
                          {"gpus", node.inventory.value("gpus", nlohmann::json::array()).size()},
                          {"cpu_milli", node.inventory.value("cpu_milli", int64_t{0})},
                          {"memory_mib", node.inventory.value("memory_mib", int64_t{0})}};
    const sched::NodeIndex n = state.FindNode(name);
    if (n >= 0) {
      row["gpu_free_milli"] = state.node(n).gpu_free;
      row["cpu_free_milli"] = state.node(n).cpu_free;
      row["memory_free_mib"] = state.node(n).memory_free;
    }
    out.push_back(row);
  }
  return out;
}

nlohmann::json Controller::LaunchFor(const LiveJob& job, const store::TaskRecord& t) const {
  auto a = nlohmann::json::parse(t.allocation_json, nullptr, false);
  nlohmann::json gpus = nlohmann::json::array();
  int gpu_milli = 0;
  for (const auto& g : a.value("gpus", nlohmann::json::array())) {
    gpus.push_back(g.value("index", 0));
    gpu_milli = g.value("milli", 0);
  }
  return {{"job_id", job.record.id.value()},
          {"task_index", t.task_index},
          {"tasks", job.spec.tasks},
          {"allocation_id", t.allocation_id},
          {"generation", t.generation},
          {"argv", job.spec.command},
          {"shell", job.spec.shell},
          {"workdir", job.spec.workdir},
          {"env", job.spec.env},
          {"gpus", gpus},
          {"gpu_milli", gpu_milli},
          {"cpu_milli", a.value("cpu_milli", int64_t{0})},
          {"memory_mib", a.value("memory_mib", int64_t{0})},
          {"time_limit_s", job.spec.time_limit_s},
          {"user", job.record.user},
          {"project", job.record.project}};
}

nlohmann::json Controller::ResponseForLocked(const std::string& name) {
  nlohmann::json run = nlohmann::json::array(), kill = nlohmann::json::array();
  // Only the jobs with tasks on this node: a heartbeat costs O(the node's tasks), not O(jobs).
  static const std::set<JobId> kNone;
  auto on = jobs_on_node_.find(name);
  for (JobId id : on == jobs_on_node_.end() ? kNone : on->second) {
    const LiveJob& job = jobs_.at(id);
    const bool stopping = job.cancel_requested || job.failing;
    for (const auto& t : job.tasks) {
      if (t.node != name) continue;
      if (!stopping && t.state == "assigned") run.push_back(LaunchFor(job, t));
      if (stopping && t.state == "running") {
        kill.push_back({{"allocation_id", t.allocation_id},
                        {"generation", t.generation},
                        {"grace_s", config_.kill_grace.value()},
                        {"reason", job.failure}});
      }
    }
  }
  return {{"run", run}, {"kill", kill}, {"heartbeat_interval_s", config_.heartbeat_interval_s}};
}

void Controller::ApplyTaskReportLocked(const std::string& node, const nlohmann::json& s,
                                       std::vector<nlohmann::json>& kills) {
  const int64_t alloc = s.value("allocation_id", int64_t{-1});
  const int64_t generation = s.value("generation", int64_t{-1});
  const std::string state = s.value("state", "");
  auto stale = [&](const std::string& why) {
    if (state == "running") {
      kills.push_back({{"allocation_id", alloc},
                       {"generation", generation},
                       {"grace_s", config_.kill_grace.value()},
                       {"reason", why}});
    }
  };
  auto owner = job_of_allocation_.find(alloc);
  if (owner == job_of_allocation_.end()) return stale("stale task: not assigned here any more");
  LiveJob& job = jobs_.at(owner->second);
  auto task = std::find_if(job.tasks.begin(), job.tasks.end(),
                           [&](const auto& t) { return t.allocation_id == alloc; });
  if (task == job.tasks.end() || task->generation != generation || task->node != node) {
    return stale("stale generation");
  }
  if (IsTerminalTask(task->state)) {
    if (state == "running") stale("task already ended on the server");
    return;
  }
  if (state == "running") {
    if (task->state == "assigned") {
      task->state = "running";
      task->start_time = Seconds(s.value("started_at", clock_.Now().value()));
      (void)store_.UpdateTask(*task);
      EvaluateJobLocked(job);
    }
    return;
  }
  // exited | killed | failed_to_start | lost
  task->state = state == "exited" ? "exited" : (state == "lost" ? "lost" : "killed");
  if (s.contains("exit_code") && !s["exit_code"].is_null())
    task->exit_code = s["exit_code"].get<int>();
  if (s.contains("signal") && !s["signal"].is_null()) task->signal = s["signal"].get<int>();
  if (state == "failed_to_start" && !task->exit_code) task->exit_code = 127;
  task->end_time = Seconds(s.value("ended_at", clock_.Now().value()));
  (void)store_.UpdateTask(*task);
  EvaluateJobLocked(job);
}

void Controller::WriteLogLocked(const std::string& node, const nlohmann::json& chunk) {
  const int64_t alloc = chunk.value("allocation_id", int64_t{-1});
  const int64_t generation = chunk.value("generation", int64_t{-1});
  const std::string stream = chunk.value("stream", "");
  if (config_.logs_dir.empty() || (stream != "stdout" && stream != "stderr")) return;
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
  const std::string data = chunk.value("data", "");
  const int64_t offset = chunk.value("offset", int64_t{-1});
  if (offset < 0) return;
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

Result<nlohmann::json> Controller::Heartbeat(const std::string& name, const nlohmann::json& report,
                                             int wait_ms) {
  std::unique_lock lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end() || it->second.state == "lost") {
    return NotFound("node '" + name + "' is not registered");
  }
  it->second.last_heartbeat = clock_.Now();
  // Output first: a task's last lines arrive in the same report as its end.
  if (report.contains("logs") && report["logs"].is_array()) {
    for (const auto& chunk : report["logs"]) {
      if (chunk.is_object()) WriteLogLocked(name, chunk);
    }
  }
  std::vector<nlohmann::json> kills;
  if (report.contains("tasks") && report["tasks"].is_array()) {
    for (const auto& s : report["tasks"]) {
      if (s.is_object()) ApplyTaskReportLocked(name, s, kills);
    }
  }
  nlohmann::json response = ResponseForLocked(name);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(std::clamp(wait_ms, 0, 30000));
  while (response["run"].empty() && response["kill"].empty() && kills.empty() && !stopping_) {
    const uint64_t seen = nodes_[name].version;
    if (!changed_.wait_until(lock, deadline,
                             [&] { return stopping_ || nodes_[name].version != seen; })) {
      break;
    }
    response = ResponseForLocked(name);
  }
  for (auto& k : kills) response["kill"].push_back(std::move(k));
  return response;
}

}  // namespace corral::server
