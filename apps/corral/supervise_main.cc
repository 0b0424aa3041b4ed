// corral-supervise: the node agent's task supervisor (agent/shim.h), one process per task. A
// binary of its own, linking only the supervisor, so that starting it loads libc and libstdc++
// and nothing of the agent's (OpenSSL, SQLite, cpp-httplib): starting a task costs a few
// milliseconds of CPU less. The agent starts it as `corral-supervise __supervise` with the
// descriptors SuperviseMain() expects; anything else is refused.
#include <iostream>
#include <string_view>

#include "agent/shim.h"

int main(int argc, char** argv) {
  if (argc == 2 && std::string_view(argv[1]) == corral::agent::kSuperviseCommand) {
    return corral::agent::SuperviseMain();
  }
  std::cerr << "corral-supervise: the node agent's task supervisor; it is started by "
               "`corral agent`, not by hand\n";
  return 2;
}
