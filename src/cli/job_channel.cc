#include "cli/job_channel.h"

#include <charconv>
#include <cmath>
#include <cstdlib>

namespace corral::cli {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v == nullptr ? "" : v;
}

// A whole decimal id (>= 1), or nullopt.
std::optional<int64_t> IdOf(const std::string& text) {
  int64_t id = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
  if (ec != std::errc() || end != text.data() + text.size() || id < 1) return std::nullopt;
  return id;
}

}  // namespace

Result<JobId> ChannelJob(std::optional<int64_t> job_flag) {
  if (job_flag) {
    if (*job_flag < 1) return InvalidArgument("--job: must be a job id (>= 1)");
    return JobId(*job_flag);
  }
  const std::string env = Env("CORRAL_JOB_ID");
  if (env.empty()) return InvalidArgument("not inside a job (no CORRAL_JOB_ID): give --job ID");
  const std::optional<int64_t> id = IdOf(env);
  if (!id) return InvalidArgument("CORRAL_JOB_ID: expected a job id, got '" + env + "'");
  return JobId(*id);
}

void UseJobToken(ClientConfig& config, JobId job) {
  const std::string token = Env("CORRAL_JOB_TOKEN");
  if (!token.empty() && IdOf(Env("CORRAL_JOB_ID")) == job.value()) config.token = token;
}

Result<nlohmann::json> ReportBody(const std::vector<std::string>& items) {
  nlohmann::json metrics = nlohmann::json::object();
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0) {
      return InvalidArgument("expected KEY=VALUE, got '" + item + "'");
    }
    const std::string value = item.substr(eq + 1);
    double number = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), number);
    const bool whole = !value.empty() && ec == std::errc() && end == value.data() + value.size();
    metrics[item.substr(0, eq)] =
        whole && std::isfinite(number) ? nlohmann::json(number) : nlohmann::json(value);
  }
  return nlohmann::json{{"metrics", std::move(metrics)}};
}

}  // namespace corral::cli
