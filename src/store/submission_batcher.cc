#include "store/submission_batcher.h"

#include <algorithm>
#include <future>

namespace corral::store {

struct SubmissionBatcher::Request {
  JobRecord job;
  std::promise<Result<JobId>> result;
};

SubmissionBatcher::SubmissionBatcher(Store* store, Options options)
    : store_(store), options_{std::max<size_t>(options.max_batch, 1), options.max_linger} {
  writer_ = std::thread([this] { WriterLoop(); });
}

SubmissionBatcher::~SubmissionBatcher() {
  Close();
  writer_.join();
}

void SubmissionBatcher::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
  }
  work_.notify_all();
}

SubmissionBatcher::Stats SubmissionBatcher::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Result<JobId> SubmissionBatcher::Submit(JobRecord job) {
  Request request{std::move(job), {}};
  std::future<Result<JobId>> done = request.result.get_future();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return FailedPrecondition("submit: the submission queue is closed");
    queue_.push_back(&request);
  }
  work_.notify_one();
  return done.get();
}

void SubmissionBatcher::WriterLoop() {
  std::vector<Request*> batch;
  for (;;) {
    batch.clear();
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_.wait(lock, [this] { return !queue_.empty() || closed_; });
      if (queue_.empty()) return;  // closed and drained
      size_t expected = std::min(last_batch_, options_.max_batch);
      if (queue_.size() < expected && !closed_) {
        auto linger =
            std::min<std::chrono::steady_clock::duration>(options_.max_linger, last_commit_ / 4);
        work_.wait_for(lock, linger, [&] { return queue_.size() >= expected || closed_; });
      }
      while (!queue_.empty() && batch.size() < options_.max_batch) {
        batch.push_back(queue_.front());
        queue_.pop_front();
      }
    }
    auto start = std::chrono::steady_clock::now();
    Commit(batch);
    last_commit_ = std::chrono::steady_clock::now() - start;
    last_batch_ = batch.size();
  }
}

void SubmissionBatcher::Commit(const std::vector<Request*>& batch) {
  std::vector<JobRecord> jobs;
  jobs.reserve(batch.size());
  for (Request* r : batch) jobs.push_back(std::move(r->job));
  auto ids = store_->InsertJobs(jobs);
  if (ids.ok()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.jobs += static_cast<int64_t>(batch.size());
      stats_.batches += 1;
      stats_.largest_batch = std::max(stats_.largest_batch, batch.size());
    }
    for (size_t i = 0; i < batch.size(); ++i) batch[i]->result.set_value((*ids)[i]);
    return;
  }
  // A batch fails as a whole. When the cause is a job's content, commit the others one by one
  // so that one bad submission does not fail its neighbours. When the database failed (I/O,
  // internal) every job gets the error: retrying could duplicate jobs whose commit outcome is
  // unknown. A fenced server (unavailable) would be fenced again for each.
  StatusCode code = ids.status().code();
  bool per_job = batch.size() > 1 && code != StatusCode::kIoError &&
                 code != StatusCode::kInternal && code != StatusCode::kUnavailable;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!per_job) {
      batch[i]->result.set_value(ids.status());
      continue;
    }
    auto id = store_->InsertJob(jobs[i]);
    if (id.ok()) {
      std::lock_guard<std::mutex> lock(mu_);
      stats_.jobs += 1;
      stats_.batches += 1;
      stats_.largest_batch = std::max<size_t>(stats_.largest_batch, 1);
    }
    batch[i]->result.set_value(std::move(id));
  }
}

}  // namespace corral::store
