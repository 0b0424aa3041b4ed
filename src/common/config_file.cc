#include "common/config_file.h"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <string_view>

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

// Whether `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past
// U+10FFFF), which nlohmann::json can dump.
bool IsUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const auto lead = static_cast<unsigned char>(text[i]);
    if (lead < 0x80) {
      ++i;
      continue;
    }
    // The sequence's length after its lead byte, and the range of its second byte.
    size_t more = 0;
    unsigned char low = 0x80, high = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
      more = 1;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      more = 2;
      if (lead == 0xE0) low = 0xA0;   // overlong
      if (lead == 0xED) high = 0x9F;  // surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      more = 3;
      if (lead == 0xF0) low = 0x90;   // overlong
      if (lead == 0xF4) high = 0x8F;  // past U+10FFFF
    } else {
      return false;
    }
    if (i + more >= text.size()) return false;
    for (size_t k = 1; k <= more; ++k) {
      const auto b = static_cast<unsigned char>(text[i + k]);
      if (b < (k == 1 ? low : 0x80) || b > (k == 1 ? high : 0xBF)) return false;
    }
    i += more + 1;
  }
  return true;
}

// Converts a YAML document within the limits of outside JSON, counting what it expands to:
// aliases are shared in the YAML tree but copied into the JSON, so a small document can stand
// for billions of values ("billion laughs"); the budget stops that before the memory goes.
class YamlConverter {
 public:
  explicit YamlConverter(std::string what) : what_(std::move(what)) {}

  Result<nlohmann::json> Convert(const YAML::Node& node, int depth = 0) {
    CORRAL_RETURN_IF_ERROR(Count(node.IsScalar() ? node.Scalar().size() : 0));
    switch (node.Type()) {
      case YAML::NodeType::Map:
      case YAML::NodeType::Sequence: {
        if (depth >= kMaxJsonDepth) return TooDeep(what_);
        const bool map = node.Type() == YAML::NodeType::Map;
        nlohmann::json out = map ? nlohmann::json::object() : nlohmann::json::array();
        for (const auto& item : node) {
          if (map) {
            // A key counts as a value and as text: an aliased map repeats its keys too.
            if (!item.first.IsScalar()) {
              return InvalidArgument(what_ + ": a mapping's keys must be strings");
            }
            CORRAL_RETURN_IF_ERROR(Count(item.first.Scalar().size()));
            CORRAL_RETURN_IF_ERROR(CheckText(item.first));
          }
          auto value = Convert(map ? item.second : item, depth + 1);
          if (!value.ok()) return value.status();
          if (map) {
            out[item.first.Scalar()] = std::move(value).value();
          } else {
            out.push_back(std::move(value).value());
          }
        }
        return out;
      }
      case YAML::NodeType::Scalar:
        CORRAL_RETURN_IF_ERROR(CheckText(node));
        return ScalarToJson(node);
      default:
        return nlohmann::json(nullptr);
    }
  }

  // One more key's or scalar's `bytes` of text, within the budget.
  Status Count(size_t bytes) {
    ++values_;
    scalar_bytes_ += bytes;
    if (values_ > kMaxYamlValues || scalar_bytes_ > kMaxConfigFileBytes) {
      return Status(StatusCode::kResourceExhausted,
                    what_ + ": expands to more than " + std::to_string(kMaxYamlValues) +
                        " values or " + std::to_string(kMaxConfigFileBytes) +
                        " bytes of text (YAML aliases?)");
    }
    return Status::Ok();
  }

  // A scalar's or key's text is UTF-8, as JSON's must be: yaml-cpp passes bytes that are not
  // through, and reads a file that starts with NULs as UTF-32, whose code points past U+10FFFF
  // it writes as no UTF-8 is; nlohmann would throw on either when the document is dumped.
  Status CheckText(const YAML::Node& scalar) const {
    if (IsUtf8(scalar.Scalar())) return Status::Ok();
    const YAML::Mark at = scalar.Mark();
    return InvalidArgument(what_ + ": not valid JSON or YAML: text that is not UTF-8 at line " +
                           std::to_string(at.line + 1) + ", column " +
                           std::to_string(at.column + 1));
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
  if (text.size() > kMaxConfigFileBytes) {
    return Status(StatusCode::kResourceExhausted, what + ": " + std::to_string(text.size()) +
                                                      " bytes, over the limit of " +
                                                      std::to_string(kMaxConfigFileBytes));
  }
  // Too deep as JSON is as deep in YAML's flow style: refused before either parser runs.
  CORRAL_RETURN_IF_ERROR(CheckJsonDepth(text, what, kMaxJsonDepth));
  auto j = ParseJson(text, what, {kMaxConfigFileBytes, kMaxJsonDepth});
  if (j.ok()) return j;
  // Not JSON: YAML, a superset, decides. yaml-cpp builds its whole tree first, at a few hundred
  // bytes of memory per byte of text: YAML files are held to a smaller size.
  if (text.size() > kMaxYamlFileBytes) {
    return Status(StatusCode::kResourceExhausted,
                  what + ": not JSON, and as YAML over the limit of " +
                      std::to_string(kMaxYamlFileBytes) + " bytes (give larger files as JSON)");
  }
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
  // Read no more than the limit, and one byte to tell a file over it.
  std::string text;
  char chunk[64 * 1024];
  while (text.size() <= kMaxConfigFileBytes && in.read(chunk, sizeof chunk).gcount() > 0) {
    text.append(chunk, static_cast<size_t>(in.gcount()));
  }
  if (text.size() > kMaxConfigFileBytes) {
    return Status(StatusCode::kResourceExhausted,
                  path + ": over the limit of " + std::to_string(kMaxConfigFileBytes) + " bytes");
  }
  return ParseJsonOrYaml(text, path);
}

}  // namespace corral
