// The agent's runtime thread: the one thread that drives the node's Runtime, which is not
// thread-safe (runtime.h). It applies the orders it is handed (launches and kills, in the order
// given), learns of task ends as soon as the runtime notices them (Runtime::ExitNoticeFd) and
// otherwise polls every poll interval (kill graces and time limits run on those polls), and
// publishes what the runtime runs as a snapshot for the threads that report to the server.
//
// Why a thread of its own: starting a task spawns a supervisor and waits for the task's exec
// (about 20 ms on a VM, far more for a container or a slow user lookup), so a 600-task gang
// takes tens of seconds to start. Started on the heartbeat's thread, that stalled heartbeats until
// the server declared the node lost. Here the reporters never wait for a launch: they read the last
// snapshot, which also lists the launches accepted and not yet started, so that the server neither
// sends them again nor takes them for lost.
//
// Threads: every public method is thread-safe. The runtime is called from the runtime thread
// only (once Start() ran), except Runtime::ReadLog, which reporters call themselves.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "agent/runtime.h"
#include "protocol/agent_messages.h"

namespace corral::agent {

// Stop a task: Runtime::Kill's arguments, as the server's answers order it.
using KillOrder = protocol::StopOrder;

// One task as the last poll saw it.
struct SnapshotTask {
  TaskStatus status;
  // The snapshot version in which `status` last changed (or the task appeared): a report that
  // tells the server only what changed carries the tasks changed after what it already has.
  int64_t changed_at = 0;
};

// What the runtime runs, for reports. Cheap to copy: the lists are shared, never modified.
struct RuntimeSnapshot {
  // Grows whenever a task appears, goes, or changes its status; 0 before the first poll.
  int64_t version = 0;
  std::shared_ptr<const std::vector<SnapshotTask>> tasks;   // every task it knows, by key
  std::shared_ptr<const std::vector<RunningTask>> running;  // Runtime::Running(), for GPU metrics
  // Launches accepted and not started (or not yet in `tasks`), in the order they will start: as
  // of the moment Snapshot() was called, so that a launch handed over before that call is in
  // either list.
  std::vector<TaskKey> starting;
};

class RuntimeThread {
 public:
  struct Options {
    // Poll() at least this often: kill graces, time limits, and ends the runtime cannot
    // notice by itself.
    std::chrono::milliseconds poll_interval{1000};
    // After an exit notice, how long to let more ends arrive before polling, so that the tasks
    // of a gang that end together leave in one report.
    std::chrono::milliseconds exit_batch{5};
    // While a batch of orders is applied, the snapshot is published at least this often.
    std::chrono::milliseconds publish_interval{20};
  };

  // Borrows `runtime`, which must outlive this object. `on_change` is called on the runtime
  // thread after a snapshot is published in which a task appeared, went, or changed its state;
  // it must not block (it wakes a reporter).
  RuntimeThread(Runtime& runtime, Options options, std::function<void()> on_change);
  // Stop().
  ~RuntimeThread();
  RuntimeThread(const RuntimeThread&) = delete;
  RuntimeThread& operator=(const RuntimeThread&) = delete;

  // Polls the runtime and publishes the first snapshot (the tasks it adopted) before it
  // returns, then starts the thread. Once.
  void Start();
  // Ends the thread once the order it is applying is done; orders not applied yet are dropped
  // (the next agent gets them again from the server). Idempotent.
  void Stop();

  // Queues a launch. Ignored when the task is queued, starting, or known to the runtime (the
  // server repeats launches until a report lists them).
  void Launch(TaskLaunch launch);
  // Queues a kill, after the orders before it. A kill of a launch still queued removes the
  // launch instead: the task never starts. A second kill of a queued kill keeps the shorter
  // grace.
  void Kill(KillOrder kill);
  // Drops ended tasks whose end and whole output the server has (Runtime::Forget); one that
  // cannot be dropped yet stays and may be handed again.
  void Forget(std::vector<TaskKey> keys);

  RuntimeSnapshot Snapshot() const;

  // Fencing (docs/control-plane.md, "Fencing"), as the server's registration answer says: once
  // no server was reached for `after`, the thread stops every running task whose launch is
  // requeue-able (SIGTERM, `grace`, SIGKILL; end cause kFenced) and drops the requeue-able
  // launches not started yet, once, before the server declares the node unreachable and
  // requeues their jobs elsewhere (also in the middle of a long batch of orders). Other tasks
  // keep running.
  struct Fence {
    std::chrono::milliseconds after{10'000};
    Seconds grace{10};
  };
  // Sets the fence (nullopt: never fence, as with a server older than fencing). The fence clock
  // starts again, as if a server was reached now.
  void SetFence(std::optional<Fence> fence);
  // A server answered a request: the fence clock starts again, and a fenced node may be fenced
  // again after another `after` without servers (what it fenced stays stopped).
  void Reached();

 private:
  using Order = std::variant<TaskLaunch, KillOrder>;
  static const TaskKey& KeyOf(const Order& order);

  void Main();
  // Blocks until there is something to do: an order, a forget, Stop(), an exit notice, or
  // `next_poll`. True when an exit notice is waiting.
  bool Wait(std::chrono::steady_clock::time_point next_poll);
  void Signal();  // wakes Wait()
  // True when the runtime's exit notice descriptor is readable now.
  bool ExitNoticePending() const;
  // The least time between two polls that exit notices ask for: exit_batch, or four times
  // what the last poll took, so that a stream of ends never has the thread only polling.
  std::chrono::steady_clock::duration PollGap() const;
  // Applies queued orders one by one until none is left, polling meanwhile when an exit
  // notice or the poll interval asks for it, and publishing every publish_interval.
  void ApplyOrders();
  void ApplyForgets();
  void PollRuntime();
  // Stops the requeue-able running tasks when no server was reached for the fence's `after`
  // (once per time cut off).
  void FenceIfCutOff();
  // When FenceIfCutOff is due (time_point::max(): never).
  std::chrono::steady_clock::time_point FenceDue() const;
  // Records `status` for its task when it is new or changed.
  void Record(const TaskStatus& status);
  // Makes the recorded tasks the published snapshot, then calls on_change when a task
  // appeared or changed its state since the last Publish().
  void Publish();

  Runtime& runtime_;
  const Options options_;
  const std::function<void()> on_change_;
  int wake_fd_ = -1;  // eventfd: Signal() -> Wait()

  // The runtime thread's own: the tasks as last recorded, the version of their last change,
  // and when it last published and polled.
  std::map<TaskKey, SnapshotTask> tasks_;
  int64_t version_ = 0;
  bool unpublished_ = false;             // tasks_ changed since the last Publish()
  bool unpublished_transition_ = false;  // ... and a task appeared or changed its state
  std::chrono::steady_clock::time_point published_at_;
  std::chrono::steady_clock::time_point last_poll_;
  std::chrono::steady_clock::duration last_poll_cost_{0};
  std::chrono::steady_clock::time_point next_poll_;

  mutable std::mutex mu_;  // guards what follows
  std::deque<Order> orders_;
  std::vector<TaskKey> forgets_;
  // Launches taken off the queue whose task is not in the published snapshot yet: still
  // "starting" to the reporters.
  std::vector<TaskKey> unpublished_starts_;
  int64_t published_version_ = 0;
  std::shared_ptr<const std::vector<SnapshotTask>> published_tasks_;
  std::shared_ptr<const std::vector<RunningTask>> published_running_;
  bool stopping_ = false;
  std::optional<Fence> fence_;
  std::chrono::steady_clock::time_point reached_;  // a server last answered
  bool fenced_ = false;                            // fenced since reached_
  std::thread thread_;
};

}  // namespace corral::agent
