#include "server/http/web_assets.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <filesystem>
#include <utility>
#include <vector>

namespace corral::server {

namespace {

namespace fs = std::filesystem;

// The path's segments when every one is a plain name: not empty, not "." or "..", not hidden
// (".git", ".env"), without backslashes or NUL. Else empty (refused).
std::vector<std::string> PlainSegments(std::string_view path) {
  std::vector<std::string> segments;
  if (path.empty() || path.front() != '/') return {};
  size_t start = 1;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    std::string_view s = path.substr(start, slash - start);
    if (s.empty() || s.front() == '.' || s.find('\\') != std::string_view::npos ||
        s.find('\0') != std::string_view::npos) {
      return {};
    }
    segments.emplace_back(s);
    start = slash + 1;
  }
  return segments;
}

}  // namespace

std::string ContentTypeOf(std::string_view file_name) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 12> kTypes = {{
      {".html", "text/html; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".mjs", "text/javascript; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".json", "application/json"},
      {".map", "application/json"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
      {".woff2", "font/woff2"},
      {".txt", "text/plain; charset=utf-8"},
      {".webmanifest", "application/manifest+json"},
  }};
  for (const auto& [ext, type] : kTypes) {
    if (file_name.size() > ext.size() &&
        file_name.compare(file_name.size() - ext.size(), ext.size(), ext) == 0) {
      return std::string(type);
    }
  }
  return "application/octet-stream";
}

Result<WebAssets> WebAssets::Create(const std::string& root) {
  std::error_code ec;
  const fs::path canonical = fs::canonical(root, ec);
  if (ec || !fs::is_directory(canonical, ec)) {
    return NotFound("--web-dir " + root + ": not a directory");
  }
  if (!fs::is_regular_file(canonical / "index.html", ec)) {
    return NotFound("--web-dir " + root + ": has no index.html (build it: make web)");
  }
  return WebAssets(canonical.string());
}

Result<WebAssets::Asset> WebAssets::Lookup(std::string_view path) const {
  const Status not_found = NotFound("no such file in the dashboard");
  if (path == "/") path = "/index.html";
  const std::vector<std::string> segments = PlainSegments(path);
  if (segments.empty()) return not_found;
  fs::path candidate(root_);
  for (const std::string& s : segments) candidate /= s;
  // Symlinks are resolved and the result must still lie under the root: a link inside the
  // dashboard cannot lead out of it.
  std::error_code ec;
  const fs::path real = fs::canonical(candidate, ec);
  if (ec) return not_found;
  const std::string real_text = real.string();
  if (real_text.size() <= root_.size() || real_text.compare(0, root_.size(), root_) != 0 ||
      real_text[root_.size()] != '/') {
    return not_found;
  }
  // O_NOFOLLOW and fstat on what was opened: the regular file checked is the one read.
  const int fd = ::open(real_text.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return not_found;
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > kMaxFileBytes) {
    ::close(fd);
    return not_found;
  }
  Asset asset;
  asset.body.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < asset.body.size()) {
    const ssize_t n = ::read(fd, asset.body.data() + done, asset.body.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  asset.body.resize(done);
  asset.content_type = ContentTypeOf(segments.back());
  asset.cache_control = segments.size() > 1 && segments.front() == "assets"
                            ? "public, max-age=31536000, immutable"
                            : "no-cache";
  return asset;
}

}  // namespace corral::server
