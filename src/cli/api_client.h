// The CLI's client of corral's HTTP API: where the servers are and which token to send come
// from CORRAL_SERVER / CORRAL_TOKEN, else ~/.config/corral/config ({"server": URLS, "token": T}),
// URLS one base URL or a comma-separated list of them (server_list.h). Every request goes to the
// server that answered last, else the first; on a connection failure or a 503 (a server that is
// not the leader) it goes to the next one or the leader the 503 names, with a backoff, until
// CORRAL_RETRY_TIMEOUT passes. A POST (not idempotent) is sent again only when it certainly was
// not carried out (no connection, or a 503). A server's "not now" (busy_retry.h: a saturated
// server's 503, a 429 whose limit clears within kMaxRetriedLimitWait) is waited out and the
// request, whatever its method, sent again to the same server, saying so on stderr ("corral:
// server busy, retrying in 1 s"), for at most kBusyBudget per command in all. Errors carry the
// server's problem+json detail and map HTTP statuses to StatusCodes; a request that found no
// server names each URL tried and what it answered.
#pragma once

#include <chrono>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/http_client.h"
#include "common/busy_retry.h"
#include "common/rng.h"
#include "common/server_list.h"
#include "common/status.h"

namespace corral::cli {

// How long a request looks for a server that answers, unless CORRAL_RETRY_TIMEOUT says.
inline constexpr std::chrono::milliseconds kDefaultRetryTimeout{10'000};
// How long one command (one ApiClient) waits on busy answers in all before it shows them.
inline constexpr std::chrono::milliseconds kBusyBudget{30'000};
// A 429 whose Retry-After is longer is shown at once, not waited out.
inline constexpr Seconds kMaxRetriedLimitWait{5};

struct ClientConfig {
  ServerList servers;   // http(s)://host:port, one or more
  std::string token;    // API token; never printed
  std::string ca_cert;  // PEM bundle to verify an https server with (CORRAL_CA_CERT)
  // How long, from its first attempt, a request may go on trying the servers.
  std::chrono::milliseconds retry_timeout = kDefaultRetryTimeout;
  // How long one command waits on busy answers in all (kBusyBudget; tests shorten it).
  std::chrono::milliseconds busy_budget = kBusyBudget;
  // Where `servers` came from, for errors: "CORRAL_SERVER" or the config file's path.
  std::string servers_from;
};

// Path of the config file: $XDG_CONFIG_HOME/corral/config or ~/.config/corral/config.
std::string ConfigPath();
// CORRAL_RETRY_TIMEOUT (seconds, 0 to 3600), else kDefaultRetryTimeout; InvalidArgument naming
// the variable for anything else.
Result<std::chrono::milliseconds> RetryTimeout();
// Reads the config file, then applies the environment (and RetryTimeout()). Errors: no server
// configured; a server list ServerList::Parse refuses, or a retry timeout out of range
// (InvalidArgument naming where it was read).
Result<ClientConfig> LoadClientConfig();
// Writes the config file with mode 0600 (it holds a token): the servers, the token, the CA.
Status SaveClientConfig(const ClientConfig& config);

// A successful answer as sent: the body and the response headers.
struct Reply {
  std::string body;
  std::map<std::string, std::string> headers;  // names in lower case

  // The header's value ("" when absent); `name` in any case.
  std::string Header(std::string name) const;
  // The body parsed as JSON; Internal when it is not JSON.
  Result<nlohmann::json> Json() const;
};

class ApiClient {
 public:
  // `notices`: where it says that it waits on a busy server (stderr; borrowed).
  explicit ApiClient(ClientConfig config, std::ostream& notices = std::cerr);
  ~ApiClient();

  Result<nlohmann::json> Get(const std::string& path);
  // Get, Post, Put, Delete: the answer's JSON; null for a 204 (No Content).
  Result<nlohmann::json> Post(const std::string& path, const nlohmann::json& body);
  Result<nlohmann::json> Put(const std::string& path, const nlohmann::json& body);
  Result<nlohmann::json> Delete(const std::string& path);
  // A GET whose headers matter too (paged lists, logs); the body may be text.
  Result<Reply> GetReply(const std::string& path);
  // The HTTP status of a GET of the absolute http(s) `url` on another origin of the server (the
  // session gateway), whatever it is, with the token and the same certificate check; redirects
  // are not followed; IoError when it cannot be reached. Sent there alone (no other server).
  Result<int> GetStatusAt(const std::string& url);
  // A WebSocket handshake (RFC 6455, with the nonce `key`) to the absolute http(s) `url` on
  // another origin of the server, as GetStatusAt() sends its GET: the answer, with the stream
  // when it is a 101 (Sec-WebSocket-Accept is not checked: the CLI has no SHA-1 without
  // loading libcrypto); IoError when it cannot be reached.
  Result<HttpUpgrade> OpenWebSocketAt(const std::string& url, const std::string& key);

 private:
  // Sends `request` (its Authorization added) through the servers (the file comment). The
  // first answer that is neither a not-leader 503 nor a busy answer to wait out (busy_); else
  // the search's error.
  Result<HttpResponse> Send(Idempotency idempotency, HttpRequest request);
  // One search over the servers (LeaderSearch): the first answer other than a not-leader 503.
  Result<HttpResult> Search(Idempotency idempotency, const HttpRequest& request);
  // The client of `url` (made on first use); InvalidArgument for a URL it cannot use.
  Result<HttpClient*> ClientOf(const std::string& url);

  ClientConfig config_;
  std::ostream& notices_;
  BusyBudget busy_;  // this command's
  SeededRng jitter_;
  std::string answered_;  // the server that answered last ("" before any)
  std::map<std::string, std::unique_ptr<HttpClient>> clients_;  // by URL
};

}  // namespace corral::cli
