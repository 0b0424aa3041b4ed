#include "model/warning_signal.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

namespace corral::model {
namespace {

using ::testing::HasSubstr;

TEST(WarningSignalTest, SignalsAreNamedAsSlurmAndKillNameThem) {
  for (const char* text : {"USR1", "SIGUSR1", "usr1", "sigusr1", "10"}) {
    auto signal = ParseSignal(text, "--signal");
    ASSERT_TRUE(signal.ok()) << text << ": " << signal.status().message();
    EXPECT_EQ(*signal, SIGUSR1) << text;
  }
  EXPECT_EQ(*ParseSignal("TERM", "f"), SIGTERM);
  EXPECT_EQ(*ParseSignal("RTMIN+2", "f"), SIGRTMIN + 2);
  EXPECT_EQ(SignalName(SIGUSR2), "USR2");
  EXPECT_EQ(SignalName(SIGRTMIN + 2), std::to_string(SIGRTMIN + 2));
}

TEST(WarningSignalTest, UnknownAndUncatchableSignalsAreRefusedNamingTheField) {
  EXPECT_THAT(ParseSignal("USR3", "--signal").status().message(),
              HasSubstr("--signal: unknown signal 'USR3'"));
  EXPECT_THAT(ParseSignal("0", "--signal").status().message(), HasSubstr("unknown signal"));
  EXPECT_THAT(ParseSignal("65", "--signal").status().message(), HasSubstr("unknown signal"));
  EXPECT_THAT(ParseSignal("", "--signal").status().message(), HasSubstr("unknown signal"));
  for (const char* bad : {"RTMIN+-3", "RTMIN+2147483647", "RTMIN+", "RTMIN+99"}) {
    EXPECT_THAT(ParseSignal(bad, "--signal").status().message(), HasSubstr("unknown signal"))
        << bad;
  }
  EXPECT_THAT(ParseSignal("KILL", "--signal").status().message(),
              HasSubstr("KILL cannot be caught"));
  EXPECT_THAT(ParseSignal("19", "--signal").status().message(), HasSubstr("STOP cannot be caught"));
}

TEST(WarningSignalTest, TheLeadDefaultsToSlurmsMinuteAndIsBounded) {
  auto plain = ParseWarningSignal("USR1", "--signal");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(*plain, (WarningSignal{SIGUSR1, Seconds(60)}));
  auto lead = ParseWarningSignal("SIGTERM@90", "--signal");
  ASSERT_TRUE(lead.ok());
  EXPECT_EQ(*lead, (WarningSignal{SIGTERM, Seconds(90)}));
  EXPECT_TRUE(ParseWarningSignal("USR1@0", "f").ok());
  for (const char* bad : {"USR1@", "USR1@-1", "USR1@65536", "USR1@1m", "USR1@@1"}) {
    EXPECT_THAT(ParseWarningSignal(bad, "--signal").status().message(),
                HasSubstr("expected SIG@SECONDS with SECONDS in 0..65535"))
        << bad;
  }
}

}  // namespace
}  // namespace corral::model
