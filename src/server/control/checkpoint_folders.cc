#include "server/control/checkpoint_folders.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <functional>
#include <memory>

namespace corral::server {
namespace {

constexpr int kOpenDir = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;

// The failure errno says (NotFound for ENOENT), naming the step and the path.
Status Errno(const std::string& what, const std::string& path) {
  const int error = errno;
  return Status(error == ENOENT ? StatusCode::kNotFound : StatusCode::kInternal,
                what + " " + path + ": " + std::strerror(error));
}

// A directory stream that owns its descriptor.
struct DirCloser {
  void operator()(DIR* dir) const { closedir(dir); }
};
using Dir = std::unique_ptr<DIR, DirCloser>;

// Opens `name` in `parent` as a directory without following a link (fd -1: `path` itself).
Result<Dir> OpenDir(int parent, const std::string& name, const std::string& path) {
  const int fd = parent < 0 ? open(path.c_str(), kOpenDir) : openat(parent, name.c_str(), kOpenDir);
  if (fd < 0) return Errno("open", path);
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    close(fd);
    return Errno("read", path);
  }
  return Dir(dir);
}

// Calls `visit` with the name of every entry of `dir` (`path` for messages) but "." and "..",
// stopping at its first error.
Status ForEachName(DIR* dir, const std::string& path,
                   const std::function<Status(const std::string&)>& visit) {
  while (true) {
    errno = 0;
    const dirent* entry = readdir(dir);
    if (entry == nullptr) return errno != 0 ? Errno("read", path) : Status::Ok();
    const std::string name = entry->d_name;
    if (name == "." || name == "..") continue;
    CORRAL_RETURN_IF_ERROR(visit(name));
  }
}

// Removes `name` in the directory `parent` (`path` for messages): a directory with its
// content, anything else (a symbolic link included) by unlinking it.
Status RemoveAt(int parent, const std::string& name, const std::string& path, int depth) {
  struct stat st {};
  if (fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? Status::Ok() : Errno("stat", path);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (unlinkat(parent, name.c_str(), 0) != 0 && errno != ENOENT) return Errno("remove", path);
    return Status::Ok();
  }
  if (depth >= kMaxCheckpointDepth) {
    return FailedPrecondition(path + ": more than " + std::to_string(kMaxCheckpointDepth) +
                              " levels of folders");
  }
  {
    auto dir = OpenDir(parent, name, path);
    if (!dir.ok()) return dir.status();
    const int fd = dirfd(dir->get());
    CORRAL_RETURN_IF_ERROR(ForEachName(dir->get(), path, [&](const std::string& child) {
      return RemoveAt(fd, child, path + "/" + child, depth + 1);
    }));
  }
  if (unlinkat(parent, name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT) {
    return Errno("remove", path);
  }
  return Status::Ok();
}

// A job id named by `name`: 1..18 digits, no leading zero.
bool IsJobIdName(const std::string& name) {
  return !name.empty() && name.size() <= 18 && name[0] != '0' &&
         name.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

Result<std::vector<JobId>> CheckpointFolderJobs(const std::string& root, size_t limit) {
  auto dir = OpenDir(-1, "", root);
  if (!dir.ok()) return dir.status();
  std::vector<JobId> jobs;
  CORRAL_RETURN_IF_ERROR(ForEachName(dir->get(), root, [&](const std::string& name) {
    if (!IsJobIdName(name)) return Status::Ok();
    jobs.push_back(JobId(std::stoll(name)));
    // Keep the lowest `limit`: the oldest jobs first, with a bounded vector.
    if (jobs.size() > 2 * limit + 1) {
      std::nth_element(jobs.begin(), jobs.begin() + static_cast<std::ptrdiff_t>(limit), jobs.end());
      jobs.resize(limit);
    }
    return Status::Ok();
  }));
  std::sort(jobs.begin(), jobs.end());
  if (jobs.size() > limit) jobs.resize(limit);
  return jobs;
}

Status RemoveCheckpointFolder(const std::string& root, JobId job) {
  auto dir = OpenDir(-1, "", root);
  if (!dir.ok()) return dir.status();
  const std::string name = std::to_string(job.value());
  return RemoveAt(dirfd(dir->get()), name, root + "/" + name, 0);
}

}  // namespace corral::server
