#include "agent/agent_loop.h"

#include <httplib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "agent/gpu_metrics.h"
#include "agent/host_resources.h"
#include "agent/task_setup.h"
#include "common/build_info.h"
#include "common/http_attempt.h"
#include "common/json_parse.h"
#include "model/node.h"

namespace corral::agent {

namespace {

constexpr int64_t kMaxLogChunk = 64 * 1024;  // per stream per heartbeat
// All output in one heartbeat; JSON escaping may grow it up to 6x, and the server takes at most
// 1 MiB per request. The rest goes in the next heartbeats.
constexpr int64_t kMaxLogBytesPerHeartbeat = 128 * 1024;

std::string LogKey(const TaskKey& key, LogStream stream) {
  return ToString(key) + (stream == LogStream::kStdout ? ".stdout" : ".stderr");
}

// How an httplib request ended, as common/http_attempt.h reads it (the body borrowed from `r`).
HttpOutcome OutcomeOf(const httplib::Result& r) {
  HttpOutcome outcome;
  if (!r) {
    switch (r.error()) {
      case httplib::Error::Connection:
      case httplib::Error::BindIPAddress:
        outcome.failure = HttpFailure::kConnect;
        break;
      case httplib::Error::ConnectionTimeout:
        outcome.failure = HttpFailure::kConnectTimeout;
        break;
      case httplib::Error::SSLConnection:
        outcome.failure = HttpFailure::kTlsHandshake;
        break;
      case httplib::Error::SSLServerVerification:
        outcome.failure = HttpFailure::kCertificate;
        break;
      case httplib::Error::SSLLoadingCerts:
        outcome.failure = HttpFailure::kCaCertificates;
        break;
      case httplib::Error::Read:
        outcome.failure = HttpFailure::kRead;
        break;
      case httplib::Error::Write:
        outcome.failure = HttpFailure::kWrite;
        break;
      default:
        outcome.failure = HttpFailure::kOther;
        outcome.failure_detail = httplib::to_string(r.error());
        break;
    }
    return outcome;
  }
  outcome.status = r->status;
  outcome.body = r->body;
  outcome.busy = r->has_header(kBusyHeader);
  outcome.leader = r->get_header_value(kLeaderHeader);
  outcome.retry_after = r->get_header_value("Retry-After");
  return outcome;
}

Attempt AttemptOf(const httplib::Result& r) { return corral::AttemptOf(OutcomeOf(r)); }

std::optional<BusyAnswer> BusyAnswerOf(const httplib::Result& r) {
  return corral::BusyAnswerOf(OutcomeOf(r));
}

// The error of a failed request, with the server's problem detail; a problem's "title" (the
// server's StatusCodeName) says what a 409 is: a name held (already_exists) or a refusal of
// this agent (failed_precondition: another protocol version).
Status HttpError(const httplib::Result& r, const std::string& what) {
  if (!r) return IoError(what + ": " + AttemptOf(r).detail);
  std::string detail = r->body;
  // A problem+json's detail; any other body (a proxy's page) as it is.
  const nlohmann::json j = ParseJsonOrNull(r->body);
  if (j.is_object() && j.contains("detail") && j["detail"].is_string()) {
    detail = j["detail"].get<std::string>();
  }
  // A busy server's (or a limit's) "not now": nothing was done; the caller waits (BusyWait).
  if (const std::optional<BusyAnswer> busy = BusyAnswerOf(r)) {
    return Status(busy->status == 429 ? StatusCode::kResourceExhausted : StatusCode::kUnavailable,
                  what + ": HTTP " + std::to_string(r->status) + ": " + busy->detail)
        .WithRetryAfter(busy->retry_after);
  }
  if (r->status == 401) return Unauthenticated(what + ": " + detail);
  if (r->status == 409) {
    if (j.is_object() &&
        j.value("title", std::string()) == StatusCodeName(StatusCode::kFailedPrecondition)) {
      return FailedPrecondition(what + ": " + detail);
    }
    return AlreadyExists(what + ": " + detail);
  }
  return Status(StatusCode::kInternal,
                what + ": HTTP " + std::to_string(r->status) + ": " + detail);
}

std::unique_ptr<httplib::Client> MakeClient(const std::string& url, const AgentOptions& options) {
  auto http = std::make_unique<httplib::Client>(url);
  // The server's fencing rule counts on the time a request may take once sent.
  const auto timeout = static_cast<time_t>(protocol::kAgentRequestTimeout.value());
  http->set_connection_timeout(2);
  http->set_read_timeout(timeout);
  http->set_write_timeout(timeout);
  if (!options.ca_cert.empty()) http->set_ca_cert_path(options.ca_cert.c_str());
  http->enable_server_certificate_verification(true);
  return http;
}

// The registration a server's answer `r` (from `url`) holds, or the error it answered.
Result<Registration> RegistrationOf(const httplib::Result& r, const std::string& url,
                                    const AgentOptions& options) {
  if (!r || r->status != 200) {
    Status s = HttpError(r, "register with " + url);
    if (s.code() == StatusCode::kAlreadyExists) {  // a live node holds the name (409)
      return AlreadyExists(s.message() + "; to run this node meanwhile, give it another --name");
    }
    return s;
  }
  auto parsed = ParseJson(r->body, "register: answer", kServerAnswerLimits);
  if (!parsed.ok()) return Status(StatusCode::kInternal, parsed.status().message());
  const nlohmann::json& json = *parsed;
  if (json.is_object() && !json.contains("protocol_version")) {
    return FailedPrecondition("the server at " + url +
                              " speaks no protocol version: it runs an older corral than this "
                              "agent (" +
                              kVersion + "); upgrade the servers before their agents");
  }
  Result<protocol::RegisterAnswer> answer = protocol::ParseRegisterAnswer(json);
  if (!answer.ok()) {
    return Status(StatusCode::kInternal,
                  "register: malformed answer: " + answer.status().message());
  }
  Registration registration{answer->node_token, answer->cluster_id, answer->fence};
  if (!options.cluster_id.empty() && registration.cluster_id != options.cluster_id) {
    return FailedPrecondition(
        "the server at " + url + " is of cluster " + registration.cluster_id +
        ", but this agent runs tasks of cluster " + options.cluster_id +
        ": refusing to join another cluster (its tasks keep running; docs/control-plane.md)");
  }
  return registration;
}

RegistrationAttempt PostRegistration(httplib::Client& http, const std::string& url,
                                     const AgentOptions& options,
                                     protocol::NodeInventory inventory) {
  httplib::Headers headers = {{"Authorization", "Bearer " + options.join_token}};
  const protocol::RegisterRequest request{protocol::kProtocolVersion, options.name, options.node_id,
                                          std::move(inventory)};
  auto r = http.Post("/api/v1/agent/register", headers, protocol::ToJson(request).dump(),
                     "application/json");
  return {AttemptOf(r), RegistrationOf(r, url, options)};
}

}  // namespace

Result<protocol::NodeInventory> NodeInventory(const AgentOptions& options, GpuProbe& probe) {
  auto detected = DetectHostResources();
  if (!detected.ok()) return detected.status();
  const HostResources host = Offered(*std::move(detected), options.declared);
  auto gpus = probe.Discover();
  if (!gpus.ok()) return gpus.status();
  protocol::NodeInventory inventory;
  inventory.hostname = host.hostname;
  inventory.cpu = host.cpu;
  inventory.memory = host.memory;
  inventory.gpu_model = gpus->model;
  // A GPU's index is its place in the list (the probe lists them in index order).
  for (const auto& g : gpus->gpus) {
    inventory.gpus.push_back({g.uuid, g.memory, g.nvlink_domain});
  }
  inventory.labels = options.labels;
  inventory.runtimes = options.runtimes;
  // Only when given: the server falls back to the node name (and an agent upgraded in place
  // keeps the inventory its node registered with).
  inventory.address = options.address;
  inventory.container_engine = options.container_engine;
  inventory.tools = options.tools;
  inventory.env_prefixes = options.env_prefixes;
  return inventory;
}

RegistrationAttempt RegisterAgent(const AgentOptions& options, const std::string& url,
                                  GpuProbe& probe) {
  Result<protocol::NodeInventory> inventory = NodeInventory(options, probe);
  // Not the server's doing: nothing to look for elsewhere.
  if (!inventory.ok()) return {Attempt{Outcome::kAnswered, "", ""}, inventory.status()};
  std::unique_ptr<httplib::Client> http = MakeClient(url, options);
  return PostRegistration(*http, url, options, std::move(inventory).value());
}

std::optional<RuntimeThread::Fence> FenceOf(const std::optional<protocol::FenceTimings>& timings) {
  if (!timings) return std::nullopt;
  return RuntimeThread::Fence{std::chrono::seconds(timings->fence_after.value()),
                              timings->kill_grace};
}

std::chrono::milliseconds BusyWait(Seconds retry_after, double jitter) {
  return Jittered(std::clamp(retry_after, Seconds(1), kMaxHonouredRetryAfter), kBusyJitterSpread,
                  jitter);
}

std::chrono::milliseconds AnsweredErrorBackoff::Next(const Status& error) {
  // The server said when: that, not a guess (nor a longer backoff for the next error).
  if (error.retry_after()) return BusyWait(*error.retry_after(), rng_.UniformDouble());
  const std::chrono::milliseconds wait(backoff_ms_);
  backoff_ms_ = std::min(backoff_ms_ * 2, kMaxBackoffMs);
  return wait;
}

bool IsFatalRegistrationError(const Status& status) {
  return (status.code() == StatusCode::kUnauthenticated &&
          status.message().find("join token") != std::string::npos) ||
         status.code() == StatusCode::kAlreadyExists ||
         status.code() == StatusCode::kFailedPrecondition;
}

Result<int> MetricsIntervalMs(double seconds) {
  if (seconds == 0) return 0;
  if (!(seconds >= 0.1 && seconds <= 15)) {
    return InvalidArgument(
        "--metrics-interval: 0 (no GPU metrics) or 0.1 to 15 seconds (GPU-hours count at most "
        "30 s between two samples)");
  }
  return static_cast<int>(std::lround(seconds * 1000));
}

AgentLoop::AgentLoop(AgentOptions options, GpuProbe& probe, Runtime& runtime)
    : options_(std::move(options)),
      probe_(probe),
      runtime_(runtime),
      runtime_thread_(runtime, options_.runtime_thread, [this] { WakePusher(); }),
      answered_url_(options_.registered_at),
      server_url_(options_.registered_at.empty() ? options_.servers.urls().at(0)
                                                 : options_.registered_at),
      node_token_(options_.node_token) {
  http_ = MakeClient(server_url_, options_);
  push_url_ = server_url_;
  push_http_ = MakeClient(push_url_, options_);
}

AgentLoop::~AgentLoop() {
  StopPusher();
  runtime_thread_.Stop();
  StopSampler();
}

void AgentLoop::StopSampler() {
  {
    std::lock_guard lock(sample_mu_);
    stopping_ = true;
  }
  sample_cv_.notify_all();
  if (sampler_.joinable()) sampler_.join();
}

void AgentLoop::SampleLoop() {
  std::unique_lock lock(sample_mu_);
  while (!stopping_) {
    lock.unlock();
    auto samples = probe_.Sample();  // may take long, or hang: nothing waits for it
    const int64_t at_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                              std::chrono::system_clock::now().time_since_epoch())
                              .count();
    lock.lock();
    if (samples.ok()) {
      sample_ = std::move(samples).value();
      sampled_at_ms_ = at_ms;
      sample_sent_ = false;
    }
    sample_cv_.wait_for(lock, std::chrono::milliseconds(options_.metrics_interval_ms),
                        [&] { return stopping_; });
  }
}

std::vector<RunningTask> AgentLoop::RunningTasks() { return *runtime_thread_.Snapshot().running; }

Result<protocol::NodeInventory> AgentLoop::Inventory() { return NodeInventory(options_, probe_); }

Status AgentLoop::Register() {
  auto inventory = Inventory();
  if (!inventory.ok()) {
    last_attempt_ = Attempt{Outcome::kAnswered, "", ""};  // not the server's doing
    return inventory.status();
  }
  if (options_.name.empty()) options_.name = inventory->hostname;
  // server_url_ is this thread's to write: read without the lock.
  RegistrationAttempt sent =
      PostRegistration(*http_, server_url_, options_, std::move(inventory).value());
  last_attempt_ = sent.attempt;
  if (!sent.registration.ok()) return sent.registration.status();
  runtime_thread_.SetFence(FenceOf(sent.registration->fence));
  std::lock_guard lock(report_mu_);
  node_token_ = sent.registration->node_token;
  return Status::Ok();
}

std::optional<AgentLoop::Report> AgentLoop::BuildReport(ReportKind kind) {
  RuntimeSnapshot snapshot;
  Report report;
  std::map<std::string, int64_t> offsets;  // of the tasks in this report
  std::vector<const SnapshotTask*> tasks;
  {
    // The snapshot and its sequence number together: a later number is a newer snapshot.
    std::lock_guard lock(report_mu_);
    snapshot = runtime_thread_.Snapshot();
    for (const SnapshotTask& t : *snapshot.tasks) {
      if (kind == ReportKind::kPartial && t.changed_at <= taken_version_ &&
          !IsTerminal(t.status.state)) {
        continue;
      }
      tasks.push_back(&t);
      for (LogStream stream : {LogStream::kStdout, LogStream::kStderr}) {
        const std::string key = LogKey(t.status.key, stream);
        auto it = log_offsets_.find(key);
        offsets[key] = it == log_offsets_.end() ? 0 : it->second;
      }
    }
    if (kind == ReportKind::kPartial && tasks.empty()) return std::nullopt;
    if (kind == ReportKind::kFull) {
      // Offsets of tasks the runtime forgot go with them.
      for (auto it = log_offsets_.begin(); it != log_offsets_.end();) {
        it = offsets.count(it->first) ? std::next(it) : log_offsets_.erase(it);
      }
    }
    report.body.seq = ++seq_;
  }
  report.version = snapshot.version;
  int64_t total = 0;
  for (const SnapshotTask* t : tasks) {
    report.body.tasks.push_back(t->status);
    bool output_left = false;
    for (LogStream stream : {LogStream::kStdout, LogStream::kStderr}) {
      if (total >= kMaxLogBytesPerHeartbeat) {
        output_left = true;  // not looked at: the next report
        continue;
      }
      const std::string key = LogKey(t->status.key, stream);
      const int64_t offset = offsets[key];
      auto data = runtime_.ReadLog(t->status.key, stream, offset, kMaxLogChunk);
      if (!data.ok()) {
        // NotFound: no output here at all. Anything else: try again with the next report.
        output_left |= data.status().code() != StatusCode::kNotFound;
        continue;
      }
      if (data->empty()) continue;
      output_left = true;  // sent now; an end goes only once a report finds nothing more
      report.log_ends[key] = offset + static_cast<int64_t>(data->size());
      total += static_cast<int64_t>(data->size());
      report.body.logs.push_back({t->status.key, stream, offset, *std::move(data)});
    }
    if (IsTerminal(t->status.state) && !output_left) report.finished.push_back(t->status.key);
  }
  report.body.starting = snapshot.starting;
  if (kind == ReportKind::kPartial) {
    report.body.partial = true;
    report.body.wait_ms = 0;
  } else {
    report.body.wait_ms = std::clamp(options_.wait_ms, 0, protocol::kMaxAgentWaitMs);
    report.body.gpu_metrics = DueGpuMetrics(*snapshot.running);
  }
  return report;
}

AgentLoop::Sent AgentLoop::Send(httplib::Client& http, const std::string& token,
                                const Report& report) {
  // The node's name (set at the first registration) travels with its token, in headers: the
  // server authenticates the report before it reads its body.
  httplib::Headers headers = {{"Authorization", "Bearer " + token},
                              {protocol::kNodeHeader, options_.name}};
  auto r = http.Post(
      "/api/v1/agent/heartbeat", headers,
      protocol::ToJson(report.body).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
      "application/json");
  const Attempt attempt = AttemptOf(r);
  if (!r || r->status != 200) {
    Status s = HttpError(r, "heartbeat");
    if (s.code() == StatusCode::kUnauthenticated) {
      std::lock_guard lock(report_mu_);
      if (node_token_ == token) node_token_.clear();  // register again (once, for both threads)
    }
    return {attempt, s};
  }
  auto json = ParseJson(r->body, "heartbeat: answer", kServerAnswerLimits);
  if (!json.ok()) return {attempt, Status(StatusCode::kInternal, json.status().message())};
  Result<protocol::ReportAnswer> answer = protocol::ParseReportAnswer(*json);
  if (!answer.ok()) {
    return {attempt, Status(StatusCode::kInternal,
                            "heartbeat: malformed answer: " + answer.status().message())};
  }
  runtime_thread_.Reached();  // the server has heard the node: it is not timing it out
  return {attempt, std::move(answer)};
}

void AgentLoop::Acknowledge(const Report& report, const protocol::ReportAnswer& answer) {
  const bool taken = !answer.stale_report;
  {
    std::lock_guard lock(report_mu_);
    // Output is written at its offset whichever report brings it, so even a stale report's
    // output is the server's now.
    for (const auto& [key, end] : report.log_ends) {
      int64_t& offset = log_offsets_[key];
      offset = std::max(offset, end);
    }
    if (taken) taken_version_ = std::max(taken_version_, report.version);
  }
  if (taken) runtime_thread_.Forget(report.finished);
  // A launch the codec refused (answer.refused_run) is not run: reported as nothing running,
  // the server sees that it stays so.
  for (const TaskLaunch& launch : answer.run) runtime_thread_.Launch(launch);
  for (const KillOrder& kill : answer.kill) runtime_thread_.Kill(kill);
}

std::optional<protocol::GpuMetrics> AgentLoop::DueGpuMetrics(
    const std::vector<RunningTask>& running) {
  std::lock_guard lock(sample_mu_);
  if (!sample_ || sample_sent_) return std::nullopt;
  sample_sent_ = true;
  return GpuMetricsReport(Attribute(*sample_, running, ProcParentOf), sampled_at_ms_);
}

Status AgentLoop::Beat() {
  std::string token;
  {
    std::lock_guard lock(report_mu_);
    token = node_token_;
  }
  if (token.empty()) {
    CORRAL_RETURN_IF_ERROR(Register());
    std::lock_guard lock(report_mu_);
    token = node_token_;
  }
  std::optional<Report> report = BuildReport(ReportKind::kFull);
  Sent sent = Send(*http_, token, *report);
  last_attempt_ = sent.attempt;
  if (!sent.answer.ok()) return sent.answer.status();
  if (answered_url_ != server_url_) {
    std::cerr << "corral agent: talking to " << server_url_
              << (answered_url_.empty() ? "" : " (was " + answered_url_ + ")") << "\n";
    answered_url_ = server_url_;
  }
  Acknowledge(*report, *sent.answer);
  // The server had no thread to spare for a long poll: pause instead of asking again at once.
  pause_ms_ = sent.answer->retry_after_ms.value_or(0);
  return Status::Ok();
}

void AgentLoop::TalkTo(const std::string& url) {
  if (url == server_url_) return;
  {
    std::lock_guard lock(report_mu_);
    server_url_ = url;
  }
  http_ = MakeClient(url, options_);
}

void AgentLoop::WakePusher() {
  {
    std::lock_guard lock(push_mu_);
    push_wanted_ = true;
  }
  push_cv_.notify_one();
}

void AgentLoop::StopPusher() {
  {
    std::lock_guard lock(push_mu_);
    push_stopping_ = true;
  }
  push_cv_.notify_one();
  if (pusher_.joinable()) pusher_.join();
}

void AgentLoop::PushLoop() {
  std::unique_lock lock(push_mu_);
  while (true) {
    push_cv_.wait(lock, [&] { return push_wanted_ || push_stopping_; });
    if (push_stopping_) return;
    // A busy server asked for a pause (HoldOff): the push waits it out, as the heartbeats do.
    if (push_cv_.wait_until(lock, BusyUntil(), [&] { return push_stopping_; })) return;
    push_wanted_ = false;  // changes published from now on ask for another push
    lock.unlock();
    std::string token, url;
    {
      std::lock_guard report_lock(report_mu_);
      token = node_token_;
      url = server_url_;
    }
    if (url != push_url_) {  // the heartbeat thread found another server
      push_url_ = url;
      push_http_ = MakeClient(url, options_);
    }
    // Not registered: the next heartbeat reports everything. A failed push is not retried
    // either: the next heartbeat carries the same states. (Every server that accepts this
    // agent's protocol version takes partial reports.)
    if (!token.empty()) {
      if (std::optional<Report> report = BuildReport(ReportKind::kPartial)) {
        Sent sent = Send(*push_http_, token, *report);
        if (sent.answer.ok()) {
          Acknowledge(*report, *sent.answer);
        } else if (const std::optional<Seconds> after = sent.answer.status().retry_after()) {
          HoldOff(BusyWait(*after, push_rng_.UniformDouble()));
        }
      }
    }
    lock.lock();
  }
}

Status AgentLoop::Run(const std::atomic<bool>& stop) {
  if (options_.metrics_interval_ms > 0 && !sampler_.joinable()) {
    stopping_ = false;
    sampler_ = std::thread([this] { SampleLoop(); });
  }
  // A registration made before the loop (RegisterAgent) said when to fence.
  if (options_.fence) runtime_thread_.SetFence(FenceOf(options_.fence));
  // Polls the runtime once before it returns: the first heartbeat reports the adopted tasks.
  runtime_thread_.Start();
  pusher_ = std::thread([this] { PushLoop(); });
  Status s = BeatUntil(stop);
  StopPusher();
  runtime_thread_.Stop();
  StopSampler();
  return s;
}

void AgentLoop::HoldOff(std::chrono::milliseconds wait) {
  const int64_t until =
      (std::chrono::steady_clock::now() + wait).time_since_epoch() / std::chrono::nanoseconds(1);
  int64_t held = busy_until_ns_.load();
  while (held < until && !busy_until_ns_.compare_exchange_weak(held, until)) {
  }
}

std::chrono::steady_clock::time_point AgentLoop::BusyUntil() const {
  return std::chrono::steady_clock::time_point(std::chrono::nanoseconds(busy_until_ns_.load()));
}

Status AgentLoop::BeatUntil(const std::atomic<bool>& stop) {
  AnsweredErrorBackoff backoff(std::random_device{}());
  // While the server requests go to fails to answer: the search for one that does.
  std::optional<LeaderSearch> search;
  std::chrono::steady_clock::time_point search_start;
  while (!stop) {
    Status s = Beat();
    int wait_ms = 0;
    if (s.ok()) {
      backoff.Reset();
      search.reset();
      wait_ms = pause_ms_;
    } else {
      bool registered;
      {
        std::lock_guard lock(report_mu_);
        registered = !node_token_.empty();
      }
      if (!registered && IsFatalRegistrationError(s)) {
        return s;  // a wrong join token, a name held, another cluster: retrying cannot help
      }
      if (last_attempt_.outcome == Outcome::kAnswered) {
        // The server answered an error (5xx, a broken answer): ask it again, less and less often;
        // a busy one (503 saturated, 429): when it said, and the pushes wait as long.
        search.reset();
        const std::chrono::milliseconds wait = backoff.Next(s);
        if (s.retry_after()) HoldOff(wait);
        wait_ms = static_cast<int>(wait.count());
      } else {
        if (!search) {
          std::cerr << "corral agent: " << server_url_ << ": " << last_attempt_.detail
                    << "; looking for the leader among " << options_.servers.ToString() << "\n";
          search.emplace(options_.servers, server_url_, Idempotency::kIdempotent, std::nullopt);
          search_start = std::chrono::steady_clock::now();
        }
        const LeaderSearch::Decision next =
            search->Next(last_attempt_, std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::steady_clock::now() - search_start));
        TalkTo(search->url());
        wait_ms = static_cast<int>(next.wait.count());
      }
    }
    // A pause a busy server asked the push thread for holds the heartbeats too.
    const auto busy_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
        BusyUntil() - std::chrono::steady_clock::now());
    wait_ms = std::max(wait_ms, static_cast<int>(busy_ms.count()));
    for (int waited = 0; waited < wait_ms && !stop; waited += 50) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, wait_ms - waited)));
    }
  }
  return Status::Ok();
}

}  // namespace corral::agent
