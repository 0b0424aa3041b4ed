#include "common/config_file.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>

#include "common/json_parse.h"

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

// Converts a YAML document within the limits of outside JSON, counting what it expands to:
// aliases are shared in the YAML tree but copied into the JSON, so a small document can stand
// for billions of values ("billion laughs"); the budget stops that before the memory goes.
class YamlConverter {
 public:
  explicit YamlConverter(std::string what) : what_(std::move(what)) {}

  Result<nlohmann::json> Convert(const YAML::Node& node, int depth = 0) {
    if (++values_ > kMaxYamlValues) {
      return Status(StatusCode::kResourceExhausted, what_ + ": expands to more than " +
                                                        std::to_string(kMaxYamlValues) +
                                                        " values (YAML aliases?)");
    }
    switch (node.Type()) {
      case YAML::NodeType::Map:
      case YAML::NodeType::Sequence: {
        if (depth >= kMaxJsonDepth) return TooDeep(what_);
        const bool map = node.Type() == YAML::NodeType::Map;
        nlohmann::json out = map ? nlohmann::json::object() : nlohmann::json::array();
        for (const auto& item : node) {
          auto value = Convert(map ? item.second : item, depth + 1);
          if (!value.ok()) return value.status();
          if (map) {
            out[item.first.as<std::string>()] = std::move(value).value();
          } else {
            out.push_back(std::move(value).value());
          }
        }
        return out;
      }
      case YAML::NodeType::Scalar:
        scalar_bytes_ += node.Scalar().size();
        if (scalar_bytes_ > kMaxConfigFileBytes) {
          return Status(StatusCode::kResourceExhausted, what_ + ": expands to more than " +
                                                            std::to_string(kMaxConfigFileBytes) +
                                                            " bytes of text (YAML aliases?)");
        }
        return ScalarToJson(node);
      default:
        return nlohmann::json(nullptr);
    }
  }

  static Status TooDeep(const std::string& what) {
    return InvalidArgument(what + ": nests deeper than the limit of " +
                           std::to_string(kMaxJsonDepth) + " levels");
  }

 private:
  const std::string what_;
  size_t values_ = 0;
  size_t scalar_bytes_ = 0;
};

}  // namespace

Result<nlohmann::json> ParseJsonOrYaml(const std::string& text, const std::string& what) {
  auto j = ParseJson(text, what, {kMaxConfigFileBytes, kMaxJsonDepth});
  if (j.ok() || j.status().code() == StatusCode::kResourceExhausted) return j;
  // Not JSON (or too deep for it): YAML, a superset, decides, within the same limits.
  try {
    return YamlConverter(what).Convert(YAML::Load(text));
  } catch (const YAML::DeepRecursion&) {  // yaml-cpp's own limit, deeper than ours
    return YamlConverter::TooDeep(what);
  } catch (const YAML::Exception& e) {
    return InvalidArgument(what + ": not valid JSON or YAML: " + e.what());
  }
}

Result<nlohmann::json> ReadJsonOrYamlFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return IoError("cannot read '" + path + "'");
  // Read no more than the limit (and one byte to tell a file over it).
  std::string text(kMaxConfigFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxConfigFileBytes) {
    return Status(StatusCode::kResourceExhausted,
                  path + ": over the limit of " + std::to_string(kMaxConfigFileBytes) + " bytes");
  }
  return ParseJsonOrYaml(text, path);
}

}  // namespace corral
