// What one request to one server came to, as server_list.h's LeaderSearch reads it: the two
// clients of the server (the CLI's ApiClient over cli/http_client.h, the agent's loop over
// cpp-httplib) describe each request's end as an HttpOutcome, read it with AttemptOf() and let
// their search decide where to send next. No HTTP library here: each client maps its own.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/busy_retry.h"
#include "common/server_list.h"

namespace corral {

// The header in which a server that is not the leader names the leader's base URL.
inline constexpr char kLeaderHeader[] = "Corral-Leader";
// The header of a 503 from a server that serves but is saturated (docs/control-plane.md,
// "Back-pressure"): nothing was done; send the request again to the same server after its
// Retry-After, not to another.
inline constexpr char kBusyHeader[] = "Corral-Busy";

// Why a request got no answer.
enum class HttpFailure {
  kNone,            // an answer came
  kConnect,         // refused, unreachable, no such host
  kConnectTimeout,  // no connection within the connect timeout
  kTlsHandshake,    // the TLS handshake failed
  kCertificate,     // the server's certificate (or its name) is not trusted
  kCaCertificates,  // the CA certificates could not be loaded
  kRead,            // reset or read timeout once the request was sent (httplib: also malformed)
  kWrite,           // the connection failed while the request was being sent
  kOther,           // anything else once connected: HttpOutcome::failure_detail says what
};

// How one request ended: a failure, or an answer's status and the headers the search reads.
struct HttpOutcome {
  HttpFailure failure = HttpFailure::kNone;
  std::string failure_detail;  // kOther: what went wrong
  int status = 0;              // the answer's, when failure is kNone
  std::string_view body;       // the answer's body (borrowed; read only for 503 and 429)
  bool busy = false;           // the answer has kBusyHeader
  std::string leader;          // its kLeaderHeader ("" when absent)
  std::string retry_after;     // its Retry-After ("" when absent)
};

// An answer other than 503, or a 503 with kBusyHeader (the server serves: BusyAnswerOf):
// kAnswered ("HTTP 404"). Another 503: kNotLeader, its detail "503: " and the problem's detail
// (at most 200 bytes of it), its leader the kLeaderHeader header. No answer: kNotConnected when
// no connection was made (refused, connect timeout, TLS handshake or certificate refused), else
// kLostAfterSend (reset, read timeout, a failed write, an answer the client refused). The
// outcome's failure_detail, when given, is added to the TLS, certificate, CA and read failures'
// details ("its certificate is not trusted (self-signed certificate)").
Attempt AttemptOf(const HttpOutcome& outcome);

// A "not now" (busy_retry.h): a 503 with kBusyHeader (Retry-After 1 s when it gives none), or a
// 429 with a Retry-After in delay-seconds. nullopt for anything else: no answer, another status,
// a 503 of a server that does not serve (kNotLeader), a 429 that promises nothing (a limit that
// never clears).
std::optional<BusyAnswer> BusyAnswerOf(const HttpOutcome& outcome);

}  // namespace corral
