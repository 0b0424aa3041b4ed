// The servers a client (the CLI, an agent) may talk to, and the rule that finds the one serving:
// a comma-separated list of base URLs, tried in turn until one answers. A server that is not
// the leader answers 503, naming the leader in `Corral-Leader` when it knows it; the client
// tries that URL next, else the next one of the list, with a backoff (docs/control-plane.md,
// "Several servers").
//
// Pure logic: no sockets and no clock. The caller sends, describes what came of it (Attempt),
// measures the time and sleeps as told; http_attempt.h describes an HTTP answer.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace corral {

inline constexpr size_t kMaxServers = 16;          // URLs in one list
inline constexpr size_t kMaxServerUrlBytes = 512;  // one URL

// A validated, non-empty list of server base URLs, in the order given.
class ServerList {
 public:
  // No servers: a configuration not read yet. Parse never makes one; LeaderSearch needs a list
  // that Parse made.
  ServerList() = default;

  // "http://10.0.0.1:8080,https://b.example" (blanks around an entry ignored). Each entry is
  // http:// or https://, a host (a name, an IPv4 address or a [bracketed] IPv6 one) and an
  // optional port, with no user, path, query or fragment (one trailing '/' is dropped); at most
  // kMaxServerUrlBytes; no two alike (same scheme, host in any case and port, a default port
  // written or not); 1 to kMaxServers entries. InvalidArgument naming the entry (its position
  // and text) and the rule it breaks.
  static Result<ServerList> Parse(std::string_view text);
  // One URL checked as an entry of a list; its normalized form (scheme and host lower case, no
  // trailing '/').
  static Result<std::string> NormalizeUrl(std::string_view url);

  // The normalized URLs, in order; empty only default-constructed.
  const std::vector<std::string>& urls() const { return urls_; }
  // The list as Parse reads it back: "http://a:1,http://b:2".
  std::string ToString() const;
  // The position of `url` (any form NormalizeUrl accepts) in the list; nullopt when absent.
  std::optional<size_t> Find(std::string_view url) const;

 private:
  explicit ServerList(std::vector<std::string> urls) : urls_(std::move(urls)) {}
  std::vector<std::string> urls_;
};

// What one request to one server came to, as far as finding the leader goes.
enum class Outcome {
  kAnswered,       // an HTTP answer other than 503 (a success or a refusal): the request is done
  kNotLeader,      // 503: the server does not serve (a follower, or no leader yet)
  kNotConnected,   // no connection was made (refused, connect timeout, TLS handshake failed):
                   // the request was not sent
  kLostAfterSend,  // the connection failed once the request was being sent (reset, read
                   // timeout): the server may have carried it out
};

struct Attempt {
  Outcome outcome = Outcome::kAnswered;
  // What the server answered or why it was not reached, for error messages: "could not
  // connect", "503: this server is not the leader; no leader yet".
  std::string detail;
  // A 503's Corral-Leader header: the leader's base URL; "" when absent.
  std::string leader;
  // kNotConnected because nothing accepted the connection (refused, or the connect timed out),
  // as opposed to a TLS failure with a server that did.
  bool nothing_listening = false;
};

// Whether a request may be sent again after it may have reached a server. Not idempotent
// (submitting a job): sent again only when it certainly was not carried out (kNotConnected,
// kNotLeader), so that nothing is done twice.
enum class Idempotency { kIdempotent, kNotIdempotent };

// The wait before the n-th new round over the servers (n from 1): 100 ms doubling up to 1 s.
// Within a round, moving on to a server not yet tried in it is immediate, so a client finds a
// new leader within one wait of its taking over, whatever the list's length.
std::chrono::milliseconds RetryWait(int round);

// One request's walk over the servers. Starts at the URL that answered the client last (in the
// list, or a leader named outside it), else at the first; after each attempt, Next() says
// whether the request is done, where to send it next and after how long, or that it failed.
// The next server is the leader a listed server's 503 names (a URL in the list or out of it;
// ignored when malformed, when it is the server itself, or when it would send an https
// client's credentials over plain http), else the list's entry after the last listed server
// tried, round and round. Going on to a server not tried in this round is at once; coming back
// to one begins a new round, after RetryWait. Not thread-safe.
class LeaderSearch {
 public:
  // `deadline`: how long, from the first attempt, retries may go on; nullopt: for ever (an
  // agent, which never gives up on its servers).
  LeaderSearch(const ServerList& servers, const std::string& start, Idempotency idempotency,
               std::optional<std::chrono::milliseconds> deadline);

  // Where to send the request now.
  const std::string& url() const { return url_; }

  enum class Step { kDone, kRetry, kFailed };
  struct Decision {
    Step step = Step::kDone;
    std::chrono::milliseconds wait{0};  // kRetry: before sending to url()
    Status error;                       // kFailed: names each URL tried and what it answered
    // kFailed: at every attempt until the deadline nothing accepted the connection
    // (Attempt::nothing_listening; false: a server answered, if only that it is not the
    // leader, a TLS handshake failed, or a request was lost after sending).
    bool unreachable = false;
  };
  // Records `attempt` at url(), `elapsed` after the search began, and decides: kDone for an
  // answer; kFailed when a non-idempotent request was lost after sending (not sent again) or
  // when the wait would pass the deadline; else kRetry, url() now the next server.
  Decision Next(const Attempt& attempt, std::chrono::milliseconds elapsed);

  // The attempts so far, each URL once in the order first tried with what it answered last:
  // "http://a:1 (could not connect, 3 times), http://b:2 (503: ...)".
  std::string Tried() const;

 private:
  struct Tries {
    std::string url;
    std::string detail;  // the last
    int count = 0;
  };
  // The leader `attempt` names, normalized, when the search should follow it; else nullopt.
  std::optional<std::string> LeaderToFollow(const Attempt& attempt) const;

  const ServerList& servers_;
  Idempotency idempotency_;
  std::optional<std::chrono::milliseconds> deadline_;
  std::string url_;
  size_t cursor_;    // the list entry tried last (the list's last before any: the first is next)
  bool url_listed_;  // url_ is servers_[cursor_]
  int rounds_ = 0;   // rounds begun after the first (each after a wait)
  std::vector<std::string> in_round_;  // the URLs tried in this round, url_ included
  std::vector<Tries> tried_;
  bool listened_ = false;  // an attempt found something listening (!nothing_listening)
};

}  // namespace corral
