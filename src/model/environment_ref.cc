#include "model/environment_ref.h"

#include <algorithm>
#include <cctype>

namespace corral::model {

namespace {
constexpr size_t kMaxNameLength = 63;
}  // namespace

bool IsEnvironmentName(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength || name[0] == '-') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-';
  });
}

Result<EnvironmentRef> ParseEnvironmentRef(const std::string& text, const std::string& field) {
  EnvironmentRef ref;
  const size_t at = text.find('@');
  ref.name = text.substr(0, at);
  if (!IsEnvironmentName(ref.name)) {
    return InvalidArgument("field '" + field +
                           "': must be NAME or NAME@VERSION with a valid environment name, got '" +
                           text + "'");
  }
  if (at != std::string::npos) {
    const std::string version = text.substr(at + 1);
    if (version.empty() || version.size() > 9 ||
        version.find_first_not_of("0123456789") != std::string::npos || std::stoll(version) < 1) {
      return InvalidArgument("field '" + field +
                             "': the version after '@' must be a number >= 1, got '" + text + "'");
    }
    ref.version = std::stoll(version);
  }
  return ref;
}

std::string ToString(const std::string& name, int64_t version) {
  return name + "@" + std::to_string(version);
}

bool IsImageReference(const std::string& image) {
  if (image.empty() || image.size() > kMaxImageReferenceLength ||
      !std::isalnum(static_cast<unsigned char>(image[0]))) {
    return false;
  }
  return std::all_of(image.begin(), image.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
           c == '/' || c == ':' || c == '@';
  });
}

}  // namespace corral::model
