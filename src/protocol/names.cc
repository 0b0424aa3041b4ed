#include "protocol/names.h"

#include <array>
#include <cstdint>
#include <string>

namespace corral::protocol {
namespace {

// A set of ASCII characters, built at compile time from the characters it holds.
class CharSet {
 public:
  constexpr explicit CharSet(std::string_view chars) {
    for (char c : chars) bits_[static_cast<unsigned char>(c) / 64] |= Bit(c);
  }
  constexpr CharSet operator|(const CharSet& other) const {
    CharSet both = *this;
    both.bits_[0] |= other.bits_[0];
    both.bits_[1] |= other.bits_[1];
    return both;
  }
  constexpr bool Has(char c) const {
    const auto byte = static_cast<unsigned char>(c);
    return byte < 128 && (bits_[byte / 64] & Bit(c)) != 0;
  }

 private:
  static constexpr uint64_t Bit(char c) {
    return uint64_t{1} << (static_cast<unsigned char>(c) % 64);
  }
  std::array<uint64_t, 2> bits_{};
};

constexpr CharSet kLower("abcdefghijklmnopqrstuvwxyz");
constexpr CharSet kLetters = kLower | CharSet("ABCDEFGHIJKLMNOPQRSTUVWXYZ");
constexpr CharSet kDigits("0123456789");

struct NameRule {
  std::string_view noun;  // "a user name"
  size_t min_length;
  size_t max_length;
  CharSet first;          // what the first character may be
  CharSet rest;           // what the others may be
  std::string_view text;  // the rule in words
};

// Indexed by NameKind; the table of names.h, in its order.
constexpr std::array<NameRule, 7> kRules = {{
    {"a user name", 1, 32, kLower | CharSet("_"), kLower | kDigits | CharSet("_.-"),
     "1 to 32 lowercase letters, digits, '_', '.' or '-', starting with a letter or '_'"},
    {"a Unix user name", 1, 32, kLetters | CharSet("_"), kLetters | kDigits | CharSet("_.-"),
     "1 to 32 letters, digits, '_', '.' or '-', starting with a letter or '_'"},
    {"a project name", 1, 63, kLetters | kDigits, kLetters | kDigits | CharSet("_.-"),
     "1 to 63 letters, digits, '_', '.' or '-', starting with a letter or digit"},
    {"a token name", 1, 63, kLetters | kDigits, kLetters | kDigits | CharSet("_.-"),
     "1 to 63 letters, digits, '_', '.' or '-', starting with a letter or digit"},
    {"a job name", 0, 128, kLetters | kDigits | CharSet("_"),
     kLetters | kDigits | CharSet("_.-+=,:"),
     "at most 128 letters, digits, '_', '.', '-', '+', '=', ',' or ':', starting with a letter, "
     "digit or '_'"},
    {"a node name", 1, 253, kLetters | kDigits, kLetters | kDigits | CharSet("_.-"),
     "1 to 253 letters, digits, '.', '-' or '_', starting with a letter or digit"},
    {"an environment name", 1, 63, kLower | kDigits, kLower | kDigits | CharSet("-"),
     "1 to 63 lowercase letters, digits or '-', starting with a letter or digit"},
}};

const NameRule& RuleOf(NameKind kind) { return kRules[static_cast<size_t>(kind)]; }

// `name` as an error may show it: printable ASCII as is, other bytes as \xNN, at most 64 bytes
// of it.
std::string Shown(std::string_view name) {
  constexpr size_t kShown = 64;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (char c : name.substr(0, kShown)) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f && c != '\\') {
      out += c;
    } else {
      out += "\\x";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    }
  }
  if (name.size() > kShown) out += "...";
  return out;
}

}  // namespace

bool IsValidName(NameKind kind, std::string_view name) {
  const NameRule& rule = RuleOf(kind);
  if (name.size() < rule.min_length || name.size() > rule.max_length) return false;
  if (name.empty()) return true;
  if (!rule.first.Has(name[0])) return false;
  for (char c : name.substr(1)) {
    if (!rule.rest.Has(c)) return false;
  }
  return true;
}

Status CheckName(NameKind kind, std::string_view name) {
  if (IsValidName(kind, name)) return Status::Ok();
  const NameRule& rule = RuleOf(kind);
  std::string got = "'" + Shown(name) + "'";
  if (name.size() > rule.max_length) got += " (" + std::to_string(name.size()) + " bytes)";
  return InvalidArgument(std::string(rule.noun) + " must be " + std::string(rule.text) + "; got " +
                         got);
}

}  // namespace corral::protocol
