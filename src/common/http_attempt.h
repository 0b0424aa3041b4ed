// What one request through cpp-httplib to one server came to, as server_list.h's LeaderSearch
// reads it: the two clients of the server (the CLI's ApiClient, the agent's loop) describe each
// answer with AttemptOf() and let their search decide where to send next.
#pragma once

#include <optional>

#include "common/busy_retry.h"
#include "common/server_list.h"

namespace httplib {
class Result;
}

namespace corral {

// The header in which a server that is not the leader names the leader's base URL.
inline constexpr char kLeaderHeader[] = "Corral-Leader";
// The header of a 503 from a server that serves but is saturated (docs/control-plane.md,
// "Back-pressure"): nothing was done; send the request again to the same server after its
// Retry-After, not to another.
inline constexpr char kBusyHeader[] = "Corral-Busy";

// An answer other than 503, or a 503 with kBusyHeader (the server serves: BusyAnswerOf):
// kAnswered ("HTTP 404"). Another 503: kNotLeader, its detail "503: " and the problem's detail
// (at most 200 bytes of it), its leader the kLeaderHeader header. No answer: kNotConnected when
// no connection was made (refused, connect timeout, TLS handshake or certificate refused), else
// kLostAfterSend (reset, read timeout, a failed write).
Attempt AttemptOf(const httplib::Result& result);

// A "not now" (busy_retry.h): a 503 with kBusyHeader (Retry-After 1 s when it gives none), or a
// 429 with a Retry-After in delay-seconds. nullopt for anything else: no answer, another status,
// a 503 of a server that does not serve (kNotLeader), a 429 that promises nothing (a limit that
// never clears).
std::optional<BusyAnswer> BusyAnswerOf(const httplib::Result& result);

}  // namespace corral
