#include "agent/executable.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace corral::agent {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && access(path.c_str(), X_OK) == 0;
}

std::string FindExecutable(std::string_view name, std::string_view search,
                           std::string_view relative_base) {
  size_t start = 0;
  while (start <= search.size()) {
    const size_t end = std::min(search.find(':', start), search.size());
    std::string_view dir = search.substr(start, end - start);
    start = end + 1;
    if (dir.empty()) dir = ".";
    std::string path;
    if (dir[0] != '/') {
      if (relative_base.empty()) continue;
      path.append(relative_base).append("/");
    }
    path.append(dir).append("/");
    path += name;
    if (IsExecutableFile(path)) return path;
  }
  return "";
}

}  // namespace corral::agent
