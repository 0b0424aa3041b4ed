#include "server/api/dashboard_api.h"

#include <gtest/gtest.h>

#include <future>
#include <thread>

namespace corral::server {
namespace {

TEST(WebCookieRoutes, OnlyTheDashboardsRequests) {
  for (const char* path :
       {"/api/v1/whoami", "/api/v1/jobs", "/api/v1/jobs/12", "/api/v1/jobs/12/logs",
        "/api/v1/queue", "/api/v1/nodes", "/api/v1/projects", "/api/v1/events/stream",
        "/api/v1/summary", "/api/v1/gpus", "/api/v1/jobs/12/gpus", "/api/v1/jobs/12/gpu-history",
        "/api/v1/jobs/12/metrics", "/api/v1/usage", "/api/v1/capacity/forecast",
        "/api/v1/summary/history"}) {
    EXPECT_TRUE(CookieMayAuthenticate("GET", path)) << path;
    EXPECT_TRUE(CookieMayAuthenticate("HEAD", path)) << path;
  }
  EXPECT_TRUE(CookieMayAuthenticate("POST", "/api/v1/jobs"));
  EXPECT_TRUE(CookieMayAuthenticate("POST", "/api/v1/jobs/7/cancel"));
  EXPECT_TRUE(CookieMayAuthenticate("POST", "/api/v1/capacity/what-if"));
  // Tokens, users, project settings, node actions, sessions: bearer only.
  for (const auto& [method, path] :
       std::vector<std::pair<const char*, const char*>>{{"GET", "/api/v1/tokens"},
                                                        {"POST", "/api/v1/tokens"},
                                                        {"DELETE", "/api/v1/tokens/3"},
                                                        {"GET", "/api/v1/users"},
                                                        {"POST", "/api/v1/users"},
                                                        {"POST", "/api/v1/projects"},
                                                        {"PUT", "/api/v1/projects/default/sharing"},
                                                        {"POST", "/api/v1/nodes/dev/drain"},
                                                        {"POST", "/api/v1/sessions"},
                                                        {"GET", "/api/v1/sessions"},
                                                        {"POST", "/api/v1/arrays/3/cancel"},
                                                        {"DELETE", "/api/v1/jobs/7"},
                                                        {"PUT", "/api/v1/jobs"},
                                                        {"POST", "/api/v1/jobs/7"},
                                                        {"GET", "/api/v1/jobs/7x/logs"},
                                                        {"POST", "/api/v1/jobs/7/report"},
                                                        {"POST", "/api/v1/jobs/7/checkpoint"},
                                                        {"GET", "/api/v1/jobs//logs"},
                                                        {"GET", "/api/v1/jobs/7/logs/more"},
                                                        {"POST", "/api/v1/jobs/7/cancel/x"},
                                                        {"GET", "/api/v1/nodes/"},
                                                        {"OPTIONS", "/api/v1/jobs"},
                                                        {"GET", "/metrics"},
                                                        {"GET", "/api/v1/gpus/idle"},
                                                        {"GET", "/api/v1/jobs/x/gpus"},
                                                        {"GET", "/api/v1/jobs/7/gpus/0"},
                                                        {"POST", "/api/v1/gpus"},
                                                        {"POST", "/api/v1/usage"},
                                                        {"DELETE", "/api/v1/usage"},
                                                        {"GET", "/api/v1/capacity"},
                                                        {"GET", "/api/v1/capacity/what-if"},
                                                        {"POST", "/api/v1/capacity/forecast"},
                                                        {"PUT", "/api/v1/capacity/what-if"}}) {
    EXPECT_FALSE(CookieMayAuthenticate(method, path)) << method << " " << path;
  }
}

TEST(WebEventStreamFrame, OneEventPerFrameOnOneDataLine) {
  EXPECT_EQ(EventStreamFrame("summary", 3, {{"gpus", 8}}),
            "id: 3\nevent: summary\ndata: {\"gpus\":8}\n\n");
  // A newline inside the data stays escaped: the frame still ends at the blank line only.
  const std::string frame = EventStreamFrame("summary", 1, {{"note", "a\n\ndata: x"}});
  EXPECT_EQ(frame, "id: 1\nevent: summary\ndata: {\"note\":\"a\\n\\ndata: x\"}\n\n");
  EXPECT_EQ(frame.find("\n\n"), frame.size() - 2);
  // An event name that could break the framing becomes "message".
  EXPECT_EQ(EventStreamFrame("x\ndata: y", 2, 1), "id: 2\nevent: message\ndata: 1\n\n");
  EXPECT_EQ(EventStreamFrame("", 2, 1), "id: 2\nevent: message\ndata: 1\n\n");
  // Invalid UTF-8 does not throw.
  EXPECT_NE(EventStreamFrame("summary", 4, {{"s", std::string("\xff")}}).find("\xEF\xBF\xBD"),
            std::string::npos);
}

TEST(WebEventStreams, CapsOpenStreamsAndGivesPlacesBack) {
  EventStreams streams(2);
  {
    auto a = streams.Open();
    auto b = streams.Open();
    auto c = streams.Open();
    EXPECT_TRUE(a.admitted());
    EXPECT_TRUE(b.admitted());
    EXPECT_FALSE(c.admitted());
    EXPECT_EQ(streams.open(), 2);
    auto moved = std::move(a);
    EXPECT_EQ(streams.open(), 2);
  }
  EXPECT_EQ(streams.open(), 0);
  EXPECT_TRUE(streams.Open().admitted());
  EXPECT_EQ(streams.open(), 0);
}

TEST(WebEventStreams, ShutdownWakesWaitersAndRefusesNewStreams) {
  EventStreams streams(4);
  EXPECT_TRUE(streams.Wait(std::chrono::milliseconds(1)));  // timed out: go on
  auto waiting = std::async(std::launch::async,
                            [&] { return streams.Wait(std::chrono::milliseconds(60000)); });
  // Most likely waiting by now; if not, Wait sees the shutdown at once: same answer.
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const auto t0 = std::chrono::steady_clock::now();
  streams.Shutdown();
  EXPECT_FALSE(waiting.get());
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
  EXPECT_FALSE(streams.Open().admitted());
  EXPECT_FALSE(streams.Wait(std::chrono::milliseconds(1)));
}

}  // namespace
}  // namespace corral::server
