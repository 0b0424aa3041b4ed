#include "server/control/rendezvous_ports.h"

#include <algorithm>
#include <set>

namespace corral::server {

int RendezvousPorts::SearchStartFor(const std::string& cluster_id) {
  uint64_t hash = 14695981039346656037ull;  // FNV-1a: the same on every build and machine
  for (unsigned char c : cluster_id) hash = (hash ^ c) * 1099511628211ull;
  return model::kFirstRendezvousPort +
         static_cast<int>(hash % (model::kRendezvousPortCount / kSearchStep)) * kSearchStep;
}

RendezvousPorts::RendezvousPorts(int search_start) : search_start_(search_start) {}

Result<int> RendezvousPorts::Reserve(JobId job, const std::vector<std::string>& nodes, int count) {
  if (by_job_.count(job)) {
    return AlreadyExists("job " + std::to_string(job.value()) + " already holds ports");
  }
  count = std::max(count, 1);
  std::optional<int> base = FirstFreeFrom(search_start_, nodes, count);
  if (!base) base = FirstFreeFrom(model::kFirstRendezvousPort, nodes, count);
  if (!base) {
    return Status(StatusCode::kResourceExhausted,
                  "no block of " + std::to_string(count) + " free ports in " +
                      std::to_string(model::kFirstRendezvousPort) + ".." +
                      std::to_string(model::kLastRendezvousPort) + " on the job's nodes");
  }
  Take(job, {*base, count, nodes});
  return *base;
}

std::optional<int> RendezvousPorts::FirstFreeFrom(int from, const std::vector<std::string>& nodes,
                                                  int count) const {
  int base = from;
  // Moves `base` past every block that overlaps [base, base + count) on any node, until none
  // does: each move passes one block, so this ends.
  for (bool moved = true; moved && base + count - 1 <= model::kLastRendezvousPort;) {
    moved = false;
    for (const std::string& node : nodes) {
      auto taken = by_node_.find(node);
      if (taken == by_node_.end()) continue;
      for (const auto& [start, length] : taken->second) {
        if (start < base + count && base < start + length) {
          base = start + length;
          moved = true;
        }
      }
    }
  }
  if (base + count - 1 > model::kLastRendezvousPort) return std::nullopt;
  return base;
}

Status RendezvousPorts::Restore(JobId job, const std::vector<std::string>& nodes, int base,
                                int count) {
  if (base < model::kFirstRendezvousPort || count < 1 ||
      base + count - 1 > model::kLastRendezvousPort) {
    return InvalidArgument("port block " + std::to_string(base) + "+" + std::to_string(count) +
                           " is outside " + std::to_string(model::kFirstRendezvousPort) + ".." +
                           std::to_string(model::kLastRendezvousPort));
  }
  if (by_job_.count(job)) {
    return AlreadyExists("job " + std::to_string(job.value()) + " already holds ports");
  }
  for (const std::string& node : nodes) {
    auto taken = by_node_.find(node);
    if (taken == by_node_.end()) continue;
    for (const auto& [start, length] : taken->second) {
      if (start < base + count && base < start + length) {
        return AlreadyExists("port block " + std::to_string(base) + "+" + std::to_string(count) +
                             " overlaps another job's on node " + node);
      }
    }
  }
  Take(job, {base, count, nodes});
  return Status::Ok();
}

void RendezvousPorts::Take(JobId job, Block block) {
  const std::set<std::string> distinct(block.nodes.begin(), block.nodes.end());
  for (const std::string& node : distinct) by_node_[node][block.base] = block.count;
  block.nodes.assign(distinct.begin(), distinct.end());
  by_job_[job] = std::move(block);
}

void RendezvousPorts::Release(JobId job) {
  auto it = by_job_.find(job);
  if (it == by_job_.end()) return;
  for (const std::string& node : it->second.nodes) {
    auto taken = by_node_.find(node);
    if (taken == by_node_.end()) continue;
    taken->second.erase(it->second.base);
    if (taken->second.empty()) by_node_.erase(taken);
  }
  by_job_.erase(it);
}

}  // namespace corral::server
