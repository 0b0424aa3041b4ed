#include "cli/job_wait.h"

#include <algorithm>
#include <charconv>
#include <string>
#include <thread>

#include "model/states.h"

namespace corral::cli {

namespace {

// True for a final job state, and for a state this CLI does not know (a newer server's):
// waiting for it to change would never end.
bool Ended(const nlohmann::json& job) {
  const auto state = job.find("state");
  if (state == job.end() || !state->is_string()) return true;
  auto parsed = model::ParseJobState(state->get<std::string>());
  return !parsed.ok() || model::IsFinal(*parsed);
}

// A header holding an integer; `fallback` when it is absent or not a number.
int64_t IntHeader(const Reply& reply, const std::string& name, int64_t fallback) {
  const std::string value = reply.Header(name);
  int64_t v = 0;
  auto [end, err] = std::from_chars(value.data(), value.data() + value.size(), v);
  return err == std::errc() && end == value.data() + value.size() ? v : fallback;
}

std::string JobPath(JobId id) { return "/api/v1/jobs/" + std::to_string(id.value()); }

// The log's path, ending with a query that "&offset=N" extends.
std::string LogPath(const LogRequest& request) {
  std::string path = JobPath(request.job) + "/logs?task=" + std::to_string(request.task) +
                     "&stream=" + (request.stream == LogStream::kStderr ? "stderr" : "stdout");
  if (request.generation) path += "&generation=" + std::to_string(*request.generation);
  return path;
}

// The next poll's wait: half as long again as the last, up to kMaxPoll.
std::chrono::milliseconds Backoff(std::chrono::milliseconds last) {
  return std::min(kMaxPoll, last + last / 2);
}

}  // namespace

int JobExitCode(const protocol::JobView& job) {
  switch (job.summary.state) {
    case model::JobState::kSucceeded:
      return 0;
    case model::JobState::kTimeout:
      return kExitTimeout;
    case model::JobState::kOom:
      return kExitOom;
    case model::JobState::kCancelled:
      return kExitCancelled;
    case model::JobState::kLost:
      return kExitLost;
    case model::JobState::kFailed:
      break;
    case model::JobState::kPending:
    case model::JobState::kStarting:
    case model::JobState::kRunning:
      return 1;
  }
  // The last run's tasks, by index: the first that failed decides.
  int64_t last_run = 0;
  for (const protocol::TaskView& t : job.tasks) last_run = std::max(last_run, t.generation);
  std::vector<const protocol::TaskView*> tasks;
  for (const protocol::TaskView& t : job.tasks) {
    if (t.generation == last_run) tasks.push_back(&t);
  }
  std::sort(tasks.begin(), tasks.end(),
            [](const auto* a, const auto* b) { return a->index < b->index; });
  // A task that failed on its own explains the run before one corral stopped because of it
  // (the rest of a gang), as the job's reason does (reconcile::EvaluateRun).
  for (const bool stopped : {false, true}) {
    for (const protocol::TaskView* t : tasks) {
      if ((t->end_cause == model::TaskEndCause::kStopped) != stopped) continue;
      if (t->signal && *t->signal > 0) return std::min(255, 128 + *t->signal);
      // A code outside 1..255 (no process exits so) cannot be passed on as itself: 1.
      if (t->exit_code && *t->exit_code != 0) {
        return *t->exit_code <= 255 && *t->exit_code > 0 ? *t->exit_code : 1;
      }
    }
  }
  return 1;
}

Result<protocol::JobView> WaitForJob(ApiClient& client, JobId id) {
  std::chrono::milliseconds wait = kFirstPoll;
  while (true) {
    auto job = client.Get(JobPath(id));
    if (!job.ok()) return job.status();
    if (Ended(*job)) {
      const std::string state = job->value("state", "");
      if (!model::ParseJobState(state).ok()) {
        return FailedPrecondition("job " + std::to_string(id.value()) + " is in state '" + state +
                                  "', which this corral does not know: upgrade corral here");
      }
      return protocol::ParseJobView(*job);
    }
    std::this_thread::sleep_for(wait);  // polling: the API has no way to be told of an end
    wait = Backoff(wait);
  }
}

Result<int64_t> PrintLog(ApiClient& client, const LogRequest& request, std::ostream& out) {
  const std::string path = LogPath(request);
  int64_t offset = 0;
  bool ended = false;  // following: the job had ended when the log was last read to its end
  std::chrono::milliseconds wait = kFirstPoll;
  while (true) {
    auto page = client.GetReply(path + "&offset=" + std::to_string(offset));
    if (!page.ok()) return page.status();
    out << page->body << std::flush;
    const int64_t read = offset;
    offset =
        IntHeader(*page, "X-Corral-Log-Offset", offset + static_cast<int64_t>(page->body.size()));
    if (offset < IntHeader(*page, "X-Corral-Log-Size", offset)) continue;  // another page
    if (!request.follow || ended) return offset;
    auto job = client.Get(JobPath(request.job));
    if (!job.ok()) return job.status();
    // Ended: its last lines may have come with its end, after the read above; read once more.
    ended = Ended(*job);
    if (ended) continue;
    // New output resets the backoff: a job that prints is likely to print again soon.
    wait = offset > read ? kFirstPoll : Backoff(wait);
    std::this_thread::sleep_for(wait);
  }
}

Result<int64_t> LogSize(ApiClient& client, const LogRequest& request) {
  // Past any log's end (logs are capped far below a terabyte): the answer is the size alone.
  constexpr int64_t kPastTheEnd = 1'000'000'000'000;
  auto page = client.GetReply(LogPath(request) + "&offset=" + std::to_string(kPastTheEnd));
  if (!page.ok()) return page.status();
  return IntHeader(*page, "X-Corral-Log-Size", 0);
}

}  // namespace corral::cli
