#include "common/config_file.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>

namespace corral {

namespace {

nlohmann::json ScalarToJson(const YAML::Node& node) {
  const std::string s = node.Scalar();
  if (node.Tag() == "!") return s;  // quoted: a string
  if (s == "true" || s == "false") return s == "true";
  if (s.empty()) return s;
  errno = 0;
  char* end = nullptr;
  const long long i = std::strtoll(s.c_str(), &end, 10);
  if (errno == 0 && end == s.c_str() + s.size()) return static_cast<int64_t>(i);
  errno = 0;
  const double d = std::strtod(s.c_str(), &end);
  const bool numeric = s.find_first_not_of("+-.0123456789eE") == std::string::npos;
  if (numeric && errno == 0 && end == s.c_str() + s.size()) return d;
  return s;
}

nlohmann::json YamlToJson(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Map: {
      nlohmann::json out = nlohmann::json::object();
      for (const auto& kv : node) out[kv.first.as<std::string>()] = YamlToJson(kv.second);
      return out;
    }
    case YAML::NodeType::Sequence: {
      nlohmann::json out = nlohmann::json::array();
      for (const auto& item : node) out.push_back(YamlToJson(item));
      return out;
    }
    case YAML::NodeType::Scalar:
      return ScalarToJson(node);
    default:
      return nullptr;
  }
}

}  // namespace

Result<nlohmann::json> ParseJsonOrYaml(const std::string& text, const std::string& what) {
  auto j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_discarded()) return j;
  try {
    return YamlToJson(YAML::Load(text));
  } catch (const YAML::Exception& e) {
    return InvalidArgument(what + ": not valid JSON or YAML: " + e.what());
  }
}

Result<nlohmann::json> ReadJsonOrYamlFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return IoError("cannot read '" + path + "'");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  return ParseJsonOrYaml(text, path);
}

}  // namespace corral
