#include "store/submission_batcher.h"

namespace corral::store {

namespace {

using SubmissionCommitter = GroupCommitter<JobRecord, Result<JobId>>;

SubmissionCommitter::Calls InsertCalls(Store* store) {
  return {
      .group = [store](const std::vector<JobRecord>& jobs) -> Result<std::vector<Result<JobId>>> {
        auto ids = store->InsertJobs(jobs);
        if (!ids.ok()) return ids.status();
        return std::vector<Result<JobId>>(ids->begin(), ids->end());
      },
      .one = [store](const JobRecord& job) { return store->InsertJob(job); },
      .without_commit = nullptr,
  };
}

}  // namespace

SubmissionBatcher::SubmissionBatcher(Store* store, Options options)
    : committer_(InsertCalls(store), {options.max_batch, options.max_linger},
                 FailedPrecondition("submit: the submission queue is closed")) {}

SubmissionBatcher::Stats SubmissionBatcher::stats() const {
  SubmissionCommitter::Stats s = committer_.stats();
  return {.jobs = s.items, .batches = s.commits, .largest_batch = s.largest_group};
}

Result<JobId> SubmissionBatcher::Submit(JobRecord job) {
  return committer_.Enqueue(std::move(job)).get();
}

}  // namespace corral::store
