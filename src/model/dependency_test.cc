#include "model/dependency.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corral::model {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(std::string_view text) {
  auto parsed = ParseDependencies(text, "--dependency");
  return parsed.ok() ? "" : parsed.status().message();
}

TEST(DependencyTest, SlurmSyntaxParsesAndPrintsBackCanonically) {
  auto parsed = ParseDependencies("afterok:12:13,afterany:14,after:2,afternotok:3", "dependency");
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  const std::vector<Dependency> want = {{DependencyType::kAfterOk, JobId(12)},
                                        {DependencyType::kAfterOk, JobId(13)},
                                        {DependencyType::kAfterAny, JobId(14)},
                                        {DependencyType::kAfter, JobId(2)},
                                        {DependencyType::kAfterNotOk, JobId(3)}};
  EXPECT_EQ(*parsed, want);
  EXPECT_EQ(ToString(*parsed), "afterok:12:13,afterany:14,after:2,afternotok:3");
  EXPECT_EQ(*ParseDependencies(ToString(*parsed), "dependency"), want);
  EXPECT_TRUE(ParseDependencies("", "dependency")->empty());
  EXPECT_EQ(ToString(std::vector<Dependency>{}), "");
}

TEST(DependencyTest, WhatCorralDoesNotSupportIsRefusedNamingTheFieldAndWhatIsSupported) {
  EXPECT_THAT(ErrorOf("afterok:1?afterany:2"),
              HasSubstr("--dependency: '?' (any of them) is not supported"));
  for (const char* slurm : {"singleton", "aftercorr:4", "afterburstbuffer:4", "expand:4"}) {
    const std::string error = ErrorOf(slurm);
    EXPECT_THAT(error, HasSubstr("is not supported")) << slurm;
    EXPECT_THAT(error, HasSubstr("after, afterok, afternotok, afterany")) << slurm;
  }
  EXPECT_THAT(ErrorOf("afterdone:4"), HasSubstr("unknown dependency type 'afterdone'"));
  EXPECT_THAT(ErrorOf("afterok"), HasSubstr("names no job"));
  EXPECT_THAT(ErrorOf("afterok:"), HasSubstr("'' is not a job id"));
  EXPECT_THAT(ErrorOf("afterok:0"), HasSubstr("'0' is not a job id (a positive integer)"));
  EXPECT_THAT(ErrorOf("afterok:-3"), HasSubstr("not a job id"));
  EXPECT_THAT(ErrorOf("afterok:12_3"), HasSubstr("an array element is named by its own job id"));
  EXPECT_THAT(ErrorOf("after:12+5"), HasSubstr("after:ID+MINUTES is not supported"));
  EXPECT_THAT(ErrorOf("afterok:99999999999999999999"), HasSubstr("not a job id"));
  EXPECT_THAT(ErrorOf("afterok:1,,afterok:2"), HasSubstr("unknown dependency type ''"));
}

TEST(DependencyTest, TextsAreBounded) {
  std::string many = "afterok";
  for (size_t i = 1; i <= kMaxDependencies + 1; ++i) many += ":" + std::to_string(i);
  EXPECT_THAT(ErrorOf(many), HasSubstr("more than 128 job ids"));
  EXPECT_THAT(ErrorOf("afterok:" + std::string(kMaxDependencyText, '1')),
              HasSubstr("longer than 4096 bytes"));
}

TEST(DependencyTest, StatusFollowsSlurmsMeaningOfEachType) {
  const DependencyTarget pending{JobState::kPending, false};
  const DependencyTarget requeued{JobState::kPending, true};
  const DependencyTarget running{JobState::kRunning, true};
  const DependencyTarget ok{JobState::kSucceeded, true};
  const DependencyTarget failed{JobState::kFailed, true};
  const DependencyTarget cancelled{JobState::kCancelled, false};
  using enum DependencyStatus;
  EXPECT_EQ(StatusOf(DependencyType::kAfter, {pending}), kWaiting);
  EXPECT_EQ(StatusOf(DependencyType::kAfter, {requeued}), kMet);
  EXPECT_EQ(StatusOf(DependencyType::kAfter, {running}), kMet);
  EXPECT_EQ(StatusOf(DependencyType::kAfter, {cancelled}), kMet);
  EXPECT_EQ(StatusOf(DependencyType::kAfterOk, {running}), kWaiting);
  EXPECT_EQ(StatusOf(DependencyType::kAfterOk, {ok}), kMet);
  EXPECT_EQ(StatusOf(DependencyType::kAfterOk, {failed}), kNeverMet);
  EXPECT_EQ(StatusOf(DependencyType::kAfterNotOk, {running}), kWaiting);
  EXPECT_EQ(StatusOf(DependencyType::kAfterNotOk, {ok}), kNeverMet);
  for (JobState bad : {JobState::kFailed, JobState::kTimeout, JobState::kOom, JobState::kCancelled,
                       JobState::kLost}) {
    EXPECT_EQ(StatusOf(DependencyType::kAfterNotOk, {{bad, true}}), kMet) << ToString(bad);
    EXPECT_EQ(StatusOf(DependencyType::kAfterAny, {{bad, true}}), kMet) << ToString(bad);
  }
  EXPECT_EQ(StatusOf(DependencyType::kAfterAny, {running}), kWaiting);
  EXPECT_EQ(StatusOf(DependencyType::kAfterAny, {}), kNeverMet);  // no such job
}

TEST(DependencyTest, AnArrayMeetsADependencyWhenEveryElementDoes) {
  const DependencyTarget ok{JobState::kSucceeded, true};
  const DependencyTarget running{JobState::kRunning, true};
  const DependencyTarget failed{JobState::kFailed, true};
  EXPECT_EQ(StatusOf(DependencyType::kAfterOk, {ok, ok}), DependencyStatus::kMet);
  EXPECT_EQ(StatusOf(DependencyType::kAfterOk, {ok, running}), DependencyStatus::kWaiting);
  EXPECT_EQ(StatusOf(DependencyType::kAfterOk, {running, failed}), DependencyStatus::kNeverMet);
}

TEST(DependencyTest, TheWaitNamesTheJobAndWhatItDid) {
  const Dependency on12{DependencyType::kAfterOk, JobId(12)};
  const Dependency on13{DependencyType::kAfterNotOk, JobId(13)};
  EXPECT_EQ(WaitOf({{on12, DependencyStatus::kMet, std::nullopt}}), std::nullopt);
  auto waits = WaitOf({{on12, DependencyStatus::kWaiting, std::nullopt},
                       {on13, DependencyStatus::kWaiting, std::nullopt}});
  ASSERT_TRUE(waits);
  EXPECT_EQ(waits->status, DependencyStatus::kWaiting);
  EXPECT_EQ(waits->message, "waits for job 12 to end successfully (afterok)");
  auto never = WaitOf({{on12, DependencyStatus::kWaiting, std::nullopt},
                       {on13, DependencyStatus::kNeverMet, JobState::kSucceeded}});
  ASSERT_TRUE(never);
  EXPECT_EQ(never->status, DependencyStatus::kNeverMet);
  EXPECT_EQ(never->message, "job 13 succeeded: afternotok can never be met");
  EXPECT_EQ(WaitOf({{on12, DependencyStatus::kNeverMet, JobState::kFailed}})->message,
            "job 12 failed: afterok can never be met");
  EXPECT_EQ(WaitOf({{on12, DependencyStatus::kNeverMet, std::nullopt}})->message,
            "job 12 is unknown: afterok can never be met");
}

TEST(DependencyStatusTest, HasOneNameReadBack) {
  for (DependencyStatus status :
       {DependencyStatus::kMet, DependencyStatus::kWaiting, DependencyStatus::kNeverMet}) {
    EXPECT_EQ(ParseDependencyStatus(ToString(status)), status);
  }
  EXPECT_EQ(ToString(DependencyStatus::kNeverMet), "never_met");  // the API's name
  EXPECT_EQ(ParseDependencyStatus("never met"), std::nullopt);
}

}  // namespace
}  // namespace corral::model
