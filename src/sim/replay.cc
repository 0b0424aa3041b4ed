#include "sim/replay.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <queue>
#include <set>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "common/check.h"
#include "common/rng.h"
#include "sched/elastic_plan.h"
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
  d.p90 = rank(0.90);
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
  // % of capacity × seconds allocated so far.
  double AllocIntegral() const { return alloc_integral_; }
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

// Weighted max-min fair shares ("water-filling") of `capacity` among projects that want
// `demand` each, into `out` (one per project): a project that wants less than its weighted
// share of what is left gets what it wants, and the rest is shared again among the others.
// Projects wanting nothing get 0. `wanting` is scratch space, reused so that a pass allocates
// nothing.
void Entitlements(int64_t capacity, const std::vector<int64_t>& demand,
                  const std::vector<double>& weight, std::vector<size_t>& wanting,
                  std::vector<double>& out) {
  out.assign(demand.size(), 0.0);
  wanting.clear();
  double total_weight = 0;
  for (size_t p = 0; p < demand.size(); ++p) {
    if (demand[p] <= 0) continue;
    wanting.push_back(p);
    total_weight += weight[p];
  }
  // Least demand per unit of weight first: those are the ones satisfied in full.
  std::sort(wanting.begin(), wanting.end(), [&](size_t a, size_t b) {
    return static_cast<double>(demand[a]) / weight[a] < static_cast<double>(demand[b]) / weight[b];
  });
  double left = static_cast<double>(capacity);
  for (size_t k = 0; k < wanting.size(); ++k) {
    const size_t p = wanting[k];
    const double share = left * weight[p] / total_weight;
    if (static_cast<double>(demand[p]) <= share) {
      out[p] = static_cast<double>(demand[p]);
      left -= out[p];
      total_weight -= weight[p];
      continue;
    }
    for (size_t r = k; r < wanting.size(); ++r) {
      out[wanting[r]] = left * weight[wanting[r]] / total_weight;
    }
    break;
  }
}

// Per-project allocation and demand (milli-GPU) over virtual time, measured against each
// project's entitlement (see replay.h). The state changes between AdvanceTo(t), which integrates
// the interval before t at the state settled last, and Settle(t), which evaluates the state
// after the pass at t.
class ShareMeter {
 public:
  ShareMeter(int64_t capacity, std::vector<double> weights, std::vector<int64_t> first_submit)
      : capacity_(capacity),
        weight_(std::move(weights)),
        first_submit_(std::move(first_submit)),
        alloc_(weight_.size(), 0),
        demand_(weight_.size(), 0),
        entitled_(weight_.size(), 0.0),
        reached_(weight_.size()),
        alloc_integral_(weight_.size(), 0.0),
        share_integral_(weight_.size(), 0.0),
        share_time_(weight_.size(), 0) {}

  void Change(int project, int64_t alloc_delta, int64_t demand_delta) {
    alloc_[project] += alloc_delta;
    demand_[project] += demand_delta;
    changed_ = changed_ || alloc_delta != 0 || demand_delta != 0;
  }

  void AdvanceTo(int64_t t) {
    if (last_ && t > *last_) {
      const int64_t dt = t - *last_;
      int64_t total = 0;
      for (size_t p = 0; p < alloc_.size(); ++p) {
        alloc_integral_[p] += static_cast<double>(dt) * static_cast<double>(alloc_[p]);
        total += alloc_[p];
      }
      if (contended_) {
        contended_s_ += dt;
        jain_integral_ += static_cast<double>(dt) * jain_;
        contended_alloc_integral_ += static_cast<double>(dt) * static_cast<double>(total);
        for (size_t p = 0; p < alloc_.size(); ++p) {
          if (entitled_[p] <= 0) continue;
          share_integral_[p] += static_cast<double>(dt) * ShareOfEntitlement(p);
          share_time_[p] += dt;
        }
      }
    }
    last_ = t;
  }

  // Nothing to do when no allocation or demand changed since the last Settle: what it derives
  // depends on those alone (a project that had not reached 90% then has not now).
  void Settle(int64_t t) {
    if (!changed_) return;
    changed_ = false;
    Entitlements(capacity_, demand_, weight_, wanting_, entitled_);
    int wanting = 0;
    int64_t total_demand = 0;
    double sum = 0, sum_sq = 0;
    for (size_t p = 0; p < demand_.size(); ++p) {
      if (demand_[p] <= 0) continue;
      ++wanting;
      total_demand += demand_[p];
      const double x = ShareOfEntitlement(p);
      sum += x;
      sum_sq += x * x;
    }
    contended_ = wanting >= 2 && total_demand > capacity_;
    jain_ = sum_sq > 0 ? sum * sum / (wanting * sum_sq) : 1.0;
    for (size_t p = 0; p < demand_.size(); ++p) {
      if (reached_[p] || demand_[p] <= 0) continue;
      if (static_cast<double>(alloc_[p]) >= kEntitlementReached * entitled_[p]) {
        reached_[p] = t - first_submit_[p];
      }
    }
  }

  double AllocPct(int project) const { return Pct(static_cast<double>(alloc_[project])); }
  double EntitledPct(int project) const { return Pct(entitled_[project]); }
  double GpuSeconds(int project) const { return alloc_integral_[project] / 1000.0; }
  std::optional<int64_t> EntitlementReached(int project) const { return reached_[project]; }
  double MeanShareOfEntitlement(int project) const {
    return share_time_[project] > 0
               ? share_integral_[project] / static_cast<double>(share_time_[project])
               : 0.0;
  }
  FairnessResult Fairness() const {
    FairnessResult f;
    f.contended_s = contended_s_;
    if (contended_s_ > 0 && capacity_ > 0) {
      f.jain_mean = jain_integral_ / static_cast<double>(contended_s_);
      f.gpu_alloc_pct_mean =
          100.0 * contended_alloc_integral_ / static_cast<double>(contended_s_) / capacity_;
    }
    return f;
  }

 private:
  static constexpr double kEntitlementReached = 0.9;

  double ShareOfEntitlement(size_t p) const {
    return entitled_[p] > 0 ? static_cast<double>(alloc_[p]) / entitled_[p] : 0.0;
  }
  double Pct(double milli) const { return capacity_ > 0 ? 100.0 * milli / capacity_ : 0.0; }

  int64_t capacity_;
  std::vector<double> weight_;
  std::vector<int64_t> first_submit_;
  std::vector<int64_t> alloc_, demand_;
  std::vector<double> entitled_;
  std::vector<size_t> wanting_;  // Entitlements' scratch
  std::vector<std::optional<int64_t>> reached_;
  bool changed_ = false;  // an allocation or a demand changed since the last Settle
  bool contended_ = false;
  double jain_ = 1.0;
  std::optional<int64_t> last_;
  std::vector<double> alloc_integral_, share_integral_;
  std::vector<int64_t> share_time_;
  int64_t contended_s_ = 0;
  double jain_integral_ = 0, contended_alloc_integral_ = 0;
};

// One job's life in the replay (its duration and GPUs are in the trace). Work is counted in
// seconds at the job's requested size; an elastic job does it at `rate` of that speed.
struct JobRun {
  double done = 0;         // work kept from earlier runs and resizes
  int64_t run_start = -1;  // start of the current run; -1 while not running
  int64_t since = 0;       // the current run's progress accrues from here (after a restart)
  int64_t saved_at = 0;    // its start or last resize: its periodic checkpoints count from here
  double rate = 1;         // speed relative to the requested size
  int64_t milli = 0;       // milli-GPU it holds
  int attempt = 0;  // bumped by each preemption and resize: completions of older runs are stale
  std::optional<sched::ElasticRange> range;  // elastic jobs only
  int gpus = 0;                              // an elastic job's size now
  int resizes = 0;
  int64_t last_resize = 0;  // or its start

  // Work done in the current run until t.
  double Accrued(int64_t t) const {
    return static_cast<double>(std::max<int64_t>(0, t - since)) * rate;
  }
  // When the current run ends: what is left at its rate.
  int64_t EndAt(int64_t duration) const {
    const double left = std::max(0.0, static_cast<double>(duration) - done);
    return since + static_cast<int64_t>(std::ceil(left / rate - 1e-9));
  }
};

// Trace positions by job id: a flat array when the ids are dense (generated and openb traces
// number their jobs 0, 1, ...), else a hash map. at() is looked up per start, preemption and
// estimate, so the array saves a hash and a cache miss each.
class JobIndex {
 public:
  // InvalidArgument naming the first id that appears twice (in trace order).
  static Result<JobIndex> Build(const std::vector<TraceJob>& jobs) {
    JobIndex index;
    int64_t low = 0, high = -1;
    for (const TraceJob& j : jobs) {
      low = std::min(low, j.job.id.value());
      high = std::max(high, j.job.id.value());
    }
    const bool dense = low >= 0 && high < 2 * static_cast<int64_t>(jobs.size()) + 1024;
    if (dense) index.dense_.assign(static_cast<size_t>(high + 1), kNone);
    for (size_t i = 0; i < jobs.size(); ++i) {
      const JobId id = jobs[i].job.id;
      const bool fresh =
          dense ? std::exchange(index.dense_[static_cast<size_t>(id.value())], i) == kNone
                : index.sparse_.emplace(id, i).second;
      if (!fresh) {
        return InvalidArgument("trace: job id " + std::to_string(id.value()) + " appears twice");
      }
    }
    return index;
  }

  // The position of a job of the trace (checked: the scheduler knows only the trace's jobs).
  size_t at(JobId id) const {
    if (dense_.empty()) return sparse_.at(id);
    const size_t i = static_cast<size_t>(id.value()) < dense_.size()
                         ? dense_[static_cast<size_t>(id.value())]
                         : kNone;
    CORRAL_CHECK(i != kNone);
    return i;
  }

 private:
  static constexpr size_t kNone = SIZE_MAX;
  std::vector<size_t> dense_;  // id -> position, kNone for ids not in the trace
  std::unordered_map<JobId, size_t> sparse_;
};

// The nodes of each running job by trace position, and the running jobs (for the steps that
// visit every running job: elastic sizing, checkpoint notes), in no particular order.
class RunningNodes {
 public:
  explicit RunningNodes(size_t jobs) : nodes_(jobs), slot_(jobs, kNone) {}

  // Job i's nodes (empty when it is not running).
  const std::vector<sched::NodeIndex>& of(size_t i) const { return nodes_[i]; }
  // Job i starts on `nodes`.
  void Start(size_t i, std::vector<sched::NodeIndex> nodes) {
    if (slot_[i] == kNone) {
      slot_[i] = running_.size();
      running_.push_back(i);
    }
    nodes_[i] = std::move(nodes);
  }
  // Job i no longer runs (nothing when it did not).
  void End(size_t i) {
    nodes_[i] = {};
    if (slot_[i] == kNone) return;
    const size_t last = running_.back();
    running_[slot_[i]] = last;
    slot_[last] = slot_[i];
    running_.pop_back();
    slot_[i] = kNone;
  }
  const std::vector<size_t>& running() const { return running_; }

 private:
  static constexpr size_t kNone = SIZE_MAX;
  std::vector<std::vector<sched::NodeIndex>> nodes_;
  std::vector<size_t> slot_;     // position in running_, kNone when not running
  std::vector<size_t> running_;  // trace positions of the running jobs
};

// What is left to expect of a job that has done `done` seconds of its work and was estimated
// to run `estimate` in all: the end sched::ExpectedEndOf gives a job that started at 0, is seen
// at `done` and has the job's time limit (the rule the scheduler applies to a running job's
// RemainingOf), less `done`. Once outlived, the estimate moves to the time limit, else doubles,
// so that a job queued again after outliving its estimate is not taken to be about to end:
// SRTF and SRSF would then let it preempt again at once.
double ExpectedLeft(Seconds estimate, double done, const model::Job& job) {
  const Seconds seen(static_cast<int64_t>(std::floor(done)));
  const sched::ExpectedEnd end = sched::ExpectedEndOf(
      Seconds(0), sched::PlannedRun(estimate, job.time_limit), job.time_limit, seen);
  return static_cast<double>(end.end.value()) - done;
}

// What a live cluster knows of a job's run time without history (EstimateSource::kNone).
Seconds DeclaredEstimate(const model::Job& job) {
  model::Job declared;
  declared.time_limit = job.time_limit;
  return sched::DefaultEstimate(declared);
}

// Records the estimated start of each of `arrived` (indices into the trace) that still waits
// after the pass at `now`, if among the queue's first `rows`; returns how many still wait.
int64_t MeasureEtas(sched::Scheduler& s, int64_t now, int64_t rows,
                    const std::vector<size_t>& arrived, const JobIndex& index_of,
                    std::vector<ReplayJob>& outcomes) {
  int64_t waiting = 0;
  for (size_t i : arrived) waiting += outcomes[i].first_start_s < 0 ? 1 : 0;
  if (waiting == 0) return 0;
  for (const sched::QueueEntry& e : s.Queue(Seconds(now), static_cast<size_t>(rows))) {
    ReplayJob& o = outcomes[index_of.at(e.job)];
    if (o.submit_s == now && e.estimated_start) o.estimated_start_s = e.estimated_start->value();
  }
  return waiting;
}

EtaResult ScoreEtas(const std::vector<ReplayJob>& outcomes, int64_t waited) {
  EtaResult out;
  out.waited = waited;
  std::vector<double> errors;
  int64_t early = 0;
  for (const ReplayJob& o : outcomes) {
    if (!o.estimated_start_s) continue;
    ++out.estimated;
    if (o.first_start_s < 0) continue;
    errors.push_back(static_cast<double>(std::abs(*o.estimated_start_s - o.first_start_s)));
    early += o.first_start_s < *o.estimated_start_s ? 1 : 0;
  }
  out.scored = static_cast<int64_t>(errors.size());
  if (out.scored > 0) {
    out.started_early_pct = 100.0 * static_cast<double>(early) / static_cast<double>(out.scored);
  }
  out.abs_error_s = Summarize(std::move(errors));
  return out;
}

}  // namespace

Result<EstimateSource> ParseEstimateSource(std::string_view name) {
  if (name == "oracle") return EstimateSource::kOracle;
  if (name == "predicted") return EstimateSource::kPredicted;
  if (name == "none") return EstimateSource::kNone;
  return InvalidArgument("unknown estimate source '" + std::string(name) +
                         "' (known: oracle, predicted, none)");
}

std::string_view EstimateSourceName(EstimateSource source) {
  switch (source) {
    case EstimateSource::kOracle:
      return "oracle";
    case EstimateSource::kPredicted:
      return "predicted";
    case EstimateSource::kNone:
      return "none";
  }
  return "oracle";
}

Status CheckReplayConfig(const ReplayConfig& config) {
  if (sched::PreemptsByRemaining(config.order) && !config.resume) {
    return InvalidArgument("--order " + std::string(sched::QueueOrderName(config.order)) +
                           " needs --resume: SRTF and SRSF resume preempted jobs without penalty");
  }
  if (config.repack && !config.resume) {
    return InvalidArgument("--repack needs --resume: a moved job resumes without penalty");
  }
  return Status::Ok();
}

Result<ReplayResult> RunReplay(const std::vector<model::Node>& nodes, const Trace& trace,
                               const ReplayConfig& config) {
  const auto wall_start = std::chrono::steady_clock::now();
  CORRAL_RETURN_IF_ERROR(CheckReplayConfig(config));
  // The tasks' copies are freed once the profile is made (80 MB for a 1M-job trace).
  sched::PolicyContext context{[&] {
    std::vector<model::TaskResources> all_tasks;
    all_tasks.reserve(trace.jobs.size());
    for (const auto& j : trace.jobs) all_tasks.push_back(j.job.resources);
    return sched::ComputeTypicalTasks(all_tasks);
  }()};

  // Job ids mapped to trace positions; projects in order of first appearance.
  ReplayResult result;
  result.policy = config.policy;
  result.jobs = static_cast<int64_t>(trace.jobs.size());
  auto built_index = JobIndex::Build(trace.jobs);
  if (!built_index.ok()) return built_index.status();
  const JobIndex index_of = std::move(built_index).value();
  std::unordered_map<std::string, int> project_of;
  std::vector<JobRun> runs(trace.jobs.size());
  std::vector<ReplayJob>& outcomes = result.job_outcomes;
  outcomes.resize(trace.jobs.size());
  std::vector<int64_t> first_submit;
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    const model::Job& job = trace.jobs[i].job;
    auto [it, fresh] = project_of.emplace(job.project, static_cast<int>(result.projects.size()));
    if (fresh) {
      ProjectResult p;
      p.project = job.project;
      auto policy = config.sharing.projects.find(job.project);
      if (policy != config.sharing.projects.end()) p.weight = policy->second.weight;
      result.projects.push_back(std::move(p));
      first_submit.push_back(job.submit_time.value());
    }
    first_submit[it->second] = std::min(first_submit[it->second], job.submit_time.value());
    outcomes[i].id = job.id;
    outcomes[i].project = it->second;
    outcomes[i].submit_s = job.submit_time.value();
  }

  // Elastic jobs: a seeded draw among the one-task jobs of whole GPUs.
  result.elastic_share = config.elastic_share;
  result.elastic_alpha = config.resize.alpha;
  if (config.elastic_share > 0) {
    CORRAL_RETURN_IF_ERROR(sched::Validate(config.resize));
    int node_gpus = 1;
    for (const model::Node& n : nodes)
      node_gpus = std::max(node_gpus, static_cast<int>(n.gpus.size()));
    SeededRng draw(config.seed ^ 0x656c6173746963ULL);  // "elastic"
    for (size_t i = 0; i < trace.jobs.size(); ++i) {
      const model::Job& job = trace.jobs[i].job;
      const int request = job.resources.gpus.value();
      if (job.tasks != 1 || request < 1 || job.resources.gpu_milli != kWholeGpu) continue;
      if (draw.UniformDouble() >= config.elastic_share) continue;
      auto range = sched::ElasticRange::Create(std::max(1, request / 2),
                                               std::max(request, std::min(2 * request, node_gpus)));
      if (!range.ok()) return range.status();
      runs[i].range = *range;
      ++result.elastic_jobs;
    }
  }

  // The scheduler's estimates: the total run time from the chosen source, less what a resumed
  // job has already done.
  predict::RuntimePredictor predictor(config.predictor);
  int64_t now = 0;  // the time of the pass in progress
  auto left = [&](const model::Job& job, Seconds total) {
    const JobRun& r = runs[index_of.at(job.id)];
    double done = r.done;
    // A job still running here is being preempted (queued again) by the pass in progress.
    if (config.resume && r.run_start >= 0) done += r.Accrued(now);
    return Seconds(std::max<int64_t>(1, std::llround(ExpectedLeft(total, done, job) / r.rate)));
  };
  sched::DurationEstimator estimate;
  switch (config.estimate) {
    case EstimateSource::kOracle:
      estimate = [&](const model::Job& job) {
        return left(job, trace.jobs[index_of.at(job.id)].duration);
      };
      break;
    case EstimateSource::kPredicted:
      estimate = [&](const model::Job& job) {
        return left(job, predictor.Predict(predict::RuntimePredictor::FeaturesOf(job)).estimate);
      };
      break;
    case EstimateSource::kNone:
      estimate = [&](const model::Job& job) { return left(job, DeclaredEstimate(job)); };
      break;
  }
  auto scheduler = sched::Scheduler::Create(
      sched::SchedulerConfig{config.policy, config.order, config.blocking, config.seed,
                             config.sharing, estimate, config.las_thresholds_gpu_s,
                             config.gang_placement, config.victims,
                             Seconds(config.min_run_before_preemption_s), config.repack},
      context);
  if (!scheduler.ok()) return scheduler.status();
  sched::Scheduler& s = **scheduler;
  for (const auto& n : nodes) {
    auto added = s.AddNode(n);
    if (!added.ok()) return added.status();
  }
  if (trace.jobs.empty()) return result;

  // Arrivals in submit order (stable on file order).
  std::vector<size_t> arrivals(trace.jobs.size());
  std::iota(arrivals.begin(), arrivals.end(), 0);
  std::stable_sort(arrivals.begin(), arrivals.end(), [&](size_t a, size_t b) {
    return trace.jobs[a].job.submit_time < trace.jobs[b].job.submit_time;
  });

  ClusterMeter meter(s.state(), context.typical_tasks, config.track_fragmentation);
  std::vector<double> weights;
  for (const ProjectResult& p : result.projects) weights.push_back(p.weight);
  ShareMeter shares(s.state().TotalGpuMilli(), std::move(weights), first_submit);
  // (end time, job id, attempt, trace position): the run `attempt` of the job ends then. The
  // position saves a lookup in index_of per completion; the id alone orders equal ends.
  using Completion = std::tuple<int64_t, int64_t, int, size_t>;
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> completions;
  const int64_t first_arrival = outcomes[arrivals.front()].submit_s;
  const int64_t last_arrival = outcomes[arrivals.back()].submit_s;
  const int64_t span = std::max<int64_t>(1, last_arrival - first_arrival);
  double alloc_integral_at_last_arrival = 0;
  const int64_t sample_every = std::max<int64_t>(1, span / std::max(1, config.timeline_points));
  int64_t next_sample = first_arrival;
  int64_t last_end = first_arrival;

  auto duration = [&](size_t i) { return trace.jobs[i].duration.value(); };
  auto milli = [&](size_t i) { return trace.jobs[i].job.TotalMilli().value(); };
  RunningNodes nodes_of(trace.jobs.size());
  // Ends the current run of job i: its nodes changed and are measured again.
  auto end_run = [&](size_t i) {
    for (sched::NodeIndex n : nodes_of.of(i)) meter.Touch(n);
    nodes_of.End(i);
    JobRun& r = runs[i];
    shares.Change(outcomes[i].project, -r.milli, 0);
    r.run_start = -1;
    r.rate = 1;
    r.milli = 0;
  };
  // The current run's last periodic checkpoint at t (its start or last resize without one).
  auto last_checkpoint = [&](const JobRun& r, int64_t t) {
    const int64_t every = config.checkpoint_interval_s;
    return every > 0 ? r.saved_at + (t - r.saved_at) / every * every : r.saved_at;
  };
  // Stops the current run of job i at t (preempted: it is pending again). It keeps its work up
  // to its last checkpoint (or all of it: resume, or a grace to checkpoint) and loses the rest.
  auto stop_run = [&](size_t i, int64_t t) {
    JobRun& r = runs[i];
    ProjectResult& p = result.projects[outcomes[i].project];
    int64_t kept = last_checkpoint(r, t);
    int64_t lost_s = t - kept;
    if (config.resume) {
      kept = t;
      lost_s = 0;
    } else if (config.checkpoint_grace_s > 0) {
      kept = t;  // it saves now; the GPUs it holds while saving are what it costs
      lost_s = std::min(lost_s, config.checkpoint_grace_s);
    }
    r.done += static_cast<double>(std::max<int64_t>(0, kept - r.since)) * r.rate;
    const double lost = static_cast<double>(lost_s) * static_cast<double>(r.milli) / 1000.0;
    p.lost_gpu_s += lost;
    result.lost_gpu_s += lost;
    end_run(i);
    ++r.attempt;
  };

  int64_t gang_nodes = 0;  // Σ distinct nodes over gang starts
  auto count_gang = [&](const std::vector<sched::NodeIndex>& task_nodes) {
    std::set<sched::NodeIndex> distinct(task_nodes.begin(), task_nodes.end());
    const int rack = s.state().node(*distinct.begin()).topology[sched::kRackLevel];
    bool one_rack = distinct.size() == 1 || rack != sched::kNoTopologyDomain;
    for (sched::NodeIndex n : distinct)
      one_rack = one_rack && s.state().node(n).topology[sched::kRackLevel] == rack;
    ++result.gang_starts;
    gang_nodes += static_cast<int64_t>(distinct.size());
    if (one_rack) ++result.gang_starts_one_rack;
  };

  // An elastic job as submitted: at its MIN, with its bounds.
  auto at_min = [&](size_t i) {
    model::Job job = trace.jobs[i].job;
    const sched::ElasticRange& range = *runs[i].range;
    job.resources.gpus = GpuCount(range.min());
    job.elastic =
        model::ElasticBounds{model::ElasticUnit::kGpus, range.min(), range.max(), range.step()};
    return job;
  };
  // Pending jobs by (submit time, trace position): whom shrinks make room for (kept only when
  // there are elastic jobs).
  std::set<std::pair<int64_t, size_t>> pending_jobs;
  const bool track_pending = result.elastic_jobs > 0;
  auto request_of = [&](size_t i) { return trace.jobs[i].job.resources.gpus.value(); };
  // The running elastic jobs as sched/elastic.h sees them; `fresh`: those started at t (their
  // size is chosen, not resized), else the others.
  auto elastic_runs = [&](int64_t t, bool fresh) {
    std::vector<sched::ElasticRun> out;
    for (size_t i : nodes_of.running()) {
      const JobRun& r = runs[i];
      if (!r.range || (r.run_start == t) != fresh) continue;
      const double remaining = (static_cast<double>(duration(i)) - r.done - r.Accrued(t)) / r.rate;
      sched::ElasticRun run{trace.jobs[i].job.id, *r.range};
      run.size = r.gpus;
      run.nodes = nodes_of.of(i);
      run.last_resize = Seconds(r.last_resize);
      run.resizes = r.resizes;
      run.remaining_s = remaining;
      out.push_back(std::move(run));
    }
    std::sort(out.begin(), out.end(),
              [](const sched::ElasticRun& a, const sched::ElasticRun& b) { return a.job < b.job; });
    return out;
  };
  // Applies a resize at t: work so far is kept (the job checkpoints first); a counted resize
  // restarts it, losing restart_cost of progress; a size chosen at its start costs nothing.
  auto apply_resize = [&](const sched::Resize& z, int64_t t, bool counted) -> Status {
    const size_t i = index_of.at(z.job);
    JobRun& r = runs[i];
    r.done += r.Accrued(t);
    r.rate = sched::Speedup(request_of(i), z.to, config.resize.alpha);
    r.since = counted ? t + config.resize.restart_cost.value() : t;
    r.saved_at = t;
    CORRAL_RETURN_IF_ERROR(s.Resize(z.job, z.to, Seconds(t)));
    const int64_t milli_now = int64_t{z.to} * kWholeGpu.value();
    shares.Change(outcomes[i].project, milli_now - r.milli, 0);
    r.milli = milli_now;
    r.gpus = z.to;
    for (sched::NodeIndex n : nodes_of.of(i)) meter.Touch(n);
    if (counted) {
      r.last_resize = t;
      ++r.resizes;
      ++(z.to > z.from ? result.grows : result.shrinks);
    }
    ++r.attempt;
    completions.emplace(r.EndAt(duration(i)), z.job.value(), r.attempt, i);
    return Status::Ok();
  };
  // Before a pass: shrink elastic jobs toward MIN so that pending jobs can start, in arrival
  // order, before the pass would preempt anyone (sched::PlanRoom).
  auto make_room = [&](int64_t t) -> Status {
    std::vector<sched::ElasticRun> elastic = elastic_runs(t, false);
    for (sched::ElasticRun& e : elastic_runs(t, true)) elastic.push_back(std::move(e));
    if (!sched::AnyBorrowed(elastic)) return Status::Ok();
    std::vector<model::Job> pending;
    for (const auto& [submit, i] : pending_jobs) {
      if (pending.size() >= static_cast<size_t>(sched::kShrinkLookahead)) break;
      pending.push_back(runs[i].range ? at_min(i) : trace.jobs[i].job);
    }
    for (const sched::Resize& z : sched::PlanRoom(s.state(), std::move(elastic), pending)) {
      CORRAL_RETURN_IF_ERROR(apply_resize(z, t, /*counted=*/true));
    }
    return Status::Ok();
  };
  // After a pass: jobs started in it take the size the idle GPUs allow (no cost, not a
  // resize), then the others grow into what is still idle under the hysteresis.
  auto grow = [&](int64_t t) -> Status {
    const sched::GrowthPlan plan =
        sched::PlanAfterPass(s.state(), elastic_runs(t, true), elastic_runs(t, false),
                             config.resize, Seconds(t), s.ReservedNodes());
    for (const sched::Resize& z : plan.at_start) {
      CORRAL_RETURN_IF_ERROR(apply_resize(z, t, /*counted=*/false));
    }
    for (const sched::Resize& z : plan.grown) {
      CORRAL_RETURN_IF_ERROR(apply_resize(z, t, /*counted=*/true));
    }
    return Status::Ok();
  };
  // Least lost work needs each running job's last checkpoint.
  const bool note_checkpoints = config.victims == sched::VictimOrder::kLeastLostWork &&
                                config.checkpoint_interval_s > 0 && !config.resume;

  size_t next_arrival = 0;
  int64_t eta_waited = 0;  // arrivals still pending after their pass (eta_queue_rows)
  std::optional<int64_t> last_pass;
  while (next_arrival < arrivals.size() || !completions.empty()) {
    int64_t t = INT64_MAX;
    if (next_arrival < arrivals.size()) t = outcomes[arrivals[next_arrival]].submit_s;
    if (!completions.empty()) t = std::min(t, std::get<0>(completions.top()));
    if (config.pass_interval_s > 0 && last_pass && s.pending_count() > 0) {
      t = std::min(t, *last_pass + config.pass_interval_s);
    }
    last_pass = t;
    meter.AdvanceTo(t);
    shares.AdvanceTo(t);
    if (t == last_arrival) alloc_integral_at_last_arrival = meter.AllocIntegral();

    while (!completions.empty() && std::get<0>(completions.top()) == t) {
      const auto [end, id, attempt, i] = completions.top();
      completions.pop();
      JobRun& r = runs[i];
      if (attempt != r.attempt) continue;  // a run that preemption or a resize cut short
      (void)s.Finish(JobId(id));
      end_run(i);
      shares.Change(outcomes[i].project, 0, -milli(i));
      if (config.estimate == EstimateSource::kPredicted) {
        predictor.Observe(predict::RuntimePredictor::FeaturesOf(trace.jobs[i].job),
                          trace.jobs[i].duration);
        s.NoteEstimatesChanged();
      }
      outcomes[i].end_s = t;
      last_end = std::max(last_end, t);
      ++result.completed;
    }
    const size_t arrived_from = next_arrival;
    while (next_arrival < arrivals.size() && outcomes[arrivals[next_arrival]].submit_s == t) {
      const size_t i = arrivals[next_arrival];
      CORRAL_RETURN_IF_ERROR(s.Submit(runs[i].range ? at_min(i) : trace.jobs[i].job));
      if (track_pending) pending_jobs.emplace(outcomes[i].submit_s, i);
      shares.Change(outcomes[i].project, 0, milli(i));
      ++next_arrival;
    }

    now = t;
    if (result.elastic_jobs > 0) CORRAL_RETURN_IF_ERROR(make_room(t));
    if (note_checkpoints) {
      for (size_t i : nodes_of.running()) {
        (void)s.NoteCheckpoint(trace.jobs[i].job.id, Seconds(last_checkpoint(runs[i], t)));
      }
    }
    // With elastic jobs, a second pass when shrinks after the first made room that its
    // placements left for someone else (the placer need not pick the node a shrink chose).
    for (int pass = 0; pass < 2; ++pass) {
      const sched::Decisions decisions = s.Schedule(Seconds(t));
      // Victims first (they ran before this pass; the scheduler does not preempt a job in the pass
      // that started it), then the starts, which may restart a victim at once.
      for (const sched::Preemption& preempted : decisions.preemptions) {
        const size_t i = index_of.at(preempted.job);
        if (runs[i].run_start < 0) {
          return Status(StatusCode::kInternal, "the scheduler preempted job " +
                                                   std::to_string(preempted.job.value()) +
                                                   ", which was not running");
        }
        stop_run(i, t);  // the scheduler queued it again (an elastic job at its MIN)
        if (track_pending) pending_jobs.emplace(outcomes[i].submit_s, i);
        ++outcomes[i].preemptions;
        ++result.projects[outcomes[i].project].preemptions;
        ++result.preemptions;
      }
      for (const sched::JobStart& start : decisions.starts) {
        const size_t i = index_of.at(start.job);
        JobRun& r = runs[i];
        r.run_start = t;
        r.since = t;
        r.saved_at = t;
        r.last_resize = t;
        r.milli = 0;
        for (const sched::Allocation& a : start.tasks) {
          for (const sched::GpuShare& g : a.gpus) r.milli += g.milli.value();
        }
        if (r.range) {
          r.gpus = static_cast<int>(start.tasks.front().gpus.size());
          r.rate = sched::Speedup(request_of(i), r.gpus, config.resize.alpha);
        }
        if (track_pending) pending_jobs.erase({outcomes[i].submit_s, i});
        std::vector<sched::NodeIndex> nodes_now;
        nodes_now.reserve(start.tasks.size());
        for (const sched::Allocation& a : start.tasks) {
          nodes_now.push_back(a.node);
          meter.Touch(a.node);
        }
        if (start.tasks.size() > 1) count_gang(nodes_now);
        nodes_of.Start(i, std::move(nodes_now));
        ReplayJob& outcome = outcomes[i];
        if (outcome.first_start_s < 0) outcome.first_start_s = t;
        outcome.start_s = t;
        shares.Change(outcome.project, r.milli, 0);
        completions.emplace(r.EndAt(duration(i)), start.job.value(), r.attempt, i);
      }
      if (pass == 1 || result.elastic_jobs == 0) break;
      const int64_t shrinks_before = result.shrinks;
      CORRAL_RETURN_IF_ERROR(make_room(t));
      if (result.shrinks == shrinks_before) break;
    }
    if (result.elastic_jobs > 0) CORRAL_RETURN_IF_ERROR(grow(t));
    if (config.eta_queue_rows > 0 && next_arrival > arrived_from) {
      eta_waited += MeasureEtas(s, t, config.eta_queue_rows,
                                {arrivals.begin() + static_cast<std::ptrdiff_t>(arrived_from),
                                 arrivals.begin() + static_cast<std::ptrdiff_t>(next_arrival)},
                                index_of, outcomes);
    }
    if (auto reserved = s.ReservedStart()) {
      std::optional<int64_t>& promised = outcomes[index_of.at(reserved->first)].reserved_start_s;
      promised = std::min(promised.value_or(INT64_MAX), reserved->second.value());
    }
    shares.Settle(t);

    if (t >= next_sample) {
      ReplaySample sample{t, meter.AllocPct(), meter.FragPct(),
                          static_cast<int64_t>(s.pending_count()),
                          static_cast<int64_t>(s.running_count())};
      for (int p = 0; p < static_cast<int>(result.projects.size()); ++p) {
        sample.project_alloc_pct.push_back(shares.AllocPct(p));
        sample.project_entitled_pct.push_back(shares.EntitledPct(p));
      }
      result.timeline.push_back(std::move(sample));
      next_sample = t + sample_every;
    }
  }

  // Per project and in total, from the jobs' outcomes.
  std::vector<std::vector<double>> jct(result.projects.size()), queue(result.projects.size());
  std::vector<double> all_jct, all_queue;
  double run_sum = 0;  // recorded run times of the completed jobs
  for (size_t i = 0; i < outcomes.size(); ++i) {
    const ReplayJob& o = outcomes[i];
    ProjectResult& p = result.projects[o.project];
    ++p.jobs;
    if (o.first_start_s >= 0) {
      queue[o.project].push_back(static_cast<double>(o.first_start_s - o.submit_s));
      all_queue.push_back(queue[o.project].back());
    }
    if (o.end_s >= 0) {
      ++p.completed;
      jct[o.project].push_back(static_cast<double>(o.end_s - o.submit_s));
      all_jct.push_back(jct[o.project].back());
      run_sum += static_cast<double>(duration(i));
    }
  }
  for (size_t k = 0; k < result.projects.size(); ++k) {
    ProjectResult& p = result.projects[k];
    p.jct_s = Summarize(std::move(jct[k]));
    p.queue_s = Summarize(std::move(queue[k]));
    p.gpu_s = shares.GpuSeconds(static_cast<int>(k));
    p.entitlement_90_s = shares.EntitlementReached(static_cast<int>(k));
    p.share_of_entitlement_mean = shares.MeanShareOfEntitlement(static_cast<int>(k));
    result.gpu_s += p.gpu_s;
  }
  result.fairness = shares.Fairness();
  if (config.eta_queue_rows > 0) result.eta = ScoreEtas(outcomes, eta_waited);
  result.unfinished = static_cast<int64_t>(s.pending_count());
  if (!all_jct.empty()) {
    result.run_s_mean = run_sum / static_cast<double>(all_jct.size());
    result.delay_s_mean =
        std::accumulate(all_jct.begin(), all_jct.end(), 0.0) / static_cast<double>(all_jct.size()) -
        result.run_s_mean;
  }
  result.jct_s = Summarize(std::move(all_jct));
  result.queue_s = Summarize(std::move(all_queue));
  result.makespan_s = last_end - first_arrival;
  result.gpu_alloc_pct_mean = meter.MeanAllocPct(result.makespan_s);
  if (last_arrival > first_arrival) {
    result.gpu_alloc_pct_arrivals = alloc_integral_at_last_arrival / (last_arrival - first_arrival);
  }
  if (config.track_fragmentation) result.frag_pct_mean = meter.MeanFragPct(result.makespan_s);
  if (result.gang_starts > 0) {
    result.gang_nodes_mean =
        static_cast<double>(gang_nodes) / static_cast<double>(result.gang_starts);
  }
  result.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_start)
          .count();
  return result;
}

}  // namespace corral::sim
