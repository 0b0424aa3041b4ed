// Waiting for jobs from the CLI (job_wait.h): what an ended job exits with, and waiting and
// following its output against a fake server on loopback whose job ends after a few polls.
#include "cli/job_wait.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <mutex>
#include <sstream>
#include <thread>

#include "protocol/job_spec.h"

namespace corral::cli {
namespace {

using model::JobState;

protocol::TaskView Task(int index, int64_t generation, std::optional<int> exit_code,
                        std::optional<int> signal = std::nullopt) {
  protocol::TaskView t;
  t.index = index;
  t.generation = generation;
  t.node = "n1";
  t.state = model::TaskState::kExited;
  t.exit_code = exit_code;
  t.signal = signal;
  return t;
}

protocol::JobView Ended(JobState state, std::vector<protocol::TaskView> tasks = {}) {
  protocol::JobView view;
  view.summary.id = JobId(7);
  view.summary.state = state;
  view.spec.command = {"true"};
  view.tasks = std::move(tasks);
  return view;
}

TEST(JobExitCodeTest, StatesWithoutACodeOfTheirOwnHaveDocumentedOnes) {
  EXPECT_EQ(JobExitCode(Ended(JobState::kSucceeded, {Task(0, 1, 0)})), 0);
  EXPECT_EQ(JobExitCode(Ended(JobState::kTimeout)), kExitTimeout);
  EXPECT_EQ(JobExitCode(Ended(JobState::kOom)), kExitOom);
  EXPECT_EQ(JobExitCode(Ended(JobState::kCancelled)), kExitCancelled);
  EXPECT_EQ(JobExitCode(Ended(JobState::kLost)), kExitLost);
  EXPECT_EQ(JobExitCode(Ended(JobState::kRunning)), 1);
}

TEST(JobExitCodeTest, AFailedJobExitsWithItsFirstFailedTaskOfItsLastRun) {
  EXPECT_EQ(JobExitCode(Ended(JobState::kFailed, {Task(0, 1, 3)})), 3);
  // Task 1 of the last run decides, not task 0 of the first run, nor task 2 after it.
  EXPECT_EQ(JobExitCode(Ended(JobState::kFailed,
                              {Task(0, 1, 9), Task(2, 2, 4), Task(0, 2, 0), Task(1, 2, 5)})),
            5);
  // A signal: 128 + N, as a shell says it.
  EXPECT_EQ(JobExitCode(Ended(JobState::kFailed, {Task(0, 1, std::nullopt, 11)})), 139);
  // No task ended with a code or a signal (it could not start): 1.
  EXPECT_EQ(JobExitCode(Ended(JobState::kFailed, {Task(0, 1, std::nullopt)})), 1);
  EXPECT_EQ(JobExitCode(Ended(JobState::kFailed)), 1);
  // The task that failed on its own, not the one corral stopped because of it.
  protocol::TaskView stopped = Task(0, 1, std::nullopt, 15);
  stopped.end_cause = model::TaskEndCause::kStopped;
  EXPECT_EQ(JobExitCode(Ended(JobState::kFailed, {stopped, Task(1, 1, 3)})), 3);
  EXPECT_EQ(JobExitCode(Ended(JobState::kFailed, {stopped})), 143);
  // A code no process exits with is not passed on as itself.
  EXPECT_EQ(JobExitCode(Ended(JobState::kFailed, {Task(0, 1, 300)})), 1);
}

// A server with job 7, running for `polls` views of it and then failed with code 3, whose
// stdout grows by a line after each view while it runs and is served `page` bytes at a time.
class FakeJobServer {
 public:
  FakeJobServer(int polls, size_t page) : polls_(polls), page_(page) {
    server_.Get(R"(/api/v1/jobs/7)", [this](const httplib::Request&, httplib::Response& res) {
      std::lock_guard lock(mu_);
      ++views;
      const bool ended = views > polls_;
      res.set_content(protocol::ToJson(ended ? Ended(JobState::kFailed, {Task(0, 1, 3)})
                                             : Ended(JobState::kRunning))
                          .dump(),
                      "application/json");
    });
    server_.Get(R"(/api/v1/jobs/7/logs)",
                [this](const httplib::Request& req, httplib::Response& res) {
                  std::lock_guard lock(mu_);
                  const bool stderr_stream = req.get_param_value("stream") == "stderr";
                  // One more line after each view of the running job.
                  if (!stderr_stream && views > appended_ && views <= polls_) {
                    log_ += "line " + std::to_string(views) + "\n";
                    appended_ = views;
                  }
                  const std::string& log = stderr_stream ? errors_ : log_;
                  const size_t offset =
                      std::min<size_t>(std::stoull(req.get_param_value("offset")), log.size());
                  const std::string body = log.substr(offset, page_);
                  res.set_header("X-Corral-Log-Offset", std::to_string(offset + body.size()));
                  res.set_header("X-Corral-Log-Size", std::to_string(log.size()));
                  res.set_content(body, "text/plain");
                });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~FakeJobServer() {
    server_.stop();
    thread_.join();
  }
  ApiClient Client() const {
    ClientConfig config;
    config.servers = *ServerList::Parse("http://127.0.0.1:" + std::to_string(port_));
    config.token = "t";
    return ApiClient(config);
  }
  std::string Log() {
    std::lock_guard lock(mu_);
    return log_;
  }
  void SetErrors(std::string text) {
    std::lock_guard lock(mu_);
    errors_ = std::move(text);
  }

  std::atomic<int> views = 0;

 private:
  const int polls_;
  const size_t page_;
  std::mutex mu_;
  std::string log_, errors_;
  int appended_ = 0;  // the view after which the last line was added
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

TEST(WaitForJobTest, PollsUntilTheJobEndsAndReturnsItsLastView) {
  FakeJobServer server(/*polls=*/3, /*page=*/1024);
  ApiClient client = server.Client();
  auto view = WaitForJob(client, JobId(7));
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(view->summary.state, JobState::kFailed);
  EXPECT_EQ(JobExitCode(*view), 3);
  EXPECT_EQ(server.views, 4);
}

TEST(PrintLogTest, FollowingPrintsEveryLineOnceUntilTheJobEnds) {
  FakeJobServer server(/*polls=*/3, /*page=*/4);  // pages smaller than a line
  ApiClient client = server.Client();
  std::ostringstream out;
  auto printed = PrintLog(client, {.job = JobId(7), .follow = true}, out);
  ASSERT_TRUE(printed.ok()) << printed.status().message();
  EXPECT_EQ(out.str(), server.Log());
  EXPECT_EQ(out.str(), "line 1\nline 2\nline 3\n");
  EXPECT_EQ(*printed, static_cast<int64_t>(out.str().size()));
}

TEST(PrintLogTest, WithoutFollowingItPrintsWhatThereIsAndTheSizeOfTheOtherStream) {
  FakeJobServer server(/*polls=*/0, /*page=*/1024);
  server.SetErrors("Traceback (most recent call last):\n");
  ApiClient client = server.Client();
  std::ostringstream out;
  auto printed = PrintLog(client, {.job = JobId(7)}, out);
  ASSERT_TRUE(printed.ok());
  EXPECT_EQ(*printed, 0);
  auto size = LogSize(client, {.job = JobId(7), .stream = LogStream::kStderr});
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, 35);
}

}  // namespace
}  // namespace corral::cli
