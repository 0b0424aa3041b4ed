#include "server/control/environment.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "common/config_file.h"

namespace corral::server {

Result<std::vector<EnvironmentSpec>> LoadEnvironmentDir(const std::string& dir) {
  std::error_code ec;
  std::vector<std::filesystem::path> files;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const std::string ext = entry.path().extension().string();
    if (entry.is_regular_file() && (ext == ".yaml" || ext == ".yml" || ext == ".json")) {
      files.push_back(entry.path());
    }
  }
  if (ec) return IoError("read environments directory " + dir + ": " + ec.message());
  std::sort(files.begin(), files.end());
  std::vector<EnvironmentSpec> specs;
  std::set<std::string> names;
  for (const auto& file : files) {
    auto json = ReadJsonOrYamlFile(file.string());
    if (!json.ok()) return json.status();
    auto spec = ParseEnvironmentSpec(*json);
    if (!spec.ok()) return InvalidArgument(file.string() + ": " + spec.status().message());
    if (!names.insert(spec->name).second) {
      return InvalidArgument(file.string() + ": field 'name': '" + spec->name +
                             "' is also the name of another file's environment");
    }
    specs.push_back(std::move(spec).value());
  }
  return specs;
}

}  // namespace corral::server
