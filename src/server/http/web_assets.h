// The built dashboard (web/dist, docs/dashboard.md) as the server serves it: a directory of
// static files looked up by URL path, with a content type and a cache policy. Only regular
// files inside the root are served: paths with "..", ".", empty or hidden segments, backslashes
// or NUL bytes are refused, and a file whose real path (symlinks resolved) leaves the root is
// refused too. Reads the file on every lookup (a rebuilt dashboard is served at once).
// Thread safety: immutable after Create; Lookup may be called from any thread.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace corral::server {

// The Content-Type for a file name, by extension (text types with charset=utf-8);
// application/octet-stream for unknown ones.
std::string ContentTypeOf(std::string_view file_name);

class WebAssets {
 public:
  // A file to send.
  struct Asset {
    std::string body;
    std::string content_type;
    // "no-cache" for index.html and other unversioned files (revalidated, never stale);
    // "public, max-age=31536000, immutable" under /assets/, whose names carry a content hash.
    std::string cache_control;
  };

  // `root`: a directory holding index.html. Errors: NotFound when either is missing.
  static Result<WebAssets> Create(const std::string& root);

  // The file for the decoded URL path `path` ("/" is index.html). NotFound for anything that
  // is not a regular file inside the root (see above); never reads outside the root.
  Result<Asset> Lookup(std::string_view path) const;

  // The canonical root (symlinks resolved).
  const std::string& root() const { return root_; }

  // Files larger than this are not served (the dashboard's bundle is a few hundred KiB).
  static constexpr int64_t kMaxFileBytes = 32 << 20;

 private:
  explicit WebAssets(std::string root) : root_(std::move(root)) {}
  std::string root_;
};

}  // namespace corral::server
