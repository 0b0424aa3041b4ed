// AddClientCommands with argv[1]: every client command (and alias) is there when it is the one
// named, so building only its group never loses a command.
#include "cli/commands.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "cli/job_channel.h"
#include "cli/terminal_text.h"

namespace corral::cli {
namespace {

TEST(AddClientCommandsTest, TheNamedCommandIsAddedWithItsGroupOnly) {
  CLI::App all;
  int exit_code = 0;
  AddClientCommands(all, &exit_code);
  const std::vector<CLI::App*> commands = all.get_subcommands([](CLI::App*) { return true; });
  ASSERT_GT(commands.size(), 20u);
  for (const CLI::App* command : commands) {
    std::vector<std::string> names = command->get_aliases();
    names.push_back(command->get_name());
    for (const std::string& name : names) {
      CLI::App one;
      AddClientCommands(one, &exit_code, name);
      EXPECT_NO_THROW(one.get_subcommand(name)) << name;
      EXPECT_LT(one.get_subcommands([](CLI::App*) { return true; }).size(), commands.size())
          << name << " added every group";
    }
  }
  CLI::App unknown;
  AddClientCommands(unknown, &exit_code, "jbos");  // did-you-mean needs them all
  EXPECT_EQ(unknown.get_subcommands([](CLI::App*) { return true; }).size(), commands.size());
}

// `corral job report` and `corral job checkpoint` (docs/in-job.md).
TEST(JobChannelTest, ReportItemsAreNumbersWhenTheyParseWholeElseStrings) {
  auto body = ReportBody(
      {"loss=0.5", "step=3", "phase=warm up", "lr=1e-4", "tag=3x", "nan=nan", "empty=", "eq=a=b"});
  ASSERT_TRUE(body.ok()) << body.status().message();
  EXPECT_EQ(*body, nlohmann::json({{"metrics",
                                    {{"loss", 0.5},
                                     {"step", 3.0},
                                     {"phase", "warm up"},
                                     {"lr", 1e-4},
                                     {"tag", "3x"},
                                     {"nan", "nan"},
                                     {"empty", ""},
                                     {"eq", "a=b"}}}}));
  EXPECT_FALSE(ReportBody({"novalue"}).ok());
  EXPECT_FALSE(ReportBody({"=1"}).ok());
}

TEST(JobChannelTest, InsideAJobItsIdAndTokenAreUsedAndOutsideTheFlagAndTheUsersToken) {
  unsetenv("CORRAL_JOB_ID");
  unsetenv("CORRAL_JOB_TOKEN");
  EXPECT_EQ(ChannelJob(std::nullopt).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ChannelJob(12).value(), JobId(12));
  setenv("CORRAL_JOB_ID", "7", 1);
  setenv("CORRAL_JOB_TOKEN", "crj_7_x", 1);
  EXPECT_EQ(ChannelJob(std::nullopt).value(), JobId(7));
  ClientConfig config;
  config.token = "crl_user";
  UseJobToken(config, JobId(12));  // another job: the user's token
  EXPECT_EQ(config.token, "crl_user");
  UseJobToken(config, JobId(7));
  EXPECT_EQ(config.token, "crj_7_x");
  setenv("CORRAL_JOB_ID", "seven", 1);
  EXPECT_EQ(ChannelJob(std::nullopt).status().code(), StatusCode::kInvalidArgument);
  unsetenv("CORRAL_JOB_ID");
  unsetenv("CORRAL_JOB_TOKEN");
}

// What a job reported reaches the terminal without its control characters (job show).
TEST(TerminalSafeTest, ControlCharactersAreEscapedAndTheRestKept) {
  EXPECT_EQ(TerminalSafe("/ckpt/7/c1 (step 3)"), "/ckpt/7/c1 (step 3)");
  EXPECT_EQ(TerminalSafe("a\x1b]0;pwned\x07"
                         "b\r\n\x7f"),
            "a\\x1b]0;pwned\\x07b\\x0d\\x0a\\x7f");
  EXPECT_EQ(TerminalSafe("\xc2\x9b"
                         "2J"),
            "\\u009b2J");                                                   // C1 CSI
  EXPECT_EQ(TerminalSafe("caf\xc3\xa9 \xc2\xa0"), "caf\xc3\xa9 \xc2\xa0");  // UTF-8 kept
  EXPECT_EQ(TerminalSafe(std::string("a\0b", 3)), "a\\x00b");
}

}  // namespace
}  // namespace corral::cli
