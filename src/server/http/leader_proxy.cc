#include "server/http/leader_proxy.h"

#include <httplib.h>
#include <strings.h>

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "server/http/problem.h"

namespace corral::server {

// One forwarded exchange, shared by the connection's thread (which relays the answer) and the
// thread that talks to the leader.
struct LeaderProxy::Relay {
  std::mutex mu;
  std::condition_variable changed;
  bool head_came = false;  // status and headers are set
  bool ended = false;      // the leader's answer ended (or failed)
  bool cancelled = false;  // the client went away
  httplib::Error error = httplib::Error::Success;
  int status = 0;
  HttpHeaders headers;
  std::deque<std::string> pieces;
  size_t buffered = 0;
  std::unique_ptr<httplib::Client> client;

  // The client went away, or the proxy ends every forward: the leader's connection is shut.
  void Cancel() {
    {
      std::lock_guard lock(mu);
      cancelled = true;
    }
    changed.notify_all();
    client->stop();
  }
};

namespace {

// Hop-by-hop headers (RFC 9110, 7.6.1), and those each side sets for its own connection.
bool HopByHop(const std::string& name) {
  static constexpr const char* kNames[] = {
      "Connection",
      "Keep-Alive",
      "Transfer-Encoding",
      "TE",
      "Trailer",
      "Upgrade",
      "Expect",
      "Proxy-Authorization",
      "Proxy-Authenticate",
      "Proxy-Connection",
      "Content-Length",
  };
  for (const char* n : kNames) {
    if (strcasecmp(name.c_str(), n) == 0) return true;
  }
  return false;
}

HttpResponse BadGateway(const std::string& leader_url, httplib::Error error) {
  HttpResponse res;
  SendJson(res, 502,
           Problem(502, "Bad Gateway",
                   "the leader " + leader_url +
                       " was reached but did not answer: " + httplib::to_string(error)));
  res.SetHeader("Content-Type", "application/problem+json");
  return res;
}

}  // namespace

HttpHeaders ForwardedRequestHeaders(const HttpHeaders& request, const std::string& vouched) {
  HttpHeaders out;
  for (const auto& [name, value] : request) {
    if (HopByHop(name) || strcasecmp(name.c_str(), kPeerHeader) == 0) continue;
    out.emplace(name, value);
  }
  out.emplace(kPeerHeader, vouched);
  return out;
}

HttpHeaders RelayedResponseHeaders(const HttpHeaders& answer) {
  HttpHeaders out;
  for (const auto& [name, value] : answer) {
    if (!HopByHop(name)) out.emplace(name, value);
  }
  return out;
}

LeaderProxy::LeaderProxy(const PeerSignature& peer, LeaderProxyTiming timing)
    : peer_(peer), timing_(timing) {}

std::optional<HttpResponse> LeaderProxy::Forward(const std::string& leader_url,
                                                 const HttpRequest& request) {
  auto relay = std::make_shared<Relay>();
  // Made before the relay is listed: CancelAll (another thread) may cancel it from then on.
  relay->client = std::make_unique<httplib::Client>(leader_url);
  if (!relay->client->is_valid()) return std::nullopt;
  {
    std::lock_guard lock(mu_);
    std::erase_if(relays_, [](const std::weak_ptr<Relay>& r) { return r.expired(); });
    relays_.push_back(relay);
  }
  httplib::Client& client = *relay->client;
  client.set_url_encode(false);  // the target goes as the client sent it
  client.set_decompress(false);
  client.set_keep_alive(false);
  const auto seconds_and_micros = [](std::chrono::milliseconds d) {
    return std::make_pair(static_cast<time_t>(d.count() / 1000),
                          static_cast<time_t>(d.count() % 1000 * 1000));
  };
  auto [cs, cus] = seconds_and_micros(timing_.connect_timeout);
  client.set_connection_timeout(cs, cus);
  auto [rs, rus] = seconds_and_micros(timing_.read_timeout);
  client.set_read_timeout(rs, rus);
  client.set_write_timeout(rs, rus);

  httplib::Request out;
  out.method = request.method;
  out.path = request.target;
  for (const auto& [name, value] : ForwardedRequestHeaders(
           request.headers, peer_.Sign(request, std::chrono::system_clock::now()))) {
    out.headers.emplace(name, value);
  }
  out.body = request.body;
  const size_t max_buffered = timing_.max_buffered_bytes;
  Relay* r = relay.get();  // the sender's thread holds `relay`
  out.response_handler = [r](const httplib::Response& head) {
    std::lock_guard lock(r->mu);
    r->status = head.status;
    for (const auto& [name, value] : head.headers) r->headers.emplace(name, value);
    r->head_came = true;
    r->changed.notify_all();
    return !r->cancelled;
  };
  out.content_receiver = [r, max_buffered](const char* data, size_t size, uint64_t, uint64_t) {
    std::unique_lock lock(r->mu);
    r->changed.wait(lock, [&] { return r->cancelled || r->buffered < max_buffered; });
    if (r->cancelled) return false;
    r->pieces.emplace_back(data, size);
    r->buffered += size;
    r->changed.notify_all();
    return true;
  };
  std::thread([relay, out = std::move(out)]() mutable {
    httplib::Result answer = relay->client->send(out);
    {
      std::lock_guard lock(relay->mu);
      relay->ended = true;
      relay->error = answer.error();
      // httplib reads a HEAD answer (and one without content) without calling the handler.
      if (answer && !relay->head_came) {
        relay->status = answer->status;
        for (const auto& [name, value] : answer->headers) relay->headers.emplace(name, value);
        if (!answer->body.empty()) relay->pieces.push_back(answer->body);
        relay->head_came = true;
      }
    }
    relay->changed.notify_all();
  }).detach();

  std::unique_lock lock(relay->mu);
  relay->changed.wait(lock, [&] { return relay->head_came || relay->ended || relay->cancelled; });
  if (relay->cancelled) return BadGateway(leader_url, httplib::Error::Canceled);
  if (!relay->head_came) {
    // Nothing was sent before a connection (TLS included) was made.
    if (relay->error == httplib::Error::Connection ||
        relay->error == httplib::Error::ConnectionTimeout ||
        relay->error == httplib::Error::SSLConnection ||
        relay->error == httplib::Error::SSLServerVerification) {
      return std::nullopt;
    }
    return BadGateway(leader_url, relay->error);
  }
  HttpResponse res;
  res.status = relay->status;
  res.headers = RelayedResponseHeaders(relay->headers);
  lock.unlock();
  // Dropped with the answer's reader (the answer was sent, or its client left): the leader's
  // connection is shut, so that a long poll or an event stream does not hold the thread.
  std::shared_ptr<void> cancel_when_done(nullptr, [relay](void*) { relay->Cancel(); });
  res.next_piece = [relay, cancel_when_done](std::string& piece) {
    std::unique_lock lock(relay->mu);
    relay->changed.wait(lock,
                        [&] { return !relay->pieces.empty() || relay->ended || relay->cancelled; });
    if (relay->cancelled) throw std::runtime_error("forward cancelled");
    if (relay->pieces.empty()) {
      // An answer cut short is not ended as if whole: the client's connection is closed.
      if (relay->error != httplib::Error::Success) throw std::runtime_error("leader answer cut");
      return false;
    }
    piece = std::move(relay->pieces.front());
    relay->pieces.pop_front();
    relay->buffered -= piece.size();
    relay->changed.notify_all();
    return true;
  };
  return res;
}

void LeaderProxy::CancelAll() {
  std::vector<std::shared_ptr<Relay>> live;
  {
    std::lock_guard lock(mu_);
    for (const std::weak_ptr<Relay>& r : relays_) {
      if (auto relay = r.lock()) live.push_back(std::move(relay));
    }
    relays_.clear();
  }
  for (const auto& relay : live) relay->Cancel();
}

}  // namespace corral::server
