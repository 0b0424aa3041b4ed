#include "server/http/job_token.h"

#include <gtest/gtest.h>

namespace corral::server {
namespace {

constexpr char kKey[] = "a-session-key-of-more-than-32-characters";

TEST(JobTokenTest, IsDerivedFromTheKeyTheJobAndItsSubmitTime) {
  const std::string token = JobToken(kKey, JobId(42), Seconds(1700000000));
  EXPECT_EQ(token.rfind("crj_42_", 0), 0u);
  EXPECT_EQ(token.size(), std::string("crj_42_").size() + 64);
  // Every server of the cluster derives the same; anything else gives another.
  EXPECT_EQ(token, JobToken(kKey, JobId(42), Seconds(1700000000)));
  EXPECT_NE(token,
            JobToken("another-session-key-of-32-characters-", JobId(42), Seconds(1700000000)));
  EXPECT_NE(token, JobToken(kKey, JobId(42), Seconds(1700000001)));
  EXPECT_NE(token.substr(7), JobToken(kKey, JobId(43), Seconds(1700000000)).substr(7));
  EXPECT_EQ(JobOfToken(token), JobId(42));
}

TEST(JobTokenTest, GarbageNamesNoJob) {
  const std::string mac(64, 'a');
  for (const std::string& garbage :
       {std::string(), std::string("crj_"), "crj__" + mac, "crj_0_" + mac, "crj_007_" + mac,
        "crj_-1_" + mac, "crj_1_" + mac.substr(1), "crj_1_" + mac + "a",
        "crj_1_" + std::string(64, 'A'), "crj_1x_" + mac, "crl_" + mac,
        "crj_99999999999999999999_" + mac}) {
    EXPECT_FALSE(JobOfToken(garbage)) << garbage;
  }
  EXPECT_TRUE(LooksLikeJobToken("crj_whatever"));
  EXPECT_FALSE(LooksLikeJobToken("crl_0123"));
}

TEST(JobTokenTest, ItsScopeIsItsOwnJobsChannel) {
  const JobId job(7);
  for (const char* path : {"/api/v1/jobs/7", "/api/v1/jobs/7/logs", "/api/v1/jobs/7/metrics"}) {
    EXPECT_TRUE(JobTokenMayUse(job, "GET", path)) << path;
    EXPECT_FALSE(JobTokenMayUse(job, "POST", path)) << path;
  }
  for (const char* path : {"/api/v1/jobs/7/report", "/api/v1/jobs/7/checkpoint"}) {
    EXPECT_TRUE(JobTokenMayUse(job, "POST", path)) << path;
    EXPECT_FALSE(JobTokenMayUse(job, "GET", path)) << path;
  }
  for (const char* path :
       {"/api/v1/jobs", "/api/v1/jobs/70", "/api/v1/jobs/8", "/api/v1/jobs/8/report",
        "/api/v1/jobs/7/cancel", "/api/v1/jobs/7/gpus", "/api/v1/jobs/7/", "/api/v1/jobs/7/logs/x",
        "/api/v1/whoami", "/api/v1/jobs/7/../8", "/"}) {
    EXPECT_FALSE(JobTokenMayUse(job, "GET", path)) << path;
    EXPECT_FALSE(JobTokenMayUse(job, "POST", path)) << path;
  }
  EXPECT_FALSE(JobTokenMayUse(job, "DELETE", "/api/v1/jobs/7"));
  EXPECT_FALSE(JobTokenMayUse(job, "PUT", "/api/v1/jobs/7/report"));
}

}  // namespace
}  // namespace corral::server
