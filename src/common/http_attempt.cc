#include "common/http_attempt.h"

#include <httplib.h>

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

}  // namespace

Attempt AttemptOf(const httplib::Result& result) {
  if (!result) return Failure(result.error());
  if (result->status != 503) {
    return {Outcome::kAnswered, "HTTP " + std::to_string(result->status), ""};
  }
  const nlohmann::json problem = ParseJsonOrNull(result->body);
  std::string detail = "Service Unavailable";
  if (problem.is_object() && problem.contains("detail") && problem["detail"].is_string()) {
    detail = problem["detail"].get<std::string>().substr(0, kMaxDetailBytes);
  }
  return {Outcome::kNotLeader, "503: " + detail, result->get_header_value(kLeaderHeader)};
}

}  // namespace corral
