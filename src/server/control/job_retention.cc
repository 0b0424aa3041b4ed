#include "server/control/job_retention.h"

#include <algorithm>
#include <iostream>

#include "common/duration.h"
#include "model/states.h"
#include "server/control/checkpoint_folders.h"

namespace corral::server {

JobRetention::JobRetention(store::Store& store, LogSink& logs, Clock& clock, Options options)
    : store_(store), logs_(logs), clock_(clock), options_(options) {}

JobRetention::~JobRetention() { Stop(); }

void JobRetention::Start() {
  const bool checkpoints = !options_.checkpoint_root.empty() && options_.keep_checkpoints;
  if ((!options_.keep_finished && !checkpoints) || thread_.joinable()) return;
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
  }
  thread_ = std::thread([this] { Loop(); });
}

void JobRetention::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void JobRetention::Loop() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    auto purged = PurgeOnce();
    if (!purged.ok()) {
      std::cerr << "corral server: purging finished jobs: " << purged.status().message()
                << std::endl;
    } else if (purged->jobs > 0) {
      std::cout << "corral server: purged " << purged->jobs << " jobs that ended more than "
                << options_.keep_finished->value() << " s ago" << std::endl;
    }
    if (auto removed = RemoveCheckpointsOnce(); !removed.ok()) {
      std::cerr << "corral server: removing checkpoint folders: " << removed.status().message()
                << std::endl;
    }
    lock.lock();
    wake_.wait_for(lock, std::chrono::seconds(options_.period.value()), [&] { return stopping_; });
  }
}

Result<JobRetention::Purge> JobRetention::PurgeOnce() {
  Purge purge;
  if (!options_.keep_finished) return purge;
  std::lock_guard purging(purge_mu_);
  const Seconds before(clock_.Now().value() - options_.keep_finished->value());
  const int64_t batch = std::clamp<int64_t>(options_.batch_jobs, 1, store::Store::kMaxPurgeBatch);
  while (true) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) return purge;  // Stop() was called: the batch in flight was the last
    }
    auto ids = store_.PurgeableJobs(before, batch);
    if (!ids.ok()) return ids.status();
    if (ids->empty()) return purge;
    // A purged job's checkpoint folder goes first: once its row is gone, nothing would tell
    // whose it was.
    if (!options_.checkpoint_root.empty()) {
      for (JobId id : *ids) {
        if (Status s = RemoveCheckpointFolder(options_.checkpoint_root, id);
            !s.ok() && s.code() != StatusCode::kNotFound) {
          std::cerr << "corral server: removing checkpoint folders: " << s.message() << std::endl;
        }
      }
    }
    if (Status removed = logs_.RemoveJobs(*ids); !removed.ok()) {
      std::cerr << "corral server: purging finished jobs: " << removed.message() << std::endl;
    }
    auto purged = store_.PurgeJobs(*ids, before);
    if (!purged.ok()) return purged.status();
    if (purged->empty()) return purge;  // nothing listed could go: do not loop on it
    purge.jobs += static_cast<int64_t>(purged->size());
    ++purge.batches;
  }
}

Result<int64_t> JobRetention::RemoveCheckpointsOnce() {
  if (options_.checkpoint_root.empty() || !options_.keep_checkpoints) return 0;
  std::lock_guard removing(purge_mu_);
  const Seconds before(clock_.Now().value() - options_.keep_checkpoints->value());
  const size_t per_pass =
      std::clamp<size_t>(options_.checkpoint_folders_per_pass, 1, kMaxCheckpointFolders);
  auto jobs = CheckpointFolderJobs(options_.checkpoint_root, checkpoint_cursor_, per_pass);
  if (!jobs.ok()) {
    if (jobs.status().code() == StatusCode::kNotFound) return 0;  // no root here: nothing to do
    return jobs.status();
  }
  // The next pass looks at the folders after these; past the last, it starts over.
  checkpoint_cursor_ = jobs->size() < per_pass ? JobId(0) : jobs->back();
  int64_t removed = 0;
  for (JobId id : *jobs) {
    {
      std::lock_guard lock(mu_);
      if (stopping_) break;
    }
    auto job = store_.GetJob(id);
    if (!job.ok()) {
      if (job.status().code() == StatusCode::kNotFound) continue;  // not a job's: left alone
      return job.status();
    }
    if (!model::IsFinal(job->state) || !job->end_time || *job->end_time >= before) continue;
    if (Status s = RemoveCheckpointFolder(options_.checkpoint_root, id); !s.ok()) {
      std::cerr << "corral server: removing checkpoint folders: " << s.message() << std::endl;
      continue;
    }
    ++removed;
  }
  return removed;
}

Result<std::optional<Seconds>> ParseKeepFinished(const std::string& text, const std::string& flag) {
  if (text == "forever") return std::optional<Seconds>();
  auto duration = ParseDuration(text, flag);
  if (!duration.ok()) {
    return InvalidArgument(duration.status().message() + " (or 0 or forever: keep every job)");
  }
  if (duration->value() == 0) return std::optional<Seconds>();
  // A slip ("90" meant as days is 90 seconds) would purge the whole history within the hour.
  if (duration->value() < kMinKeepFinished.value()) {
    const bool bare = text.find_first_not_of("0123456789") == std::string::npos;
    return InvalidArgument(flag + ": " + text + (bare ? " seconds" : "") +
                           " is under the minimum of 1h (" + (bare ? "write a unit: 90d; " : "") +
                           "or 0 or forever: keep every job)");
  }
  return std::optional<Seconds>(*duration);
}

}  // namespace corral::server
