#include "store/write_batcher.h"

#include <optional>
#include <utility>
#include <vector>

namespace corral::store {

namespace {

using WriteCommitter = GroupCommitter<TimedBatch, Status>;

WriteCommitter::Calls ApplyCalls(Store* store) {
  return {
      .group = [store](const std::vector<TimedBatch>& group) -> Result<std::vector<Status>> {
        Status s = store->ApplyGroup(group);
        if (!s.ok()) return s;
        return std::vector<Status>(group.size());
      },
      .one = [store](const TimedBatch& b) { return store->Apply(b.batch, b.now); },
      .without_commit = [](const TimedBatch& b) -> std::optional<Status> {
        if (b.batch.empty()) return Status();
        return std::nullopt;
      },
  };
}

}  // namespace

WriteBatcher::WriteBatcher(Store* store) : WriteBatcher(store, Options()) {}

WriteBatcher::WriteBatcher(Store* store, Options options)
    : committer_(ApplyCalls(store), {options.max_batch, options.max_linger},
                 Status(StatusCode::kUnavailable, "apply: the write queue is closed")) {}

WriteBatcher::~WriteBatcher() = default;  // the committer closes, then drains

std::shared_future<Status> WriteBatcher::Enqueue(WriteBatch batch, Seconds now) {
  return committer_.Enqueue({std::move(batch), now}).share();
}

void WriteBatcher::Close() { committer_.Close(); }

WriteBatcher::Stats WriteBatcher::stats() const {
  WriteCommitter::Stats s = committer_.stats();
  return {.batches = s.items, .commits = s.commits, .largest_group = s.largest_group};
}

}  // namespace corral::store
