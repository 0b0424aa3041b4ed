#include "agent/runtime_thread.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace corral::agent {

namespace {

using Clock = std::chrono::steady_clock;

bool SameStatus(const TaskStatus& a, const TaskStatus& b) {
  return a.job_id == b.job_id && a.task_index == b.task_index && a.state == b.state &&
         a.pid == b.pid && a.exit_code == b.exit_code && a.signal == b.signal &&
         a.started_at == b.started_at && a.ended_at == b.ended_at && a.message == b.message;
}

}  // namespace

RuntimeThread::RuntimeThread(Runtime& runtime, Options options, std::function<void()> on_change)
    : runtime_(runtime),
      options_(options),
      on_change_(std::move(on_change)),
      wake_fd_(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)),
      published_tasks_(std::make_shared<const std::vector<SnapshotTask>>()),
      published_running_(std::make_shared<const std::vector<RunningTask>>()) {}

RuntimeThread::~RuntimeThread() {
  Stop();
  if (wake_fd_ >= 0) close(wake_fd_);
}

void RuntimeThread::Start() {
  {
    std::lock_guard lock(mu_);
    if (thread_.joinable() || stopping_) return;
  }
  // On the caller's thread, before any report can be made: a first report without the tasks
  // the runtime adopted would have the server take them for lost.
  PollRuntime();
  Publish();
  std::lock_guard lock(mu_);
  thread_ = std::thread([this] { Main(); });
}

void RuntimeThread::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  Signal();
  if (thread_.joinable()) thread_.join();
}

const TaskKey& RuntimeThread::KeyOf(const Order& order) {
  if (const auto* launch = std::get_if<TaskLaunch>(&order)) return launch->key;
  return std::get<KillOrder>(order).key;
}

void RuntimeThread::Launch(TaskLaunch launch) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    for (const Order& o : orders_) {
      if (std::holds_alternative<TaskLaunch>(o) && KeyOf(o) == launch.key) return;
    }
    if (std::find(unpublished_starts_.begin(), unpublished_starts_.end(), launch.key) !=
        unpublished_starts_.end()) {
      return;
    }
    const auto known = std::lower_bound(
        published_tasks_->begin(), published_tasks_->end(), launch.key,
        [](const SnapshotTask& t, const TaskKey& key) { return t.status.key < key; });
    if (known != published_tasks_->end() && known->status.key == launch.key) return;
    orders_.push_back(std::move(launch));
  }
  Signal();
}

void RuntimeThread::Kill(KillOrder kill) {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    for (auto it = orders_.begin(); it != orders_.end(); ++it) {
      if (KeyOf(*it) != kill.key) continue;
      if (std::holds_alternative<TaskLaunch>(*it)) {
        orders_.erase(it);  // never started: nothing to stop
        return;
      }
      KillOrder& queued = std::get<KillOrder>(*it);
      queued.grace = std::min(queued.grace, kill.grace);
      return;
    }
    orders_.push_back(std::move(kill));
  }
  Signal();
}

void RuntimeThread::Forget(std::vector<TaskKey> keys) {
  if (keys.empty()) return;
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    forgets_.insert(forgets_.end(), keys.begin(), keys.end());
  }
  Signal();
}

RuntimeSnapshot RuntimeThread::Snapshot() const {
  std::lock_guard lock(mu_);
  RuntimeSnapshot s;
  s.version = published_version_;
  s.tasks = published_tasks_;
  s.running = published_running_;
  s.starting = unpublished_starts_;
  for (const Order& o : orders_) {
    if (std::holds_alternative<TaskLaunch>(o)) s.starting.push_back(KeyOf(o));
  }
  return s;
}

void RuntimeThread::Signal() {
  const uint64_t one = 1;
  if (wake_fd_ >= 0) (void)!write(wake_fd_, &one, sizeof(one));
}

bool RuntimeThread::ExitNoticePending() const {
  pollfd p{runtime_.ExitNoticeFd(), POLLIN, 0};
  return p.fd >= 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

bool RuntimeThread::Wait(Clock::time_point next_poll) {
  pollfd fds[2] = {{wake_fd_, POLLIN, 0}, {runtime_.ExitNoticeFd(), POLLIN, 0}};
  const nfds_t count = fds[1].fd >= 0 ? 2 : 1;
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(next_poll - Clock::now()).count();
  // Rounded up: waking a little early would only poll again at once.
  const int timeout = static_cast<int>(std::clamp<int64_t>(left + 1, 0, 60'000));
  if (poll(fds, count, timeout) <= 0) return false;  // timed out, or EINTR: the caller re-checks
  if (fds[0].revents & POLLIN) {
    uint64_t counter = 0;
    (void)!read(wake_fd_, &counter, sizeof(counter));
  }
  return count == 2 && (fds[1].revents & POLLIN) != 0;
}

void RuntimeThread::Main() {
  while (true) {
    const bool notice = Wait(std::min(next_poll_, FenceDue()));
    {
      std::lock_guard lock(mu_);
      if (stopping_) return;
    }
    ApplyForgets();
    ApplyOrders();
    FenceIfCutOff();
    if (notice) {
      // Let the other ends of a burst arrive; never poll more than a fifth of the time.
      const auto due = last_poll_ + PollGap();
      if (Clock::now() < due) std::this_thread::sleep_until(due);
    }
    if (notice || Clock::now() >= next_poll_) PollRuntime();
    if (unpublished_) Publish();
  }
}

Clock::duration RuntimeThread::PollGap() const {
  return std::max<Clock::duration>(options_.exit_batch, 4 * last_poll_cost_);
}

void RuntimeThread::ApplyOrders() {
  while (true) {
    Order order;
    {
      std::lock_guard lock(mu_);
      if (orders_.empty() || stopping_) return;
      order = std::move(orders_.front());
      orders_.pop_front();
      if (std::holds_alternative<TaskLaunch>(order)) unpublished_starts_.push_back(KeyOf(order));
    }
    if (const auto* launch = std::get_if<TaskLaunch>(&order)) {
      Record(runtime_.Start(*launch));
    } else {
      const KillOrder& kill = std::get<KillOrder>(order);
      // NotFound: a task this runtime never had (the server's kills are repeated until a report
      // says the task ended); nothing to do.
      (void)runtime_.Kill(kill.key, kill.grace, kill.reason);
    }
    // A long batch (a 600-task gang starting) does not hold a fence back.
    FenceIfCutOff();
    // Ends that arrive while a long batch is applied are reported during it, not after it.
    const auto now = Clock::now();
    if (now >= next_poll_ || (now >= last_poll_ + PollGap() && ExitNoticePending())) {
      PollRuntime();
    }
    if (unpublished_ && Clock::now() >= published_at_ + options_.publish_interval) Publish();
  }
}

void RuntimeThread::SetFence(std::optional<Fence> fence) {
  {
    std::lock_guard lock(mu_);
    fence_ = fence;
    reached_ = Clock::now();
    fenced_ = false;
  }
  Signal();
}

void RuntimeThread::Reached() {
  bool rearmed;
  {
    std::lock_guard lock(mu_);
    reached_ = Clock::now();
    rearmed = fenced_;
    fenced_ = false;
  }
  if (rearmed) Signal();  // the thread waits with no fence deadline: it takes the new one
}

Clock::time_point RuntimeThread::FenceDue() const {
  std::lock_guard lock(mu_);
  if (!fence_ || fenced_) return Clock::time_point::max();
  return reached_ + fence_->after;
}

void RuntimeThread::FenceIfCutOff() {
  Fence fence;
  {
    std::lock_guard lock(mu_);
    if (!fence_ || fenced_ || Clock::now() - reached_ < fence_->after) return;
    fenced_ = true;
    fence = *fence_;
    // Requeue-able launches not started yet never start (heard again in time, the server sends
    // them again: they are no longer listed as starting).
    std::erase_if(orders_, [](const Order& o) {
      const auto* launch = std::get_if<TaskLaunch>(&o);
      return launch != nullptr && launch->requeueable;
    });
  }
  const auto after_s = std::chrono::duration_cast<std::chrono::seconds>(fence.after).count();
  const std::string reason = "fenced: no server reached for " + std::to_string(after_s) +
                             " s; its job is requeued elsewhere";
  for (const RunningTask& t : runtime_.Running()) {
    if (!t.launch.requeueable) continue;
    (void)runtime_.Kill(t.launch.key, fence.grace, reason, model::TaskEndCause::kFenced);
  }
  // Their SIGKILL is due `grace` from now: the next polls send it.
  PollRuntime();
}

void RuntimeThread::ApplyForgets() {
  std::vector<TaskKey> keys;
  {
    std::lock_guard lock(mu_);
    keys.swap(forgets_);
  }
  for (const TaskKey& key : keys) {
    if (tasks_.count(key) == 0 || !runtime_.Forget(key).ok()) continue;
    tasks_.erase(key);
    ++version_;
    unpublished_ = true;
  }
}

void RuntimeThread::PollRuntime() {
  const auto start = Clock::now();
  std::vector<TaskStatus> statuses = runtime_.Poll();  // sorted by key, like tasks_
  auto known = tasks_.begin();
  for (const TaskStatus& s : statuses) {
    // Tasks the runtime no longer has (none should: it forgets only when told) go.
    while (known != tasks_.end() && known->first < s.key) {
      known = tasks_.erase(known);
      ++version_;
      unpublished_ = true;
    }
    Record(s);
    known = tasks_.upper_bound(s.key);
  }
  while (known != tasks_.end()) {
    known = tasks_.erase(known);
    ++version_;
    unpublished_ = true;
  }
  last_poll_ = Clock::now();
  last_poll_cost_ = last_poll_ - start;
  next_poll_ = last_poll_ + options_.poll_interval;
}

void RuntimeThread::Record(const TaskStatus& status) {
  auto it = tasks_.find(status.key);
  if (it != tasks_.end() && SameStatus(it->second.status, status)) return;
  unpublished_transition_ |= it == tasks_.end() || it->second.status.state != status.state;
  ++version_;
  unpublished_ = true;
  tasks_[status.key] = SnapshotTask{status, version_};
}

void RuntimeThread::Publish() {
  auto tasks = std::make_shared<std::vector<SnapshotTask>>();
  tasks->reserve(tasks_.size());
  for (const auto& [key, task] : tasks_) tasks->push_back(task);
  auto running = std::make_shared<const std::vector<RunningTask>>(runtime_.Running());
  {
    std::lock_guard lock(mu_);
    published_version_ = version_;
    published_tasks_ = std::move(tasks);
    published_running_ = std::move(running);
    // Every launch taken off the queue has its status in tasks_ by now.
    unpublished_starts_.clear();
  }
  published_at_ = Clock::now();
  unpublished_ = false;
  const bool transition = unpublished_transition_;
  unpublished_transition_ = false;
  if (transition && on_change_) on_change_();
}

}  // namespace corral::agent
