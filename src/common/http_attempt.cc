#include "common/http_attempt.h"

#include <algorithm>

#include "common/json_parse.h"

namespace corral {

namespace {

constexpr size_t kMaxDetailBytes = 200;

// `text`, and the client's detail in brackets when it gave one.
std::string WithDetail(std::string text, const std::string& detail) {
  return detail.empty() ? text : text + " (" + detail + ")";
}

// Why a request got no answer, and whether the request was sent at all.
Attempt Failure(const HttpOutcome& outcome) {
  const std::string& detail = outcome.failure_detail;
  switch (outcome.failure) {
    case HttpFailure::kNone:
      break;
    case HttpFailure::kConnect:
      return {Outcome::kNotConnected, "could not connect", "", true};
    case HttpFailure::kConnectTimeout:
      return {Outcome::kNotConnected, "connect timed out", "", true};
    case HttpFailure::kTlsHandshake:
      return {Outcome::kNotConnected, WithDetail("TLS handshake failed", detail), ""};
    case HttpFailure::kCertificate:
      return {Outcome::kNotConnected, WithDetail("its certificate is not trusted", detail), ""};
    case HttpFailure::kCaCertificates:
      return {Outcome::kNotConnected, detail.empty() ? "cannot load the CA certificates" : detail,
              ""};
    case HttpFailure::kRead:
      return {Outcome::kLostAfterSend,
              "no answer: " + (detail.empty() ? "connection reset or read timed out" : detail), ""};
    case HttpFailure::kWrite:
      return {Outcome::kLostAfterSend, "connection lost while sending", ""};
    case HttpFailure::kOther:
      break;
  }
  return {Outcome::kLostAfterSend, "request failed: " + detail, ""};
}

// The detail of a problem+json body (at most kMaxDetailBytes); `otherwise` for any other body.
std::string ProblemDetail(std::string_view body, const std::string& otherwise) {
  const nlohmann::json problem = ParseJsonOrNull(std::string(body));
  if (problem.is_object() && problem.contains("detail") && problem["detail"].is_string()) {
    return problem["detail"].get<std::string>().substr(0, kMaxDetailBytes);
  }
  return otherwise;
}

}  // namespace

Attempt AttemptOf(const HttpOutcome& outcome) {
  if (outcome.failure != HttpFailure::kNone) return Failure(outcome);
  if (outcome.status != 503 || outcome.busy) {
    return {Outcome::kAnswered, "HTTP " + std::to_string(outcome.status), ""};
  }
  return {Outcome::kNotLeader, "503: " + ProblemDetail(outcome.body, "Service Unavailable"),
          outcome.leader};
}

std::optional<BusyAnswer> BusyAnswerOf(const HttpOutcome& outcome) {
  if (outcome.failure != HttpFailure::kNone) return std::nullopt;
  const int status = outcome.status;
  const std::optional<Seconds> after = ParseRetryAfter(outcome.retry_after);
  if (status == 503 && outcome.busy) {
    return BusyAnswer{status, std::max(after.value_or(Seconds(1)), Seconds(1)),
                      ProblemDetail(outcome.body, "server busy")};
  }
  if (status == 429 && after) {
    return BusyAnswer{status, *after, ProblemDetail(outcome.body, "too many requests")};
  }
  return std::nullopt;
}

}  // namespace corral
