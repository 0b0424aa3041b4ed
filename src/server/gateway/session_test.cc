// Sessions' parts below the controller (the spec's `session`: protocol/job_spec_test.cc): the
// idle rule and what apps say about their use, the gateway's header, cookie, origin and redirect
// rules, and the app probe against a fake app on loopback. The gateway itself:
// session_gateway_test.cc.
#include "server/gateway/session.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <mutex>
#include <thread>

#include "server/gateway/session_proxy.h"

namespace corral::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using Header = std::pair<std::string, std::string>;

TEST(SessionIdleTest, IdleNoticeThenStop) {
  const IdlePolicy policy{Seconds(600), Seconds(300)};
  const SessionActivity activity{Seconds(1000)};
  EXPECT_EQ(IdleFor(activity, Seconds(1599)), Seconds(599));
  EXPECT_EQ(IdleFor(activity, Seconds(900)), Seconds(0));  // a clock behind the activity
  EXPECT_EQ(NextSessionStep(activity, std::nullopt, policy, Seconds(1599)), SessionStep::kNothing);
  EXPECT_EQ(NextSessionStep(activity, std::nullopt, policy, Seconds(1600)), SessionStep::kNotice);
  EXPECT_EQ(NextSessionStep(activity, Seconds(1600), policy, Seconds(1899)), SessionStep::kNothing);
  EXPECT_EQ(NextSessionStep(activity, Seconds(1600), policy, Seconds(1900)), SessionStep::kStop);
}

TEST(SessionIdleTest, UseAfterTheNoticeClearsIt) {
  const IdlePolicy policy{Seconds(600), Seconds(300)};
  EXPECT_EQ(NextSessionStep({Seconds(1700)}, Seconds(1600), policy, Seconds(1701)),
            SessionStep::kInUseAgain);
  // Timeout 0: never idle; a notice given under an older timeout is withdrawn.
  const IdlePolicy never{Seconds(0), Seconds(300)};
  EXPECT_EQ(NextSessionStep({Seconds(0)}, std::nullopt, never, Seconds(1000000)),
            SessionStep::kNothing);
  EXPECT_EQ(NextSessionStep({Seconds(0)}, Seconds(5), never, Seconds(1000000)),
            SessionStep::kInUseAgain);
}

TEST(SessionIdleTest, BusyGpusCountAsUse) {
  const IdlePolicy policy{Seconds(600), Seconds(300)};
  // No request since 1000, no app report, but its GPUs were busy until 1800.
  const SessionActivity computing{Seconds(1000), std::nullopt, Seconds(1800)};
  EXPECT_EQ(LastUse(computing), Seconds(1800));
  EXPECT_EQ(NextSessionStep(computing, std::nullopt, policy, Seconds(2300)), SessionStep::kNothing);
  EXPECT_EQ(NextSessionStep(computing, std::nullopt, policy, Seconds(2400)), SessionStep::kNotice);
}

TEST(SessionIdleTest, TheAppsOwnActivityCountsAsUse) {
  const IdlePolicy policy{Seconds(600), Seconds(300)};
  // Used through the direct URL at 1500, which the proxy (last at 1000) never saw.
  const SessionActivity direct{Seconds(1000), Seconds(1500)};
  EXPECT_EQ(LastUse(direct), Seconds(1500));
  EXPECT_EQ(IdleFor(direct, Seconds(1600)), Seconds(100));
  EXPECT_EQ(NextSessionStep(direct, std::nullopt, policy, Seconds(1600)), SessionStep::kNothing);
  EXPECT_EQ(NextSessionStep(direct, std::nullopt, policy, Seconds(2100)), SessionStep::kNotice);
  EXPECT_EQ(NextSessionStep(direct, Seconds(1600), policy, Seconds(1700)),
            SessionStep::kInUseAgain);
  // An older report changes nothing: the later of the two counts.
  const SessionActivity older{Seconds(1000), Seconds(900)};
  EXPECT_EQ(IdleFor(older, Seconds(1600)), Seconds(600));
  EXPECT_EQ(NextSessionStep(older, std::nullopt, policy, Seconds(1600)), SessionStep::kNotice);
  // The app is asked before the notice and the stop only.
  EXPECT_TRUE(AsksTheApp(SessionStep::kNotice));
  EXPECT_TRUE(AsksTheApp(SessionStep::kStop));
  EXPECT_FALSE(AsksTheApp(SessionStep::kNothing));
  EXPECT_FALSE(AsksTheApp(SessionStep::kInUseAgain));
}

TEST(SessionAppStatusTest, ReadsJupytersLastActivity) {
  // 2026-12-03T10:00:00Z is 1796292000 (date -u -d 2026-12-03T10:00:00Z +%s).
  EXPECT_EQ(ParseAppLastActivity(R"({"started": "2026-12-03T09:00:00.000001Z",
      "last_activity": "2026-12-03T10:00:00.123456Z", "connections": 0, "kernels": 1})"),
            Seconds(1796292000));
  EXPECT_EQ(ParseAppLastActivity(R"({"last_activity": "2026-12-03T10:00:00Z"})"),
            Seconds(1796292000));
  EXPECT_EQ(ParseAppLastActivity(R"({"last_activity": "2026-12-03T12:30:00+02:30"})"),
            Seconds(1796292000));
  EXPECT_EQ(ParseAppLastActivity(R"({"last_activity": "2026-12-03T09:00:00-0100"})"),
            Seconds(1796292000));
  EXPECT_EQ(ParseAppLastActivity(R"({"last_activity": "1970-01-01T00:00:00Z"})"), Seconds(0));
  EXPECT_EQ(ParseAppLastActivity(R"({"last_activity": "2000-02-29T00:00:00Z"})"),
            Seconds(951782400));
  for (const std::string bad :
       {"", "not json", "[]", "{}", R"({"last_activity": 1796292000})",
        R"({"last_activity": "2026-12-03T10:00:00"})",  // no zone: ambiguous
        R"({"last_activity": "2026-12-03"})", R"({"last_activity": "2026-13-03T10:00:00Z"})",
        R"({"last_activity": "2026-12-03T24:00:00Z"})",
        R"({"last_activity": "2026-12-03T10:00:00.Z"})",
        R"({"last_activity": "2026-12-03T10:00:00Zjunk"})", R"({"last_activity": "yesterday"})"}) {
    EXPECT_EQ(ParseAppLastActivity(bad), std::nullopt) << bad;
  }
}

TEST(SessionProxyTest, UpstreamHeadersDropHopByHopCredentialsAndCorralsCookie) {
  const HeaderList in = {{"Host", "corral:8080"},
                         {"Authorization", "Bearer crl_secret"},
                         {"Connection", "keep-alive, X-Private"},
                         {"X-Private", "1"},
                         {"Keep-Alive", "timeout=5"},
                         {"Transfer-Encoding", "chunked"},
                         {"Upgrade", "websocket"},
                         {"Content-Length", "3"},
                         {"Accept-Encoding", "gzip"},
                         {"Proxy-Authorization", "Basic x"},
                         {"X-Forwarded-For", "6.6.6.6"},
                         {"Cookie", "a=1; corral_token=crl_secret; _xsrf=2"},
                         {"Content-Type", "application/json"},
                         {"X-Requested-With", "XMLHttpRequest"}};
  // Framing (Content-Length, Transfer-Encoding) and Host stay: the body is copied as sent,
  // and apps such as Jupyter compare a WebSocket's Origin with the Host.
  EXPECT_THAT(
      UpstreamHeaders(in),
      ElementsAre(Header{"Host", "corral:8080"}, Header{"Transfer-Encoding", "chunked"},
                  Header{"Content-Length", "3"}, Header{"Accept-Encoding", "gzip"},
                  Header{"Content-Type", "application/json"},
                  Header{"X-Requested-With", "XMLHttpRequest"}, Header{"Cookie", "a=1; _xsrf=2"}));
  // Corral's cookie alone: no Cookie header at all.
  EXPECT_TRUE(UpstreamHeaders({{"cookie", "corral_token=x"}}).empty());
}

TEST(SessionProxyTest, DownstreamHeadersKeepTheAppsButNotHopByHop) {
  const HeaderList in = {{"Content-Type", "text/html"},
                         {"Content-Length", "10"},
                         {"Transfer-Encoding", "chunked"},
                         {"Connection", "close"},
                         {"Set-Cookie", "_xsrf=1; Path=/sessions/7/"},
                         {"Location", "/sessions/7/lab"}};
  EXPECT_THAT(DownstreamHeaders(in),
              ElementsAre(Header{"Content-Type", "text/html"}, Header{"Content-Length", "10"},
                          Header{"Transfer-Encoding", "chunked"},
                          Header{"Set-Cookie", "_xsrf=1; Path=/sessions/7/"},
                          Header{"Location", "/sessions/7/lab"}));
}

TEST(SessionProxyTest, AnAppCannotSetOrClearCorralsCookie) {
  const HeaderList in = {{"Set-Cookie", "_xsrf=1; Path=/sessions/7/"},
                         {"Set-Cookie", "corral_token=crl_attacker; Path=/"},
                         {"set-cookie", "corral_token=; Path=/sessions/7/; Max-Age=0"},
                         {"Set-Cookie", " CORRAL_TOKEN =x; Domain=corral.example"},
                         {"Set-Cookie", "=corral_token=crl_attacker; Path=/sessions/"},
                         {"Set-Cookie", "corral_token"},
                         {"Set-Cookie", "corral_token_theme=dark"},
                         {"Clear-Site-Data", "\"cookies\""},
                         {"Service-Worker-Allowed", "/"},
                         {"X-App", "1"}};
  EXPECT_THAT(DownstreamHeaders(in),
              ElementsAre(Header{"Set-Cookie", "_xsrf=1; Path=/sessions/7/"},
                          Header{"Set-Cookie", "corral_token_theme=dark"}, Header{"X-App", "1"}));
  EXPECT_TRUE(SetsCookie("corral_token=a", "corral_token"));
  EXPECT_FALSE(SetsCookie("a=corral_token", "corral_token"));
  EXPECT_FALSE(SetsCookie("a=1; corral_token=2", "corral_token"));  // attributes, not cookies
}

TEST(SessionProxyTest, OriginsAsBrowsersWriteThem) {
  EXPECT_EQ(OriginOf("http://corral:8080"), "http://corral:8080");
  EXPECT_EQ(OriginOf("HTTPS://Corral.Example:443/sessions/?x#y"), "https://corral.example");
  EXPECT_EQ(OriginOf("http://corral.example:80"), "http://corral.example");
  EXPECT_EQ(OriginOf("https://corral.example:80"), "https://corral.example:80");
  EXPECT_EQ(OriginOf("http://user:pw@corral/"), "http://corral");
  EXPECT_EQ(OriginOf("http://[::1]:8080/x"), "http://[::1]:8080");
  EXPECT_EQ(OriginOf("http://[::1]"), "http://[::1]");
  for (const std::string bad :
       {"", "null", "corral:8080", "ftp://corral", "http://", "http://:80", "http://corral:x"}) {
    EXPECT_EQ(OriginOf(bad), "") << bad;
  }
}

TEST(SessionProxyTest, GatewayUrlsFromTheApis) {
  EXPECT_EQ(WithPort("https://corral.example", 8081), "https://corral.example:8081");
  EXPECT_EQ(WithPort("http://corral:8080/x", 8081), "http://corral:8081");
  EXPECT_EQ(WithPort("http://[::1]:8080", 8081), "http://[::1]:8081");
  EXPECT_EQ(WithPort("http://[::1]", 8081), "http://[::1]:8081");
  EXPECT_EQ(WithPort("", 8081), "");
  EXPECT_EQ(UrlOfHost("corral:8081", true), "https://corral:8081");
  EXPECT_EQ(UrlOfHost("evil/x", false), "");
  EXPECT_EQ(UrlOfHost("", false), "");
}

TEST(SessionProxyTest, TheSessionTokenIsTheBearerElseTheOneCookie) {
  EXPECT_EQ(*SessionTokenOf({{"Authorization", "Bearer crl_a"}, {"Cookie", "corral_token=b"}}),
            "crl_a");
  EXPECT_EQ(*SessionTokenOf({{"Cookie", "x=1; corral_token=crl_b"}}), "crl_b");
  EXPECT_EQ(*SessionTokenOf({{"Authorization", "Basic x"}}), "");
  const auto two = SessionTokenOf({{"Cookie", "corral_token=a"}, {"cookie", "corral_token=b"}});
  ASSERT_FALSE(two.ok());
  EXPECT_EQ(two.status().code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(two.status().message(), HasSubstr("more than one corral_token"));
  EXPECT_TRUE(WantsUpgrade({{"Connection", "keep-alive, Upgrade"}, {"Upgrade", "websocket"}}));
  EXPECT_FALSE(WantsUpgrade({{"Upgrade", "websocket"}}));
  EXPECT_FALSE(WantsUpgrade({{"Connection", "upgrade"}}));
}

TEST(SessionProxyTest, CrossSiteRequestsMayNotChangeAnything) {
  const std::vector<std::string> own = {"http://corral:8080", "https://corral.example/"};
  // Safe methods pass whatever they say.
  for (const char* method : {"GET", "HEAD", "OPTIONS"}) {
    EXPECT_EQ(CrossSiteRefusal(method, "https://evil.example", "cross-site", own), "");
  }
  // This server's own pages, and clients that are no browser.
  EXPECT_EQ(CrossSiteRefusal("POST", "http://corral:8080", "same-origin", own), "");
  EXPECT_EQ(CrossSiteRefusal("PUT", "https://CORRAL.example:443", "", own), "");
  EXPECT_EQ(CrossSiteRefusal("DELETE", "", "", own), "");
  EXPECT_EQ(CrossSiteRefusal("POST", "", "none", own), "");
  // Other sites.
  EXPECT_THAT(CrossSiteRefusal("POST", "https://evil.example", "", own),
              HasSubstr("origin 'https://evil.example', not this server's, may not POST"));
  EXPECT_THAT(CrossSiteRefusal("POST", "null", "", own), HasSubstr("origin 'null'"));
  EXPECT_THAT(CrossSiteRefusal("POST", "http://corral:8081", "", own), HasSubstr("not this"));
  EXPECT_THAT(CrossSiteRefusal("POST", "https://corral:8080", "", own), HasSubstr("not this"));
  EXPECT_THAT(CrossSiteRefusal("PATCH", "", "cross-site", own), HasSubstr("cross-site request"));
  EXPECT_THAT(CrossSiteRefusal("POST", "http://corral:8080", "same-site", own),
              HasSubstr("same-site request"));
  // A WebSocket handshake is a GET, but opens a channel both ways: refused from elsewhere.
  const RequestKind upgrade = RequestKind::kUpgrade;
  EXPECT_THAT(CrossSiteRefusal("GET", "https://evil.example", "", own, upgrade),
              HasSubstr("may not open a WebSocket"));
  EXPECT_THAT(CrossSiteRefusal("GET", "", "cross-site", own, upgrade), HasSubstr("cross-site"));
  EXPECT_EQ(CrossSiteRefusal("GET", "http://corral:8080", "same-origin", own, upgrade), "");
  EXPECT_EQ(CrossSiteRefusal("GET", "", "", own, upgrade), "");
}

// An app on loopback for the probe: answers every connection with `answer` (raw
// HTTP), or, when it is empty, holds the connection without answering until destroyed. Keeps
// the request heads it got.
class FakeApp {
 public:
  explicit FakeApp(std::string answer) : answer_(std::move(answer)) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd_, 16) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
    }
    port_ = ntohs(addr.sin_port);
    serve_ = std::thread([this] { Serve(); });
  }
  ~FakeApp() {
    {
      std::lock_guard lock(mu_);
      done_ = true;
    }
    released_.notify_all();
    shutdown(fd_, SHUT_RDWR);  // accept() returns
    serve_.join();
    close(fd_);
  }
  int port() const { return port_; }
  std::vector<std::string> heads() {
    std::lock_guard lock(mu_);
    return heads_;
  }

 private:
  void Serve() {
    while (true) {
      const int client = accept(fd_, nullptr, nullptr);
      if (client < 0) return;
      std::string head;
      char buffer[4096];
      while (head.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = read(client, buffer, sizeof buffer);
        if (n <= 0) break;
        head.append(buffer, n);
      }
      std::unique_lock lock(mu_);
      heads_.push_back(head);
      if (answer_.empty()) {
        released_.wait(lock, [&] { return done_; });
      } else {
        lock.unlock();
        for (size_t sent = 0; sent < answer_.size();) {
          const ssize_t n =
              send(client, answer_.data() + sent, answer_.size() - sent, MSG_NOSIGNAL);
          if (n <= 0) break;  // the proxy stopped reading
          sent += n;
        }
      }
      close(client);
    }
  }

  const std::string answer_;
  int fd_ = -1;
  int port_ = 0;
  std::mutex mu_;
  std::condition_variable released_;
  bool done_ = false;
  std::vector<std::string> heads_;
  std::thread serve_;
};

std::string Answer(const std::string& headers, const std::string& body) {
  return "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + headers + "\r\n" + body;
}

TEST(SessionAppProbeTest, AsksJupytersStatusEndpointWithTheToken) {
  const std::string status = R"({"last_activity": "2026-12-03T10:00:00.123456Z"})";
  FakeApp app(Answer("Content-Length: " + std::to_string(status.size()) + "\r\n", status));
  HttpSessionAppProbe probe(std::chrono::milliseconds(2000));
  EXPECT_EQ(probe.LastActivity({"127.0.0.1", app.port(), "/sessions/7/", "tok"}),
            Seconds(1796292000));
  ASSERT_EQ(app.heads().size(), 1u);
  EXPECT_EQ(app.heads()[0].rfind("GET /sessions/7/api/status HTTP/1.1\r\n", 0), 0u);
  EXPECT_THAT(app.heads()[0], HasSubstr("Authorization: token tok\r\n"));
}

TEST(SessionAppProbeTest, AnAppWithoutTheEndpointSaysNothing) {
  HttpSessionAppProbe probe(std::chrono::milliseconds(100));
  const std::string status = R"({"last_activity": "2026-12-03T10:00:00Z"})";
  {
    FakeApp not_found("HTTP/1.1 404 Not Found\r\nContent-Length: " + std::to_string(status.size()) +
                      "\r\n\r\n" + status);
    EXPECT_EQ(probe.LastActivity({"127.0.0.1", not_found.port(), "/sessions/7/", "t"}),
              std::nullopt);
  }
  {
    FakeApp html(Answer("Content-Length: 6\r\n", "<html>"));
    EXPECT_EQ(probe.LastActivity({"127.0.0.1", html.port(), "/sessions/7/", "t"}), std::nullopt);
  }
  {
    FakeApp silent("");
    EXPECT_EQ(probe.LastActivity({"127.0.0.1", silent.port(), "/sessions/7/", "t"}), std::nullopt);
  }
  int closed_port = 0;
  {
    FakeApp gone("x");
    closed_port = gone.port();
  }
  EXPECT_EQ(probe.LastActivity({"127.0.0.1", closed_port, "/sessions/7/", "t"}), std::nullopt);
}

TEST(SessionProxyTest, Cookies) {
  EXPECT_EQ(CookieValue("a=1; corral_token=crl_x ; b=2", "corral_token"), "crl_x");
  EXPECT_EQ(CookieValue("a=1; xcorral_token=crl_x", "corral_token"), "");
  EXPECT_EQ(WithoutCookie("corral_token=crl_x; b=2", "corral_token"), "b=2");
  EXPECT_EQ(CookieCount("a=1; corral_token=crl_x", "corral_token"), 1);
  EXPECT_EQ(CookieCount("corral_token=crl_js; a=1; corral_token=crl_x", "corral_token"), 2);
  EXPECT_EQ(CookieCount("a=1", "corral_token"), 0);
  EXPECT_EQ(TokenCookie("crl_x", false), "corral_token=crl_x; Path=/; HttpOnly; SameSite=Strict");
  EXPECT_EQ(TokenCookie("crl_x", true),
            "corral_token=crl_x; Path=/; HttpOnly; SameSite=Strict; Secure");
  EXPECT_EQ(TokenCookie("", false), "corral_token=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0");
}

TEST(SessionProxyTest, LoginRedirectsOnlyToThisServerAndItsGateway) {
  const std::vector<std::string> gateway = {"http://corral:8081"};
  EXPECT_EQ(SafeRedirectTarget("http://corral:8081/sessions/7/lab?x=1", gateway),
            "http://corral:8081/sessions/7/lab?x=1");
  EXPECT_EQ(SafeRedirectTarget("HTTP://Corral:8081/sessions/7/", gateway),
            "HTTP://Corral:8081/sessions/7/");
  EXPECT_EQ(SafeRedirectTarget("http://corral:8081", gateway), "http://corral:8081");
  EXPECT_EQ(SafeRedirectTarget("/sessions/7/", gateway), "/sessions/7/");
  for (const std::string bad :
       {"http://corral:8081@evil.example/", "http://corral:80810/", "http://corral:8081.evil/",
        "https://corral:8081/", "http://corral:8082/", "http://corral:8081\\@evil/",
        "http://corral:8081/\r\nx", "//corral:8081/"}) {
    EXPECT_EQ(SafeRedirectTarget(bad, gateway), "/") << bad;
  }
  EXPECT_EQ(SafeRedirectTarget("http://corral:8081/sessions/7/"), "/");  // no gateway given
}

TEST(SessionProxyTest, LoginRedirectsOnlyToPathsOnThisServer) {
  EXPECT_EQ(SafeRedirectTarget("/sessions/7/"), "/sessions/7/");
  EXPECT_EQ(SafeRedirectTarget("/sessions/7/lab?x=1"), "/sessions/7/lab?x=1");
  EXPECT_EQ(SafeRedirectTarget("/"), "/");
  for (const std::string bad : {"", "//evil.example/", "https://evil.example/", "/\\evil.example",
                                "evil", "/a\r\nSet-Cookie: x=1", "javascript:alert(1)"}) {
    EXPECT_EQ(SafeRedirectTarget(bad), "/") << bad;
  }
}

}  // namespace
}  // namespace corral::server
