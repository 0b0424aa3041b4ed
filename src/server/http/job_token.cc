#include "server/http/job_token.h"

#include <charconv>

#include "server/http/auth.h"

namespace corral::server {

std::string JobToken(const std::string& session_key, JobId job, Seconds submit_time) {
  const std::string id = std::to_string(job.value());
  return std::string(kJobTokenPrefix) + id + "_" +
         HmacSha256Hex(session_key,
                       "corral job token v1:" + id + ":" + std::to_string(submit_time.value()));
}

bool LooksLikeJobToken(std::string_view token) {
  return token.substr(0, kJobTokenPrefix.size()) == kJobTokenPrefix;
}

std::optional<JobId> JobOfToken(std::string_view token) {
  if (!LooksLikeJobToken(token)) return std::nullopt;
  token.remove_prefix(kJobTokenPrefix.size());
  const size_t sep = token.find('_');
  if (sep == std::string_view::npos || sep == 0 || sep > 18) return std::nullopt;
  const std::string_view mac = token.substr(sep + 1);
  if (mac.size() != 64 || mac.find_first_not_of("0123456789abcdef") != std::string_view::npos) {
    return std::nullopt;
  }
  int64_t id = 0;
  const char* end = token.data() + sep;
  auto [ptr, ec] = std::from_chars(token.data(), end, id);
  if (ec != std::errc() || ptr != end || id <= 0 || token[0] == '0') return std::nullopt;
  return JobId(id);
}

bool JobTokenMayUse(JobId job, std::string_view method, std::string_view path) {
  const std::string own = "/api/v1/jobs/" + std::to_string(job.value());
  if (path.substr(0, own.size()) != own) return false;
  const std::string_view rest = path.substr(own.size());
  if (method == "GET") return rest.empty() || rest == "/logs" || rest == "/metrics";
  if (method == "POST") return rest == "/report" || rest == "/checkpoint";
  return false;
}

}  // namespace corral::server
