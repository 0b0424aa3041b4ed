// LeaderProxy between two real HttpServers on loopback: a "leader" that trusts the peer header
// and a "follower" that diverts every request to it, as ServerProcess wires them.
#include "server/http/leader_proxy.h"

#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "server/http/http_server.h"
#include "server/http/listener.h"

namespace corral::server {
namespace {

using namespace std::chrono_literals;

TEST(LeaderProxyHeadersTest, RequestHeadersLeaveHopByHopAndReplaceThePeerHeader) {
  HttpHeaders in{{"Host", "corral.example"},       {"Authorization", "Bearer t"},
                 {"Cookie", "corral_token=x"},     {"Connection", "keep-alive"},
                 {"Transfer-Encoding", "chunked"}, {"Content-Length", "7"},
                 {"Expect", "100-continue"},       {"corral-forwarded-for", "forged"},
                 {"Accept", "text/event-stream"}};
  const HttpHeaders out = ForwardedRequestHeaders(in, "signed");
  EXPECT_EQ(out, (HttpHeaders{{"Accept", "text/event-stream"},
                              {"Authorization", "Bearer t"},
                              {"Cookie", "corral_token=x"},
                              {"Corral-Forwarded-For", "signed"},
                              {"Host", "corral.example"}}));
}

TEST(LeaderProxyHeadersTest, AnswerHeadersThatMatterAreRelayed) {
  HttpHeaders in{
      {"Content-Type", "text/html"}, {"Set-Cookie", "a=1"},    {"Set-Cookie", "b=2"},
      {"Location", "/login"},        {"Retry-After", "3"},     {"Cache-Control", "no-store"},
      {"Connection", "close"},       {"Content-Length", "10"}, {"Transfer-Encoding", "chunked"},
      {"Corral-Leader", "http://x"}};
  const HttpHeaders out = RelayedResponseHeaders(in);
  EXPECT_EQ(out.count("Set-Cookie"), 2u);
  for (const char* kept :
       {"Content-Type", "Location", "Retry-After", "Cache-Control", "Corral-Leader"}) {
    EXPECT_EQ(out.count(kept), 1u) << kept;
  }
  for (const char* dropped : {"Connection", "Content-Length", "Transfer-Encoding"}) {
    EXPECT_EQ(out.count(dropped), 0u) << dropped;
  }
}

class LeaderProxyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto socket = Listen("127.0.0.1", 0, "--listen");
    ASSERT_TRUE(socket.ok());
    leader_url_ = "http://127.0.0.1:" + std::to_string(socket->port);
    HttpServerOptions leader;
    leader.limits.max_anonymous_per_address = 2;  // the follower's connections are all 127.0.0.1's
    leader.admit = [](const HttpRequest&) { return Admission{Caller::kAnonymous, 1 << 20}; };
    leader.vouch = [this](const HttpRequest& head) {
      return peer_.Verify(head, std::chrono::system_clock::now());
    };
    auto created = HttpServer::Create(*socket, std::move(leader));
    ASSERT_TRUE(created.ok());
    leader_ = std::move(created).value();
    leader_->Post("/echo", [](const HttpRequest& req, HttpResponse& res) {
      res.status = 201;
      res.SetContent(nlohmann::json{{"address", req.client_address},
                                    {"counted", req.counted_address},
                                    {"target", req.target},
                                    {"body", req.body},
                                    {"authorization", req.Header("Authorization")},
                                    {"host", req.Header("Host")}}
                         .dump(),
                     "application/json");
      res.headers.emplace("Set-Cookie", "a=1");
      res.headers.emplace("Set-Cookie", "b=2");
      res.SetHeader("Retry-After", "7");
    });
    leader_->Get("/stream", [this](const HttpRequest&, HttpResponse& res) {
      auto n = std::make_shared<int>(0);
      res.Stream("text/event-stream", [this, n](std::string& piece) {
        ++*n;
        if (*n == 2) release_.get_future().wait();  // the second waits for the test
        if (*n > 2) return false;
        piece = "piece" + std::to_string(*n) + "\n";
        return true;
      });
    });
    leader_->Get("/forever", [](const HttpRequest&, HttpResponse& res) {
      res.Stream("text/event-stream", [](std::string& piece) {
        std::this_thread::sleep_for(20ms);
        piece = ":\n";
        return true;
      });
    });
    ASSERT_TRUE(leader_->Start().ok());
    StartFollower(leader_url_);
  }
  void TearDown() override {
    proxy_.CancelAll();
    if (follower_) follower_->Stop();
    leader_->Stop();
  }

  void StartFollower(const std::string& leader_url) {
    auto socket = Listen("127.0.0.1", 0, "--listen");
    ASSERT_TRUE(socket.ok());
    follower_port_ = socket->port;
    HttpServerOptions follower;
    follower.admit = [](const HttpRequest&) { return Admission{Caller::kAnonymous, 100}; };
    follower.divert = [this, leader_url](const HttpRequest&) -> HttpHandler {
      return [this, leader_url](const HttpRequest& req, HttpResponse& res) {
        auto answer = proxy_.Forward(leader_url, req);
        if (answer) {
          res = std::move(*answer);
        } else {
          res.status = 503;
        }
      };
    };
    auto created = HttpServer::Create(*socket, std::move(follower));
    ASSERT_TRUE(created.ok());
    follower_ = std::move(created).value();
    ASSERT_TRUE(follower_->Start().ok());
  }

  PeerSignature peer_{std::string(40, 'k')};
  LeaderProxy proxy_{peer_, LeaderProxyTiming{}};
  std::promise<void> release_;
  std::string leader_url_;
  std::unique_ptr<HttpServer> leader_, follower_;
  int follower_port_ = 0;
};

TEST_F(LeaderProxyTest, ARequestGoesThroughWithTheClientsAddressAndCredentials) {
  httplib::Client client("127.0.0.1", follower_port_);
  client.set_interface("127.0.0.2");  // the follower's connection to the leader is 127.0.0.1's
  httplib::Headers headers{{"Authorization", "Bearer secret"},
                           {"Corral-Forwarded-For", "203.0.113.9 203.0.113.9 1 forged"}};
  auto answer = client.Post("/echo?x=%20y", headers, "the body", "text/plain");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 201);
  auto body = nlohmann::json::parse(answer->body);
  EXPECT_EQ(body["address"], "127.0.0.2");  // the client's, vouched for by the follower
  EXPECT_EQ(body["counted"], "127.0.0.2");
  EXPECT_EQ(body["target"], "/echo?x=%20y");
  EXPECT_EQ(body["body"], "the body");
  EXPECT_EQ(body["authorization"], "Bearer secret");
  EXPECT_EQ(body["host"], "127.0.0.1:" + std::to_string(follower_port_));
  EXPECT_EQ(answer->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(answer->get_header_value("Retry-After"), "7");
  EXPECT_EQ(answer->get_header_value_count("Set-Cookie"), 2u);
}

TEST_F(LeaderProxyTest, TheFollowersBodyLimitAppliesFirst) {
  httplib::Client client("127.0.0.1", follower_port_);
  auto answer = client.Post("/echo", std::string(101, 'x'), "text/plain");
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 413);
}

TEST_F(LeaderProxyTest, AStreamIsRelayedAsItComes) {
  httplib::Client client("127.0.0.1", follower_port_);
  std::promise<std::string> first;
  std::string all;
  bool released = false;
  auto answer = client.Get("/stream", [&](const char* data, size_t size) {
    all.append(data, size);
    if (!released) {
      first.set_value(all);  // before the leader was let to write its second piece
      released = true;
      release_.set_value();
    }
    return true;
  });
  ASSERT_TRUE(answer);
  EXPECT_EQ(answer->status, 200);
  EXPECT_EQ(first.get_future().get(), "piece1\n");
  EXPECT_EQ(all, "piece1\npiece2\n");
  EXPECT_EQ(answer->get_header_value("Content-Type"), "text/event-stream");
}

TEST_F(LeaderProxyTest, AnUnreachableLeaderIsNoAnswer) {
  auto socket = Listen("127.0.0.1", 0, "--listen");
  ASSERT_TRUE(socket.ok());
  const std::string closed = "http://127.0.0.1:" + std::to_string(socket->port);
  close(socket->fd);
  HttpRequest request;
  request.method = "POST";
  request.target = "/echo";
  EXPECT_FALSE(proxy_.Forward(closed, request).has_value());
}

TEST_F(LeaderProxyTest, CancelAllEndsStreamsInFlight) {
  httplib::Client client("127.0.0.1", follower_port_);
  std::atomic<bool> got{false};
  auto reader = std::async(std::launch::async, [&] {
    return client.Get("/forever", [&](const char*, size_t) {
      got = true;
      return true;
    });
  });
  while (!got) std::this_thread::sleep_for(5ms);
  proxy_.CancelAll();
  ASSERT_EQ(reader.wait_for(10s), std::future_status::ready);
}

TEST_F(LeaderProxyTest, APeersConnectionsLeaveTheAnonymousCapsOfItsAddress) {
  // Three streams at once from the follower's one address, over the leader's cap of 2
  // anonymous connections per address: each leaves the cap once its signed head is read.
  std::vector<std::unique_ptr<httplib::Client>> clients;
  std::vector<std::future<httplib::Result>> readers;
  std::atomic<int> streaming{0};
  for (int i = 0; i < 3; ++i) {
    clients.push_back(std::make_unique<httplib::Client>("127.0.0.1", follower_port_));
    httplib::Client* client = clients.back().get();
    readers.push_back(std::async(std::launch::async, [client, &streaming] {
      bool counted = false;
      return client->Get("/forever", [&](const char* data, size_t) {
        if (!counted && data[0] == ':') ++streaming;  // the leader's stream, not a 502
        counted = true;
        return true;
      });
    }));
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    while (streaming < i + 1 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(5ms);
    }
  }
  EXPECT_EQ(streaming.load(), 3);
  const auto counts = leader_->connections();
  EXPECT_EQ(counts.open, 3);
  EXPECT_EQ(counts.anonymous, 0);
  EXPECT_EQ(counts.refused, 0);
  proxy_.CancelAll();
  for (auto& r : readers) r.wait();
}

}  // namespace
}  // namespace corral::server
