// API routes of jobs: submit (single jobs and arrays), list, view, cancel, logs; the queue and
// the policy.

#include <limits>

#include "protocol/api_job_report.h"
#include "protocol/batch_script.h"
#include "server/api/http_api_impl.h"
#include "server/api/job_listing.h"

namespace corral::server {

using namespace api_internal;  // NOLINT(google-build-using-namespace)
using nlohmann::json;

namespace {

constexpr int64_t kLogPageBytes = 1 << 20;  // the most one GET .../logs answers

// A write of the in-job channel (POST .../report, .../checkpoint): the body read by `parse`,
// handed to `record` for the path's job; 204 once recorded.
template <typename Parse, typename Record>
auto ChannelWrite(Parse parse, Record record) {
  return [parse, record](const Principal& who, const HttpRequest& req, HttpResponse& res) {
    auto id = PathId(req, "job");
    if (!id.ok()) return SendProblem(res, id.status());
    auto body = ParseBody(req);
    if (!body.ok()) return SendProblem(res, body.status());
    auto value = parse(*body);
    if (!value.ok()) return SendProblem(res, value.status());
    Status s = record(who, JobId(*id), std::move(value).value());
    if (!s.ok()) return SendProblem(res, s);
    res.status = 204;
  };
}

}  // namespace

void HttpApi::Impl::RegisterJobs(HttpServer& http) {
  http.Post("/api/v1/jobs", Authed([this](const Principal& who, const auto& req, auto& res) {
              auto body = ParseBody(req);
              if (!body.ok()) return SendProblem(res, body.status());
              // A batch script's directives fill in what the request does not say.
              auto expanded = protocol::ExpandBatchScript(*body);
              if (!expanded.ok()) return SendProblem(res, expanded.status());
              auto spec = protocol::ParseJobSpec(expanded->spec);
              if (!spec.ok()) return SendProblem(res, spec.status());
              // An array's answer has the array's id and its elements' ids, by index.
              auto job = spec->array ? controller_.SubmitArray(who, std::move(spec).value())
                                     : controller_.Submit(who, std::move(spec).value());
              if (!job.ok()) return SendProblem(res, job.status());
              job->warnings.insert(job->warnings.begin(), expanded->warnings.begin(),
                                   expanded->warnings.end());
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
  // The in-job channel (docs/in-job.md): what a job's tasks report, with its job token.
  http.Post(R"(/api/v1/jobs/(\d+)/report)",
            Authed(ChannelWrite(&protocol::ParseJobReport,
                                [this](const Principal& who, JobId id, model::JobReport report) {
                                  return controller_.Report(who, id, std::move(report));
                                })));
  http.Post(R"(/api/v1/jobs/(\d+)/checkpoint)",
            Authed(ChannelWrite(&protocol::ParseJobCheckpoint,
                                [this](const Principal& who, JobId id, model::JobCheckpoint c) {
                                  return controller_.RecordCheckpoint(who, id, std::move(c));
                                })));
  http.Get(R"(/api/v1/jobs/(\d+)/metrics)",
           Authed([this](const Principal& who, const auto& req, auto& res) {
             auto id = PathId(req, "job");
             if (!id.ok()) return SendProblem(res, id.status());
             auto series = controller_.MetricSeries(who, JobId(*id));
             if (!series.ok()) return SendProblem(res, series.status());
             SendJson(res, 200, protocol::MetricSeriesJson(*series));
           }));
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

// A page of the listing the parameters ask (job_listing.h): the header X-Corral-Next-Cursor
// carries the next page's cursor when more jobs match, and, newest first by id, the deprecated
// X-Corral-Next-Before the next page's `before`.
void HttpApi::Impl::ListJobs(const Principal& who, const HttpRequest& req, HttpResponse& res) {
  auto request = ParseJobListing(req);
  if (!request.ok()) return SendProblem(res, request.status());
  const store::JobFilter& listing = request->listing;
  auto page = controller_.ListJobs(who, listing, request->all_projects);
  if (!page.ok()) return SendProblem(res, page.status());
  if (page->next) {
    res.SetHeader("X-Corral-Next-Cursor",
                  EncodeJobCursor(listing.sort, listing.direction, *page->next));
    if (listing.sort == store::JobSortKey::kId &&
        listing.direction == store::SortDirection::kDescending) {
      res.SetHeader("X-Corral-Next-Before", std::to_string(page->next->id.value()));
    }
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
  http.Get("/api/v1/partitions", Authed([this](const Principal&, const auto&, auto& res) {
             SendJson(res, 200, protocol::ToJson(controller_.Partitions()));
           }));
}

}  // namespace corral::server
