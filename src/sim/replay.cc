#include "sim/replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <queue>

#include "common/rng.h"
#include "sched/fragmentation.h"

namespace corral::sim {

Distribution Summarize(std::vector<double> values) {
  Distribution d;
  if (values.empty()) return d;
  std::sort(values.begin(), values.end());
  d.mean = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
  auto rank = [&](double q) {
    size_t i = static_cast<size_t>(std::ceil(q * static_cast<double>(values.size())));
    return values[std::clamp<size_t>(i, 1, values.size()) - 1];
  };
  d.p50 = rank(0.50);
  d.p95 = rank(0.95);
  d.p99 = rank(0.99);
  return d;
}

Result<std::vector<model::Node>> ScaleNodes(const std::vector<model::Node>& nodes, double factor,
                                            uint64_t seed) {
  constexpr double kMaxFactor = 1000;
  constexpr size_t kMaxNodes = 1'000'000;
  if (!(factor > 0 && factor <= kMaxFactor)) {
    return InvalidArgument("--scale-nodes: must be > 0 and at most 1000");
  }
  if (factor * static_cast<double>(nodes.size()) > static_cast<double>(kMaxNodes)) {
    return InvalidArgument("--scale-nodes: would make more than 1,000,000 nodes");
  }
  if (factor <= 1.0) {
    std::vector<size_t> order(nodes.size());
    std::iota(order.begin(), order.end(), 0);
    SeededRng rng(seed);
    rng.Shuffle(order);
    size_t keep = std::max<size_t>(1, static_cast<size_t>(std::llround(factor * nodes.size())));
    order.resize(std::min(keep, order.size()));
    std::sort(order.begin(), order.end());
    std::vector<model::Node> out;
    for (size_t i : order) out.push_back(nodes[i]);
    return out;
  }
  std::vector<model::Node> out = nodes;
  const size_t target = static_cast<size_t>(std::llround(factor * nodes.size()));
  for (int copy = 1; out.size() < target; ++copy) {
    for (const auto& n : nodes) {
      if (out.size() >= target) break;
      model::Node c = n;
      c.name += "-c" + std::to_string(copy);
      out.push_back(std::move(c));
    }
  }
  return out;
}

namespace {

// Incremental cluster metrics: allocation and fragmentation integrated over virtual time.
class ClusterMeter {
 public:
  ClusterMeter(const sched::ClusterState& state, std::vector<sched::TypicalTask> typical,
               bool track_fragmentation)
      : state_(state), meter_(std::move(typical)), track_(track_fragmentation) {
    meter_.Resolve(state_);
    node_frag_.assign(state_.NodeSlots(), 0);
    for (sched::NodeIndex n = 0; n < state_.NodeSlots(); ++n) Touch(n);
  }

  // Re-measures a node whose state changed.
  void Touch(sched::NodeIndex n) {
    if (!track_ || meter_.total_count() == 0) return;
    int64_t now = meter_.Weighted(sched::ViewOf(state_.node(n), state_));
    frag_weighted_ += now - node_frag_[n];
    node_frag_[n] = now;
  }

  // Accounts the interval [last, t) at the current state, then moves to t.
  void AdvanceTo(int64_t t) {
    if (started_ && t > last_) {
      const double dt = static_cast<double>(t - last_);
      alloc_integral_ += dt * AllocPct();
      frag_integral_ += dt * FragPct();
    }
    if (!started_) started_ = true;
    last_ = t;
  }

  double AllocPct() const {
    const int64_t cap = state_.TotalGpuMilli();
    return cap > 0 ? 100.0 * static_cast<double>(cap - state_.FreeGpuMilli()) / cap : 0.0;
  }
  double FragPct() const {
    const int64_t cap = state_.TotalGpuMilli();
    if (cap == 0 || meter_.total_count() == 0) return 0.0;
    return 100.0 * static_cast<double>(frag_weighted_) / meter_.total_count() / cap;
  }
  double MeanAllocPct(int64_t span) const { return span > 0 ? alloc_integral_ / span : 0.0; }
  double MeanFragPct(int64_t span) const { return span > 0 ? frag_integral_ / span : 0.0; }

 private:
  const sched::ClusterState& state_;
  sched::FragmentationMeter meter_;
  bool track_;
  std::vector<int64_t> node_frag_;
  int64_t frag_weighted_ = 0;
  bool started_ = false;
  int64_t last_ = 0;
  double alloc_integral_ = 0, frag_integral_ = 0;
};

struct JobTimes {
  int64_t submit = 0, duration = 0, start = -1;
};

}  // namespace

Result<ReplayResult> RunReplay(const std::vector<model::Node>& nodes, const Trace& trace,
                               const ReplayConfig& config) {
  const auto wall_start = std::chrono::steady_clock::now();
  std::vector<model::TaskResources> all_tasks;
  all_tasks.reserve(trace.jobs.size());
  for (const auto& j : trace.jobs) all_tasks.push_back(j.job.resources);
  sched::PolicyContext context{sched::ComputeTypicalTasks(all_tasks)};

  auto scheduler = sched::Scheduler::Create(
      sched::SchedulerConfig{config.policy, config.order, config.blocking, config.seed}, context);
  if (!scheduler.ok()) return scheduler.status();
  sched::Scheduler& s = **scheduler;
  for (const auto& n : nodes) {
    auto added = s.AddNode(n);
    if (!added.ok()) return added.status();
  }

  // Arrivals in submit order (stable on file order), job ids mapped to trace positions.
  std::vector<size_t> arrivals(trace.jobs.size());
  std::iota(arrivals.begin(), arrivals.end(), 0);
  std::stable_sort(arrivals.begin(), arrivals.end(), [&](size_t a, size_t b) {
    return trace.jobs[a].job.submit_time < trace.jobs[b].job.submit_time;
  });
  std::unordered_map<JobId, size_t> index_of;
  std::vector<JobTimes> times(trace.jobs.size());
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    if (!index_of.emplace(trace.jobs[i].job.id, i).second) {
      return InvalidArgument("trace: job id " + std::to_string(trace.jobs[i].job.id.value()) +
                             " appears twice");
    }
    times[i].submit = trace.jobs[i].job.submit_time.value();
    times[i].duration = trace.jobs[i].duration.value();
  }

  ReplayResult result;
  result.policy = config.policy;
  result.jobs = static_cast<int64_t>(trace.jobs.size());
  if (trace.jobs.empty()) return result;

  ClusterMeter meter(s.state(), context.typical_tasks, config.track_fragmentation);
  using Completion = std::pair<int64_t, int64_t>;  // (end time, job id)
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> completions;
  const int64_t first_submit = times[arrivals.front()].submit;
  const int64_t span = std::max<int64_t>(1, times[arrivals.back()].submit - first_submit);
  const int64_t sample_every = std::max<int64_t>(1, span / std::max(1, config.timeline_points));
  int64_t next_sample = first_submit;
  int64_t last_end = first_submit;
  std::vector<double> jct, queue;
  jct.reserve(trace.jobs.size());
  queue.reserve(trace.jobs.size());

  size_t next_arrival = 0;
  while (next_arrival < arrivals.size() || !completions.empty()) {
    int64_t t = INT64_MAX;
    if (next_arrival < arrivals.size()) t = times[arrivals[next_arrival]].submit;
    if (!completions.empty()) t = std::min(t, completions.top().first);
    meter.AdvanceTo(t);

    while (!completions.empty() && completions.top().first == t) {
      JobId id(completions.top().second);
      completions.pop();
      std::vector<sched::Allocation> held = *s.AllocationsOf(id);
      (void)s.Finish(id);
      for (const auto& a : held) meter.Touch(a.node);
      const JobTimes& jt = times[index_of[id]];
      jct.push_back(static_cast<double>(t - jt.submit));
      last_end = std::max(last_end, t);
      ++result.completed;
    }
    while (next_arrival < arrivals.size() && times[arrivals[next_arrival]].submit == t) {
      const model::Job& job = trace.jobs[arrivals[next_arrival]].job;
      CORRAL_RETURN_IF_ERROR(s.Submit(job));
      ++next_arrival;
    }
    for (const sched::JobStart& start : s.Schedule(Seconds(t)).starts) {
      const size_t i = index_of[start.job];
      times[i].start = t;
      queue.push_back(static_cast<double>(t - times[i].submit));
      completions.emplace(t + times[i].duration, start.job.value());
      for (const auto& a : start.tasks) meter.Touch(a.node);
    }
    if (t >= next_sample) {
      result.timeline.push_back(ReplaySample{t, meter.AllocPct(), meter.FragPct(),
                                             static_cast<int64_t>(s.pending_count()),
                                             static_cast<int64_t>(s.running_count())});
      next_sample = t + sample_every;
    }
  }
  result.unfinished = static_cast<int64_t>(s.pending_count());
  result.jct_s = Summarize(std::move(jct));
  result.queue_s = Summarize(std::move(queue));
  result.makespan_s = last_end - first_submit;
  result.gpu_alloc_pct_mean = meter.MeanAllocPct(result.makespan_s);
  result.frag_pct_mean = meter.MeanFragPct(result.makespan_s);
  result.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_start)
          .count();
  return result;
}

}  // namespace corral::sim
