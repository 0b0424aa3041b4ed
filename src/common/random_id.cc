#include "common/random_id.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <algorithm>

namespace corral {

Result<std::string> RandomHexId(size_t bytes) {
  if (bytes == 0 || bytes > 64) return InvalidArgument("random id: 1..64 bytes");
  unsigned char buffer[64];
  size_t got = 0;
  while (got < bytes) {
    // Blocks only until the kernel's pool is first initialised (early boot).
    ssize_t n = getrandom(buffer + got, bytes - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return IoError(std::string("getrandom: ") + strerror(n < 0 ? errno : EIO));
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (size_t i = 0; i < bytes; ++i) {
    out.push_back(kHex[buffer[i] >> 4]);
    out.push_back(kHex[buffer[i] & 0xf]);
  }
  return out;
}

bool IsHexId(const std::string& text, size_t bytes) {
  return text.size() == 2 * bytes && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace corral
