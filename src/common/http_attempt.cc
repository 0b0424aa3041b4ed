#include "common/http_attempt.h"

#include <httplib.h>

#include <algorithm>

#include "common/json_parse.h"

namespace corral {

namespace {

constexpr size_t kMaxDetailBytes = 200;

// Why a request got no answer, and whether the request was sent at all.
Attempt Failure(httplib::Error error) {
  switch (error) {
    case httplib::Error::Connection:
    case httplib::Error::BindIPAddress:
      return {Outcome::kNotConnected, "could not connect", ""};
    case httplib::Error::ConnectionTimeout:
      return {Outcome::kNotConnected, "connect timed out", ""};
    case httplib::Error::SSLConnection:
      return {Outcome::kNotConnected, "TLS handshake failed", ""};
    case httplib::Error::SSLServerVerification:
      return {Outcome::kNotConnected, "its certificate is not trusted", ""};
    case httplib::Error::SSLLoadingCerts:
      return {Outcome::kNotConnected, "cannot load the CA certificates", ""};
    case httplib::Error::Read:
      return {Outcome::kLostAfterSend, "no answer: connection reset or read timed out", ""};
    case httplib::Error::Write:
      return {Outcome::kLostAfterSend, "connection lost while sending", ""};
    default:
      return {Outcome::kLostAfterSend, "request failed: " + httplib::to_string(error), ""};
  }
}

// The detail of a problem+json body (at most kMaxDetailBytes); `otherwise` for any other body.
std::string ProblemDetail(const std::string& body, const std::string& otherwise) {
  const nlohmann::json problem = ParseJsonOrNull(body);
  if (problem.is_object() && problem.contains("detail") && problem["detail"].is_string()) {
    return problem["detail"].get<std::string>().substr(0, kMaxDetailBytes);
  }
  return otherwise;
}

}  // namespace

Attempt AttemptOf(const httplib::Result& result) {
  if (!result) return Failure(result.error());
  if (result->status != 503 || result->has_header(kBusyHeader)) {
    return {Outcome::kAnswered, "HTTP " + std::to_string(result->status), ""};
  }
  return {Outcome::kNotLeader, "503: " + ProblemDetail(result->body, "Service Unavailable"),
          result->get_header_value(kLeaderHeader)};
}

std::optional<BusyAnswer> BusyAnswerOf(const httplib::Result& result) {
  if (!result) return std::nullopt;
  const int status = result->status;
  const std::optional<Seconds> after = ParseRetryAfter(result->get_header_value("Retry-After"));
  if (status == 503 && result->has_header(kBusyHeader)) {
    return BusyAnswer{status, std::max(after.value_or(Seconds(1)), Seconds(1)),
                      ProblemDetail(result->body, "server busy")};
  }
  if (status == 429 && after) {
    return BusyAnswer{status, *after, ProblemDetail(result->body, "too many requests")};
  }
  return std::nullopt;
}

}  // namespace corral
