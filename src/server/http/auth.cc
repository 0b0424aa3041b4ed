#include "server/http/auth.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>

#include "common/random_id.h"

namespace corral::server {

namespace {

std::string Hex(const unsigned char* data, size_t size) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(size * 2, '0');
  for (size_t i = 0; i < size; ++i) {
    out[2 * i] = kDigits[data[i] >> 4];
    out[2 * i + 1] = kDigits[data[i] & 15];
  }
  return out;
}

}  // namespace

Result<std::string> GenerateToken() {
  auto secret = RandomHexId(kSecretBytes);
  if (!secret.ok()) return secret.status();
  return "crl_" + *secret;
}

std::string HashToken(const std::string& token) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  EVP_Digest(token.data(), token.size(), digest, &size, EVP_sha256(), nullptr);
  return Hex(digest, size);
}

std::string HmacSha256Hex(const std::string& key, std::string_view message) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &size);
  return Hex(digest, size);
}

bool SecureEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

bool Principal::CanAccessProject(const std::string& project) const {
  return admin || std::find(projects.begin(), projects.end(), project) != projects.end();
}

std::string BearerTokenOf(std::string_view authorization) {
  constexpr std::string_view kPrefix = "Bearer ";
  return authorization.substr(0, kPrefix.size()) == kPrefix
             ? std::string(authorization.substr(kPrefix.size()))
             : "";
}

}  // namespace corral::server
