// API routes of jobs: submit (single jobs and arrays), list, view, cancel, logs; the queue and
// the policy.

#include <limits>

#include "server/api/http_api_impl.h"

namespace corral::server {

using namespace api_internal;  // NOLINT(google-build-using-namespace)
using nlohmann::json;

namespace {

constexpr int kDefaultJobPage = 100;        // jobs per GET /api/v1/jobs without ?limit
constexpr int kMaxJobPage = 1000;           // the largest ?limit
constexpr int64_t kLogPageBytes = 1 << 20;  // the most one GET .../logs answers

}  // namespace

void HttpApi::Impl::RegisterJobs(HttpServer& http) {
  http.Post("/api/v1/jobs", Authed([this](const Principal& who, const auto& req, auto& res) {
              auto body = ParseBody(req);
              if (!body.ok()) return SendProblem(res, body.status());
              auto spec = protocol::ParseJobSpec(*body);
              if (!spec.ok()) return SendProblem(res, spec.status());
              // An array's answer has the array's id and its elements' ids, by index.
              auto job = spec->array ? controller_.SubmitArray(who, std::move(spec).value())
                                     : controller_.Submit(who, std::move(spec).value());
              if (!job.ok()) return SendProblem(res, job.status());
              SendJson(res, 201, protocol::ToJson(*job));
            }));
  http.Get("/api/v1/jobs", Authed([this](const Principal& who, const auto& req, auto& res) {
             ListJobs(who, req, res);
           }));
  http.Get(R"(/api/v1/jobs/(\d+))",
           Authed([this](const Principal& who, const auto& req, auto& res) {
             auto id = PathId(req, "job");
             if (!id.ok()) return SendProblem(res, id.status());
             auto view = controller_.JobView(who, JobId(*id));
             if (!view.ok()) return SendProblem(res, view.status());
             SendJson(res, 200, protocol::ToJson(*view));
           }));
  http.Post(R"(/api/v1/jobs/(\d+)/cancel)",
            Authed([this](const Principal& who, const auto& req, auto& res) {
              auto id = PathId(req, "job");
              if (!id.ok()) return SendProblem(res, id.status());
              Status s = controller_.Cancel(who, JobId(*id));
              if (!s.ok()) return SendProblem(res, s);
              SendJson(res, 202, {{"status", "cancelling"}});
            }));
  http.Get(R"(/api/v1/jobs/(\d+)/logs)", Authed([this](const Principal& who, const auto& req,
                                                       auto& res) { Logs(who, req, res); }));
  http.Post(R"(/api/v1/arrays/(\d+)/cancel)",
            Authed([this](const Principal& who, const auto& req, auto& res) {
              auto id = PathId(req, "array");
              if (!id.ok()) return SendProblem(res, id.status());
              auto ids = controller_.CancelArray(who, JobId(*id));
              if (!ids.ok()) return SendProblem(res, ids.status());
              json cancelled = json::array();
              for (JobId j : *ids) cancelled.push_back(j.value());
              SendJson(res, 202, {{"status", "cancelling"}, {"array_id", *id}, {"ids", cancelled}});
            }));
}

// Newest first, a page at a time: `limit` jobs with ids below `before` (only the elements of
// `array` when given); the header X-Corral-Next-Before carries the next page's `before` when
// older jobs match.
void HttpApi::Impl::ListJobs(const Principal& who, const HttpRequest& req, HttpResponse& res) {
  auto states = model::ParseJobStates(req.Param("state"));
  if (!states.ok()) return SendProblem(res, states.status());
  auto limit = IntParam(req, "limit", 1, kMaxJobPage);
  if (!limit.ok()) return SendProblem(res, limit.status());
  auto before = IntParam(req, "before", 1, kMaxCount);
  if (!before.ok()) return SendProblem(res, before.status());
  std::optional<JobId> before_id;
  if (*before) before_id = JobId(**before);
  auto array = IntParam(req, "array", 1, kMaxCount);
  if (!array.ok()) return SendProblem(res, array.status());
  std::optional<JobId> array_id;
  if (*array) array_id = JobId(**array);
  auto page =
      controller_.ListJobs(who, *states, req.Param("all") == "1",
                           static_cast<int>(limit->value_or(kDefaultJobPage)), before_id, array_id);
  if (!page.ok()) return SendProblem(res, page.status());
  if (page->next_before) {
    res.SetHeader("X-Corral-Next-Before", std::to_string(page->next_before->value()));
  }
  SendJson(res, 200, protocol::ToJson(page->jobs));
}

// A page of a task's log (LogSink::Read; a note stands for output dropped over the log's cap):
// X-Corral-Log-Offset is the offset to ask for next (unchanged past the end),
// X-Corral-Log-Size the stream's length now.
void HttpApi::Impl::Logs(const Principal& who, const HttpRequest& req, HttpResponse& res) {
  auto id = PathId(req, "job");
  if (!id.ok()) return SendProblem(res, id.status());
  auto task = IntParam(req, "task", 0, 999999);
  if (!task.ok()) return SendProblem(res, task.status());
  auto offset = IntParam(req, "offset", 0, kMaxCount);
  if (!offset.ok()) return SendProblem(res, offset.status());
  auto generation = IntParam(req, "generation", 1, std::numeric_limits<int32_t>::max());
  if (!generation.ok()) return SendProblem(res, generation.status());
  const std::string stream = req.HasParam("stream") ? req.Param("stream") : "stdout";
  auto page = controller_.ReadLog(who, JobId(*id), static_cast<int>(task->value_or(0)), stream,
                                  *generation, offset->value_or(0), kLogPageBytes);
  if (!page.ok()) return SendProblem(res, page.status());
  res.SetHeader("X-Corral-Log-Offset", std::to_string(page->next_offset));
  res.SetHeader("X-Corral-Log-Size", std::to_string(page->size));
  res.SetContent(page->data, "text/plain; charset=utf-8");
}

void HttpApi::Impl::RegisterQueue(HttpServer& http) {
  http.Get("/api/v1/queue", Authed([this](const Principal& who, const auto& req, auto& res) {
             auto limit = IntParam(req, "limit", 1, kMaxJobPage);
             if (!limit.ok()) return SendProblem(res, limit.status());
             auto queue =
                 controller_.QueueView(who, static_cast<int>(limit->value_or(kDefaultJobPage)));
             if (!queue.ok()) return SendProblem(res, queue.status());
             SendJson(res, 200, protocol::ToJson(*queue));
           }));
  http.Get("/api/v1/policy", Authed([this](const Principal&, const auto&, auto& res) {
             SendJson(res, 200, protocol::ToJson(controller_.PolicyView()));
           }));
}

}  // namespace corral::server
