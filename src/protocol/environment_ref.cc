#include "protocol/environment_ref.h"

#include <algorithm>
#include <cctype>

#include "protocol/names.h"

namespace corral::protocol {

Result<EnvironmentRef> ParseEnvironmentRef(const std::string& text, const std::string& field) {
  EnvironmentRef ref;
  const size_t at = text.find('@');
  ref.name = text.substr(0, at);
  if (Status valid = CheckName(NameKind::kEnvironment, ref.name); !valid.ok()) {
    return InvalidArgument("field '" + field + "': must be NAME or NAME@VERSION, where " +
                           valid.message());
  }
  if (at != std::string::npos) {
    const std::string version = text.substr(at + 1);
    if (version.empty() || version.size() > 9 ||
        version.find_first_not_of("0123456789") != std::string::npos || std::stoll(version) < 1) {
      return InvalidArgument("field '" + field + "': the version after '@' must be a number >= 1");
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

}  // namespace corral::protocol
