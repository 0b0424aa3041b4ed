// What one request through cpp-httplib to one server came to, as server_list.h's LeaderSearch
// reads it: the two clients of the server (the CLI's ApiClient, the agent's loop) describe each
// answer with AttemptOf() and let their search decide where to send next.
#pragma once

#include "common/server_list.h"

namespace httplib {
class Result;
}

namespace corral {

// The header in which a server that is not the leader names the leader's base URL.
inline constexpr char kLeaderHeader[] = "Corral-Leader";

// An answer other than 503: kAnswered ("HTTP 404"). A 503: kNotLeader, its detail "503: " and
// the problem's detail (at most 200 bytes of it), its leader the kLeaderHeader header. No answer:
// kNotConnected when no connection was made (refused, connect timeout, TLS handshake or
// certificate refused), else kLostAfterSend (reset, read timeout, a failed write).
Attempt AttemptOf(const httplib::Result& result);

}  // namespace corral
