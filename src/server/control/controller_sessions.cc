// Controller, sessions (docs/sessions.md): submitting, viewing and stopping interactive
// sessions, the session gateway's proxy target and activity, and the idle checks.

#include <algorithm>
#include <future>
#include <system_error>

#include "model/session.h"
#include "server/control/controller.h"
#include "server/control/controller_internal.h"
#include "server/gateway/session.h"

namespace corral::server {

using namespace controller_internal;  // NOLINT(google-build-using-namespace)

// --- Sessions --------------------------------------------------------------------------------

namespace {

// Sessions are personal: only the owner and admins see them (others get NotFound).
bool MaySeeSession(const Principal& who, const store::JobRecord& record) {
  return who.admin || who.name == record.user;
}

// Only the owner may use the proxy: apps are served on the server's origin, so whoever's
// browser opens one runs its JavaScript with access to every session that browser may reach.
bool MayUseSession(const Principal& who, const store::JobRecord& record) {
  return who.name == record.user;
}

std::string SessionName(JobId id) { return "session " + std::to_string(id.value()); }

// The stored record and spec of session `id` when `may` lets `who` at it; NotFound naming the
// session otherwise (also for jobs that are not sessions), so that others learn nothing.
Result<std::pair<store::JobRecord, JobSpec>> StoredSession(store::Store& store,
                                                           const Principal& who, JobId id,
                                                           bool (*may)(const Principal&,
                                                                       const store::JobRecord&)) {
  auto record = store.GetJob(id);
  if (!record.ok()) {
    if (record.status().code() == StatusCode::kNotFound) {
      return NotFound(SessionName(id) + " not found");
    }
    return record.status();
  }
  auto spec =
      ParseJobSpec(nlohmann::json::parse(record->spec_json, nullptr, false), SpecOrigin::kStored);
  if (!spec.ok() || !spec->session || !may(who, *record)) {
    return NotFound(SessionName(id) + " not found");
  }
  return std::make_pair(std::move(record).value(), std::move(spec).value());
}

// Where a session's app listens: its task's allocation "session": {"address", "port"}.
struct AppAddress {
  std::string address;
  int port = 0;
};
std::optional<AppAddress> AppAddressOf(const store::TaskRecord& task) {
  const auto& session = task.allocation.session;
  if (!session) return std::nullopt;
  return AppAddress{session->address, session->port};
}

// Apps asked at once by AskIdleSessionAppsLocked (each a thread for up to the probe's timeout).
constexpr size_t kAppQuestionsAtOnce = 16;

}  // namespace

Result<protocol::SubmitAnswer> Controller::SubmitSession(const Principal& who, JobSpec spec) {
  if (!spec.session) return InvalidArgument("field 'session': is required to start a session");
  return Submit(who, std::move(spec));
}

std::string Controller::SessionToken(const protocol::SessionSpec& session) const {
  if (!session.stored_token.empty()) return session.stored_token;
  return HmacSha256Hex(config_.session_key, "corral session token v1:" + session.salt);
}

Seconds Controller::IdleTimeoutOf(const JobSpec& spec) const {
  // A shell in use may send nothing for hours (a long command running in it), so an idle timeout
  // could stop it while in use: shells are never stopped when idle, whatever the spec says (the
  // CLI asks for 0; an API client may leave it out).
  if (spec.session && spec.session->shell) return Seconds(0);
  if (spec.session && spec.session->idle_timeout_s) return Seconds(*spec.session->idle_timeout_s);
  return config_.session_idle_timeout;
}

protocol::SessionView Controller::SessionOfLocked(const Principal& who,
                                                  const store::JobRecord& record,
                                                  const JobSpec& spec,
                                                  const std::vector<store::TaskRecord>& tasks,
                                                  const LiveJob* live) const {
  const store::JobRecord& current = live ? live->record : record;
  protocol::SessionView out{.id = record.id,
                            .name = record.name,
                            .user = record.user,
                            .project = record.project,
                            .state = current.state,
                            .reason = record.reason,
                            .environment = spec.environment,
                            .path = model::SessionUrlPrefix(record.id.value()),
                            .idle_timeout = IdleTimeoutOf(spec),
                            .submit_time = record.submit_time,
                            .start_time = current.start_time,
                            .stopping = live && live->end.cancel_requested};
  for (const auto& t : tasks) {
    if (model::IsEnded(t.state)) continue;
    out.node = t.node;
    if (const auto& session = t.allocation.session) {
      out.address = session->address;
      out.port = session->port;
    }
  }
  if (live && current.state == JobState::kRunning) {
    out.last_activity = LastUse(ActivityOf(*live, clock_.Now()));
    if (live->idle_notice_at) {
      out.idle_notice = protocol::IdleNotice{*live->idle_notice_at,
                                             *live->idle_notice_at + config_.session_idle_warning};
    }
  }
  if (live && live->held) {
    out.pending_reason = ReasonOf(*live->held);
  } else if (auto reason = scheduler_->PendingReasonOf(record.id)) {
    out.pending_reason = protocol::PendingReason{reason->code, reason->message};
  }
  // The secret lets whoever holds it into the app directly: its owner only, not even admins.
  if (who.name == record.user && spec.session) out.token = SessionToken(*spec.session);
  return out;
}

Result<protocol::SessionView> Controller::SessionView(const Principal& who, JobId id) {
  auto stored = StoredSession(store_, who, id, MaySeeSession);
  if (!stored.ok()) return stored.status();
  const auto& [record, spec] = *stored;
  auto tasks = store_.TasksOfJob(id);
  if (!tasks.ok()) return tasks.status();
  std::vector<store::TaskRecord> run;  // the current run's
  for (const auto& t : *tasks) {
    if (t.generation == record.restarts + 1) run.push_back(t);
  }
  auto lock = LockState();
  auto live = jobs_.find(id);
  if (live != jobs_.end())
    return SessionOfLocked(who, record, spec, live->second.tasks, &live->second);
  return SessionOfLocked(who, record, spec, run, nullptr);
}

std::vector<protocol::SessionView> Controller::ListSessions(const Principal& who) {
  auto lock = LockState();
  std::vector<protocol::SessionView> out;
  for (JobId id : sessions_) {
    const LiveJob& job = jobs_.at(id);
    if (job.record.user != who.name) continue;
    out.push_back(SessionOfLocked(who, job.record, job.spec, job.tasks, &job));
  }
  return out;
}

Status Controller::StopSession(const Principal& who, JobId id) {
  auto view = SessionView(who, id);  // NotFound for anyone but its owner and admins
  if (!view.ok()) return view.status();
  Status s = Cancel(who, id);
  if (s.code() == StatusCode::kFailedPrecondition) {
    return FailedPrecondition(SessionName(id) + " already ended (" +
                              std::string(model::ToString(view->state)) + ")");
  }
  return s;
}

Result<Controller::SessionEndpoint> Controller::ProxyTarget(const Principal& who, JobId id) {
  {
    auto lock = LockState();
    auto it = jobs_.find(id);
    if (it != jobs_.end()) {
      LiveJob& job = it->second;
      if (!job.spec.session || !MayUseSession(who, job.record)) {
        return NotFound(SessionName(id) + " not found");
      }
      SessionEndpoint endpoint;
      endpoint.state = job.record.state;
      endpoint.stopping = job.Stopping();
      if (!endpoint.Serving() || job.tasks.empty()) return endpoint;
      const std::optional<AppAddress> app = AppAddressOf(job.tasks[0]);
      if (!app) return Status(StatusCode::kInternal, SessionName(id) + " has no port");
      endpoint.address = app->address;
      endpoint.port = app->port;
      endpoint.token = SessionToken(*job.spec.session);
      job.last_activity = clock_.Now();
      return endpoint;
    }
  }
  // Not live: ended, or not a job at all.
  auto stored = StoredSession(store_, who, id, MayUseSession);
  if (!stored.ok()) return stored.status();
  SessionEndpoint endpoint;
  endpoint.state = stored->first.state;
  return endpoint;
}

void Controller::NoteSessionUse(JobId id) {
  auto lock = LockState();
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !it->second.spec.session || it->second.Stopping() ||
      it->second.record.state != JobState::kRunning) {
    return;
  }
  it->second.last_activity = clock_.Now();
}

SessionActivity Controller::ActivityOf(const LiveJob& job, Seconds now) const {
  SessionActivity activity{job.last_activity, job.app_last_activity, std::nullopt};
  if (auto busy = gpu_monitor_.JobLastBusyMs(job.record.id, now.value() * 1000)) {
    activity.gpus_last_busy = Seconds(*busy / 1000);
  }
  return activity;
}

namespace {

bool IsRunningSession(const store::JobRecord& record, const JobSpec& spec, bool stopping) {
  return spec.session && record.state == JobState::kRunning && !stopping;
}

}  // namespace

void Controller::AskIdleSessionAppsLocked(std::unique_lock<std::mutex>& lock, Seconds now) {
  SessionAppProbe* const probe = config_.session_app_probe;
  if (probe == nullptr) return;
  struct Question {
    JobId job;
    int64_t allocation_id = 0;  // the run asked about
    SessionApp app;
  };
  std::vector<Question> questions;
  for (JobId id : sessions_) {
    const LiveJob& job = jobs_.at(id);
    if (!IsRunningSession(job.record, job.spec, job.Stopping()) || job.tasks.empty()) continue;
    const IdlePolicy policy{IdleTimeoutOf(job.spec), config_.session_idle_warning};
    if (!AsksTheApp(NextSessionStep(ActivityOf(job, now), job.idle_notice_at, policy, now)))
      continue;
    const std::optional<AppAddress> app = AppAddressOf(job.tasks[0]);
    if (!app) continue;
    questions.push_back({id,
                         job.tasks[0].allocation_id,
                         {app->address, app->port, model::SessionUrlPrefix(id.value()),
                          SessionToken(*job.spec.session)}});
  }
  if (questions.empty()) return;

  std::vector<std::optional<Seconds>> said(questions.size());
  lock.unlock();  // heartbeats and the API go on while apps answer
  for (size_t first = 0; first < questions.size(); first += kAppQuestionsAtOnce) {
    const size_t end = std::min(questions.size(), first + kAppQuestionsAtOnce);
    std::vector<std::future<std::optional<Seconds>>> answers;
    for (size_t i = first; i < end; ++i) {
      auto ask = [probe, &app = questions[i].app] { return probe->LastActivity(app); };
      try {
        answers.push_back(std::async(std::launch::async, ask));
      } catch (const std::system_error&) {  // no thread to spare: ask on this one
        answers.push_back(std::async(std::launch::deferred, ask));
      }
    }
    for (size_t i = first; i < end; ++i) said[i] = answers[i - first].get();
  }
  lock.lock();
  DrainInboxLocked();  // what was submitted while the apps were asked

  for (size_t i = 0; i < questions.size(); ++i) {
    if (!said[i]) continue;  // no answer: nothing changes
    auto it = jobs_.find(questions[i].job);
    // It may have ended, or started again elsewhere, while its app was asked.
    if (it == jobs_.end() || it->second.tasks.empty() ||
        it->second.tasks[0].allocation_id != questions[i].allocation_id) {
      continue;
    }
    // An app's clock ahead of this one counts as "in use now", never as later than now.
    const Seconds used = std::min(*said[i], now);
    std::optional<Seconds>& known = it->second.app_last_activity;
    if (!known || used > *known) known = used;
  }
}

void Controller::CheckSessionsLocked(std::unique_lock<std::mutex>& lock) {
  // One `now` for the questions and the steps: a session is noticed or stopped only after its
  // app was asked.
  const Seconds now = clock_.Now();
  AskIdleSessionAppsLocked(lock, now);
  SettleWritesLocked();  // changes decided while the apps were asked; the steps write directly
  std::vector<JobId> running;
  for (JobId id : sessions_) {
    const LiveJob& job = jobs_.at(id);
    if (IsRunningSession(job.record, job.spec, job.Stopping())) running.push_back(id);
  }
  for (JobId id : running) {
    LiveJob& job = jobs_.at(id);  // stopping one session never erases another
    const SessionActivity activity = ActivityOf(job, now);
    const IdlePolicy policy{IdleTimeoutOf(job.spec), config_.session_idle_warning};
    const std::string idle =
        "session idle for " + std::to_string(IdleFor(activity, now).value()) + " s";
    switch (NextSessionStep(activity, job.idle_notice_at, policy, now)) {
      case SessionStep::kNothing:
        break;
      case SessionStep::kNotice:
        // Recorded first: a notice the store did not take is given again at the next check.
        if (store_
                .AddJobEvent(id,
                             idle + ": stopping in " +
                                 std::to_string(config_.session_idle_warning.value()) +
                                 " s unless used",
                             now)
                .ok()) {
          job.idle_notice_at = now;
        }
        break;
      case SessionStep::kInUseAgain:
        if (store_.AddJobEvent(id, "session in use again", now).ok()) job.idle_notice_at.reset();
        break;
      case SessionStep::kStop:
        // On a store error nothing changed: the next check tries again.
        (void)RequestCancelLocked(job, idle);  // may erase `job`
        break;
    }
  }
}

}  // namespace corral::server
