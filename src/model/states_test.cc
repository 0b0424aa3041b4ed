#include "model/states.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace corral::model {
namespace {

// Every value prints a distinct lowercase name that parses back to it.
template <typename E, size_t N, typename Parse>
void ExpectRoundTrip(const std::array<E, N>& all, Parse parse) {
  std::set<std::string_view> names;
  for (E value : all) {
    const std::string_view name = ToString(value);
    EXPECT_TRUE(names.insert(name).second) << "repeated name " << name;
    EXPECT_NE(name, "unknown");
    for (char c : name) EXPECT_TRUE((c >= 'a' && c <= 'z') || c == '_') << name;
    auto parsed = parse(name);
    ASSERT_TRUE(parsed.ok()) << parsed.status().message();
    EXPECT_EQ(*parsed, value) << name;
  }
}

TEST(States, NamesRoundTrip) {
  ExpectRoundTrip(kJobStates, [](std::string_view n) { return ParseJobState(n); });
  ExpectRoundTrip(kTaskStates, [](std::string_view n) { return ParseTaskState(n); });
  ExpectRoundTrip(kNodeStates, [](std::string_view n) { return ParseNodeState(n); });
  ExpectRoundTrip(kTaskEndCauses, [](std::string_view n) { return ParseTaskEndCause(n); });
}

TEST(States, JobStatesAreTheApiNames) {
  // The API and the database spell them so; stores written by older corrals hold the first seven.
  std::string all;
  for (JobState s : kJobStates) all += std::string(ToString(s)) + " ";
  EXPECT_EQ(all, "pending starting running succeeded failed cancelled lost timeout oom ");
  EXPECT_EQ(ToString(TaskEndCause::kTimeLimit), "time_limit");
  EXPECT_EQ(ToString(TaskEndCause::kOutOfMemory), "out_of_memory");
}

TEST(States, UnknownNamesAreRefusedListingTheValidOnes) {
  auto job = ParseJobState("done", "states");
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(job.status().message(),
            "field 'states': unknown job state 'done' (one of pending, starting, running, "
            "succeeded, failed, cancelled, lost, timeout, oom)");
  // Exact and lowercase: no case folding, no spaces, no empty name.
  for (std::string_view bad : {"Pending", "RUNNING", " running", "running ", "", "TIMEOUT"}) {
    EXPECT_FALSE(ParseJobState(bad).ok()) << "'" << bad << "'";
  }
  EXPECT_NE(ParseTaskState("failed_to_start")
                .status()
                .message()
                .find("(one of assigned, running, exited, killed, lost)"),
            std::string::npos);
  EXPECT_NE(ParseNodeState("down").status().message().find("unknown node state 'down'"),
            std::string::npos);
  EXPECT_NE(ParseTaskEndCause("oom").status().message().find("field 'end_cause'"),
            std::string::npos);
}

TEST(States, JobStateListsParseInOrder) {
  auto none = ParseJobStates("");
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
  auto some = ParseJobStates("oom,pending,timeout");
  ASSERT_TRUE(some.ok());
  EXPECT_EQ(*some, (std::vector<JobState>{JobState::kOom, JobState::kPending, JobState::kTimeout}));
  for (std::string_view bad : {"pending,", ",pending", "pending,,running", "pending,done"}) {
    auto parsed = ParseJobStates(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
  }
  EXPECT_NE(ParseJobStates("running,done").status().message().find("'done'"), std::string::npos);
}

TEST(States, FinalAndEnded) {
  std::string final_states;
  for (JobState s : kJobStates) {
    if (IsFinal(s)) final_states += std::string(ToString(s)) + " ";
  }
  EXPECT_EQ(final_states, "succeeded failed cancelled lost timeout oom ");
  std::string ended;
  for (TaskState s : kTaskStates) {
    if (IsEnded(s)) ended += std::string(ToString(s)) + " ";
  }
  EXPECT_EQ(ended, "exited killed lost ");
}

TEST(States, AFailedRunEndsByItsCause) {
  EXPECT_EQ(FailedStateFor(TaskEndCause::kTimeLimit), JobState::kTimeout);
  EXPECT_EQ(FailedStateFor(TaskEndCause::kOutOfMemory), JobState::kOom);
  for (auto cause :
       {std::optional<TaskEndCause>(), std::optional(TaskEndCause::kExited),
        std::optional(TaskEndCause::kSignalled), std::optional(TaskEndCause::kStopped)}) {
    EXPECT_EQ(FailedStateFor(cause), JobState::kFailed);
  }
}

}  // namespace
}  // namespace corral::model
