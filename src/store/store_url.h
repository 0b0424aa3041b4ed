// Store URLs: splitting a scheme off and keeping passwords out of messages. Internal to store/.
#pragma once

#include <string>
#include <string_view>

namespace corral::store {

// The part before the first ':' ("sqlite", "postgres"); "" when there is no ':'.
std::string_view UrlScheme(std::string_view url);

// The database file of a "sqlite:PATH" URL ("sqlite:///abs/file.db" and "sqlite://rel.db" read
// like "sqlite:/abs/..." and "sqlite:rel.db", for those used to URL-style SQLite paths); "" when
// the URL names none.
std::string SqlitePath(std::string_view url);

// The URL with the password of "scheme://user:PASSWORD@host" and of a "password=PASSWORD"
// parameter replaced by "***". (Declared for users in store.h.)
std::string RedactUrl(std::string_view url);

// The password a URL carries (percent-decoded), or "" when it has none.
std::string UrlPassword(std::string_view url);

// `message` with every occurrence of `secret` replaced by "***" (no-op for an empty secret).
std::string Scrub(std::string message, std::string_view secret);

}  // namespace corral::store
