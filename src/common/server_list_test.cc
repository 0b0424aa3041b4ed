#include "common/server_list.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corral {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

ServerList List(const std::string& text) {
  Result<ServerList> list = ServerList::Parse(text);
  EXPECT_TRUE(list.ok()) << list.status().ToString();
  return *std::move(list);
}

std::string ParseError(const std::string& text) {
  Result<ServerList> list = ServerList::Parse(text);
  EXPECT_EQ(list.status().code(), StatusCode::kInvalidArgument) << text;
  return list.status().message();
}

TEST(ServerListTest, ParsesAndNormalizesEachUrl) {
  ServerList list = List(" HTTP://Ctl-1.Example:8080/ ,https://10.0.0.2,http://[::1]:9000");
  EXPECT_EQ(list.urls(), (std::vector<std::string>{"http://ctl-1.example:8080", "https://10.0.0.2",
                                                   "http://[::1]:9000"}));
  EXPECT_EQ(list.ToString(), "http://ctl-1.example:8080,https://10.0.0.2,http://[::1]:9000");
  EXPECT_EQ(List(list.ToString()).urls(), list.urls());
  EXPECT_EQ(list.Find("https://10.0.0.2:443/"), 1u);
  EXPECT_EQ(list.Find("http://10.0.0.2"), std::nullopt);
}

TEST(ServerListTest, ErrorsNameTheBadEntryAndTheRule) {
  EXPECT_THAT(ParseError("http://a,ftp://b"), HasSubstr("URL 2 'ftp://b' must start with http://"));
  EXPECT_THAT(ParseError("http://a,,http://b"), HasSubstr("URL 2 '' is empty"));
  EXPECT_THAT(ParseError("http://a,"), HasSubstr("URL 2 '' is empty"));
  EXPECT_THAT(ParseError(""), HasSubstr("URL 1 '' is empty"));
  EXPECT_THAT(ParseError("http://a/api"), HasSubstr("no user, path, query or fragment"));
  EXPECT_THAT(ParseError("http://u:p@a"), HasSubstr("no user, path, query or fragment"));
  EXPECT_THAT(ParseError("http://a?x=1"), HasSubstr("no user, path, query or fragment"));
  EXPECT_THAT(ParseError("http://a:0"), HasSubstr("port that is not a number in 1..65535"));
  EXPECT_THAT(ParseError("http://a:99999"), HasSubstr("1..65535"));
  EXPECT_THAT(ParseError("http://a:8x"), HasSubstr("1..65535"));
  EXPECT_THAT(ParseError("http://:80"), HasSubstr("no host name"));
  EXPECT_THAT(ParseError("http://a b"), HasSubstr("a character no host name has"));
  EXPECT_THAT(ParseError("http://[zz]"), HasSubstr("malformed [IPv6] host"));
  EXPECT_THAT(ParseError("http://" + std::string(600, 'a')), HasSubstr("longer than 512 bytes"));
}

TEST(ServerListTest, RefusesDuplicatesWrittenDifferently) {
  EXPECT_THAT(ParseError("http://a:80,http://b,HTTP://A/"),
              HasSubstr("URL 3 'HTTP://A/' is URL 1 again"));
  EXPECT_THAT(ParseError("https://a,https://a:443"), HasSubstr("is URL 1 again"));
  List("http://a,https://a,http://a:8080");  // different servers
}

TEST(ServerListTest, AtMostSixteen) {
  std::string text;
  for (int i = 0; i < 16; ++i) {
    if (i > 0) text += ",";
    text += "http://h";
    text += std::to_string(i);
  }
  EXPECT_EQ(List(text).urls().size(), 16u);
  EXPECT_THAT(ParseError(text + ",http://h16"), HasSubstr("17 URLs, more than the limit of 16"));
}

TEST(RetryWaitTest, DoublingFromATenthToOneSecondARound) {
  std::vector<int64_t> waits;
  for (int round = 1; round <= 6; ++round) waits.push_back(RetryWait(round).count());
  EXPECT_EQ(waits, (std::vector<int64_t>{100, 200, 400, 800, 1000, 1000}));
}

Attempt Refused() { return {Outcome::kNotConnected, "could not connect", "", true}; }
Attempt Untrusted() {
  return {Outcome::kNotConnected, "its certificate is not trusted", "", false};
}
Attempt Reset() { return {Outcome::kLostAfterSend, "no answer (connection reset)", ""}; }
Attempt Answered() { return {Outcome::kAnswered, "HTTP 201", ""}; }
Attempt Follower(const std::string& leader) {
  return {Outcome::kNotLeader, "503: this server is not the leader", leader};
}

TEST(LeaderSearchTest, CyclesThroughTheListWaitingOnlyBetweenRounds) {
  ServerList list = List("http://a,http://b,http://c");
  LeaderSearch search(list, "", Idempotency::kIdempotent, milliseconds(10'000));
  std::vector<std::string> urls;
  std::vector<int64_t> waits;
  for (int i = 0; i < 7; ++i) {
    urls.push_back(search.url());
    LeaderSearch::Decision d = search.Next(i % 2 ? Follower("") : Refused(), milliseconds(0));
    ASSERT_EQ(d.step, LeaderSearch::Step::kRetry);
    waits.push_back(d.wait.count());
  }
  EXPECT_EQ(urls, (std::vector<std::string>{"http://a", "http://b", "http://c", "http://a",
                                            "http://b", "http://c", "http://a"}));
  // Each wait before a round begins again: once a new leader serves, the next round finds it.
  EXPECT_EQ(waits, (std::vector<int64_t>{0, 0, 100, 0, 0, 200, 0}));
  EXPECT_EQ(search.Next(Answered(), milliseconds(0)).step, LeaderSearch::Step::kDone);
  EXPECT_EQ(search.url(), "http://b");
}

TEST(LeaderSearchTest, StartsWhereTheClientWasAnsweredLast) {
  ServerList list = List("http://a,http://b,http://c");
  EXPECT_EQ(LeaderSearch(list, "http://b/", Idempotency::kIdempotent, {}).url(), "http://b");
  EXPECT_EQ(LeaderSearch(list, "not a url", Idempotency::kIdempotent, {}).url(), "http://a");
  // A leader outside the list: first, then the list from its start.
  LeaderSearch outside(list, "http://d:1", Idempotency::kIdempotent, {});
  EXPECT_EQ(outside.url(), "http://d:1");
  outside.Next(Refused(), milliseconds(0));
  EXPECT_EQ(outside.url(), "http://a");
}

TEST(LeaderSearchTest, FollowsTheLeaderAFollowerNames) {
  ServerList list = List("http://dead,http://follower,http://c,http://leader");
  LeaderSearch search(list, "", Idempotency::kNotIdempotent, milliseconds(10'000));
  EXPECT_EQ(search.Next(Refused(), milliseconds(1)).step, LeaderSearch::Step::kRetry);
  EXPECT_EQ(search.url(), "http://follower");
  LeaderSearch::Decision d = search.Next(Follower("http://LEADER/"), milliseconds(2));
  EXPECT_EQ(d.step, LeaderSearch::Step::kRetry);
  EXPECT_EQ(d.wait, milliseconds(0));        // not tried in this round: at once
  EXPECT_EQ(search.url(), "http://leader");  // not c: the named leader
  // Cycling on from the leader's place in the list: back to one tried, after a wait.
  d = search.Next(Refused(), milliseconds(3));
  EXPECT_EQ(d.wait, milliseconds(100));
  EXPECT_EQ(search.url(), "http://dead");
}

TEST(LeaderSearchTest, ALeaderOutsideTheListIsTriedThenTheListGoesOn) {
  ServerList list = List("http://a,http://b,http://c");
  LeaderSearch search(list, "http://b", Idempotency::kIdempotent, {});
  search.Next(Follower("http://10.0.0.9:8080"), milliseconds(0));
  EXPECT_EQ(search.url(), "http://10.0.0.9:8080");
  // A server outside the list cannot send the client further.
  search.Next(Follower("http://evil"), milliseconds(0));
  EXPECT_EQ(search.url(), "http://c");
}

TEST(LeaderSearchTest, IgnoresLeadersThatAreMalformedTheServerItselfOrADowngrade) {
  ServerList list = List("https://a,https://b,http://c");
  LeaderSearch search(list, "", Idempotency::kIdempotent, {});
  search.Next(Follower("ftp://x"), milliseconds(0));
  EXPECT_EQ(search.url(), "https://b");
  search.Next(Follower("https://b:443"), milliseconds(0));  // itself
  EXPECT_EQ(search.url(), "http://c");
  search.Next(Follower("http://d"), milliseconds(0));  // http from http: followed
  EXPECT_EQ(search.url(), "http://d");
  search.Next(Refused(), milliseconds(0));
  EXPECT_EQ(search.url(), "https://a");
  search.Next(Follower("http://c"), milliseconds(0));  // https to http: not followed
  EXPECT_EQ(search.url(), "https://b");
}

TEST(LeaderSearchTest, ANonIdempotentRequestLostAfterSendingIsNotSentAgain) {
  ServerList list = List("http://a,http://b");
  LeaderSearch submit(list, "", Idempotency::kNotIdempotent, milliseconds(10'000));
  ASSERT_EQ(submit.Next(Refused(), milliseconds(0)).step, LeaderSearch::Step::kRetry);
  LeaderSearch::Decision d = submit.Next(Reset(), milliseconds(0));
  EXPECT_EQ(d.step, LeaderSearch::Step::kFailed);
  EXPECT_FALSE(d.unreachable);
  EXPECT_EQ(d.error.code(), StatusCode::kIoError);
  EXPECT_THAT(d.error.message(), HasSubstr("no answer from http://b once the request was sent "
                                           "(no answer (connection reset)): not sent again"));
  EXPECT_THAT(d.error.message(), HasSubstr("http://a (could not connect)"));
  // An idempotent one is.
  LeaderSearch get(list, "", Idempotency::kIdempotent, milliseconds(10'000));
  EXPECT_EQ(get.Next(Reset(), milliseconds(0)).step, LeaderSearch::Step::kRetry);
  EXPECT_EQ(get.url(), "http://b");
}

TEST(LeaderSearchTest, GivesUpAtTheDeadlineNamingEachUrlAndItsAnswer) {
  ServerList list = List("http://a,http://b");
  LeaderSearch search(list, "", Idempotency::kIdempotent, milliseconds(1000));
  EXPECT_EQ(search.Next(Refused(), milliseconds(10)).step, LeaderSearch::Step::kRetry);
  EXPECT_EQ(search.Next(Follower(""), milliseconds(20)).step, LeaderSearch::Step::kRetry);
  EXPECT_EQ(search.Next(Refused(), milliseconds(800)).step, LeaderSearch::Step::kRetry);  // +0
  LeaderSearch::Decision d = search.Next(Follower(""), milliseconds(801));  // +200: past 1 s
  EXPECT_EQ(d.step, LeaderSearch::Step::kFailed);
  EXPECT_EQ(d.error.message(),
            "cannot reach a leader within 1 s: tried http://a (could not connect, 2 times), "
            "http://b (503: this server is not the leader, 2 times)");
  EXPECT_FALSE(d.unreachable);  // b answered: running, not the leader
  // One server: the words of a single-server client.
  ServerList one = List("http://a");
  LeaderSearch single(one, "", Idempotency::kIdempotent, milliseconds(0));
  const LeaderSearch::Decision none = single.Next(Refused(), milliseconds(1));
  EXPECT_EQ(none.error.message(),
            "cannot reach the server within 0 s: tried http://a (could not connect)");
  EXPECT_TRUE(none.unreachable);  // nothing there: the client says what to check
  // A server that listens but fails TLS is no unreachable one.
  LeaderSearch tls(one, "", Idempotency::kIdempotent, milliseconds(0));
  EXPECT_FALSE(tls.Next(Untrusted(), milliseconds(1)).unreachable);
}

TEST(LeaderSearchTest, WithoutADeadlineItNeverGivesUp) {
  ServerList list = List("http://a");
  LeaderSearch search(list, "", Idempotency::kIdempotent, std::nullopt);
  for (int i = 0; i < 100; ++i) {
    ASSERT_EQ(search.Next(Refused(), milliseconds(i * 1000)).step, LeaderSearch::Step::kRetry);
  }
  EXPECT_EQ(search.url(), "http://a");
}

}  // namespace
}  // namespace corral
