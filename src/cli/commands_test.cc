// AddClientCommands with argv[1]: every client command (and alias) is there when it is the one
// named, so building only its group never loses a command.
#include "cli/commands.h"

#include <gtest/gtest.h>

#include <string>

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

}  // namespace
}  // namespace corral::cli
