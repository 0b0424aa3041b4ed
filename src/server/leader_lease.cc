#include "server/leader_lease.h"

#include <iostream>
#include <nlohmann/json.hpp>

#include "server/http/problem.h"

namespace corral::server {
namespace {

using SteadyClock = std::chrono::steady_clock;

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(SteadyClock::now().time_since_epoch())
      .count();
}

}  // namespace

Status ValidateLeaseTiming(const LeaseTiming& timing) {
  using std::chrono::milliseconds;
  if (timing.duration < milliseconds(100) || timing.duration > std::chrono::minutes(10)) {
    return InvalidArgument("--lease-duration: must be between 100 ms and 10 minutes");
  }
  if (timing.renew_interval < milliseconds(100)) {
    return InvalidArgument("--lease-renew-interval: must be at least 100 ms");
  }
  if (timing.renew_interval * 2 >= timing.duration) {
    return InvalidArgument("--lease-renew-interval: must be under half of --lease-duration (" +
                           std::to_string(timing.duration.count()) +
                           " ms), so that one late renewal never costs "
                           "the lease");
  }
  return Status::Ok();
}

LeaderLease::LeaderLease(store::Store& store, std::string holder, std::string url,
                         LeaseTiming timing, std::function<void(int64_t)> on_acquired,
                         std::function<void(const Status&)> on_lost)
    : store_(store),
      holder_(std::move(holder)),
      url_(std::move(url)),
      timing_(timing),
      on_acquired_(std::move(on_acquired)),
      on_lost_(std::move(on_lost)) {}

LeaderLease::~LeaderLease() { Stop(); }

void LeaderLease::Start() {
  thread_ = std::thread([this] { Run(); });
}

void LeaderLease::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool LeaderLease::Leading() const { return SteadyNs() < leading_until_ns_.load(); }

std::optional<std::string> LeaderLease::Leader() const {
  std::lock_guard lock(mu_);
  return leader_;
}

bool LeaderLease::Sleep(std::chrono::milliseconds d) {
  std::unique_lock lock(mu_);
  return !wake_.wait_for(lock, d, [this] { return stopping_; });
}

void LeaderLease::Run() {
  const int64_t duration_ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(timing_.duration).count();
  // Follower: try to take the lease; meanwhile learn who holds it.
  for (;;) {
    const int64_t sent = SteadyNs();
    auto lease = store_.AcquireLease(holder_, url_, timing_.duration.count());
    if (lease.ok()) {
      leading_until_ns_ = sent + duration_ns;
      {
        std::lock_guard lock(mu_);
        leader_ = url_;
      }
      on_acquired_(lease->epoch);
      break;
    }
    auto current = store_.CurrentLease();
    {
      std::lock_guard lock(mu_);
      if (current.ok() && !current->holder.empty() && current->remaining_ms > 0) {
        leader_ = current->url;
      } else {
        leader_.reset();
      }
    }
    if (lease.status().code() != StatusCode::kFailedPrecondition) {
      std::cerr << "corral server: cannot take the leader's lease yet: " << lease.status().message()
                << "\n";
    }
    if (!Sleep(timing_.renew_interval)) return;
  }
  // Leader: renew until stopped or lost.
  while (Sleep(timing_.renew_interval)) {
    const int64_t sent = SteadyNs();
    Status renewed = store_.RenewLease(holder_, timing_.duration.count());
    if (renewed.ok()) {
      leading_until_ns_ = sent + duration_ns;
      continue;
    }
    // The database could not be asked (it restarts, the network is cut): the lease holds until
    // its deadline, and renewals go on until then.
    if (renewed.code() != StatusCode::kFailedPrecondition && SteadyNs() < leading_until_ns_) {
      std::cerr << "corral server: cannot renew the leader's lease (retrying until it lapses): "
                << renewed.message() << "\n";
      continue;
    }
    leading_until_ns_ = 0;
    {
      std::lock_guard lock(mu_);
      leader_.reset();
    }
    on_lost_(renewed);
    return;
  }
}

HttpResponse FollowerAnswer(const HttpRequest& head, const std::optional<std::string>& leader) {
  HttpResponse res;
  if ((head.method == "GET" || head.method == "HEAD") && head.path == "/healthz") {
    SendJson(res, 200,
             {{"status", "ok"},
              {"role", "follower"},
              {"leader", leader ? nlohmann::json(*leader) : nlohmann::json()}});
    return res;
  }
  const std::string detail = "this server is not the leader; " +
                             (leader ? "the leader is " + *leader : std::string("no leader yet"));
  SendJson(res, 503, Problem(503, "Service Unavailable", detail));
  res.SetHeader("Content-Type", "application/problem+json");
  res.SetHeader("Retry-After", "1");
  if (leader) res.SetHeader("Corral-Leader", *leader);
  return res;
}

}  // namespace corral::server
