#include "server/control/checkpoint_folders.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

namespace corral::server {
namespace {

constexpr int kOpenDir = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
// Names read from a folder before any is removed (removing while reading the same stream may
// skip entries on NFS); a folder with more is read again until empty.
constexpr size_t kNamesPerRead = 4096;
// Rounds of reading a folder before its removal gives up (entries added as fast as removed).
constexpr int kMaxReads = 1024;

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

// The directory stream of `fd` (closed on failure), or the error of the open that gave it.
Result<Dir> DirOf(int fd, const std::string& path) {
  if (fd < 0) return Errno("open", path);
  DIR* dir = fdopendir(fd);
  if (dir == nullptr) {
    close(fd);
    return Errno("read", path);
  }
  return Dir(dir);
}

// Opens `name` in `parent` as a directory without following a link.
Result<Dir> OpenDir(int parent, const std::string& name, const std::string& path) {
  return DirOf(openat(parent, name.c_str(), kOpenDir), path);
}

// Opens the root itself: a link to it is followed (resolved by the kernel at each open), links
// below it never are.
Result<Dir> OpenRoot(const std::string& root) {
  return DirOf(open(root.c_str(), kOpenDir & ~O_NOFOLLOW), root);
}

// Up to `limit` names of the entries of `dir` (`path` for messages) but "." and "..".
Result<std::vector<std::string>> ReadNames(DIR* dir, const std::string& path, size_t limit) {
  std::vector<std::string> names;
  while (names.size() < limit) {
    errno = 0;
    const dirent* entry = readdir(dir);
    if (entry == nullptr) {
      if (errno != 0) return Errno("read", path);
      break;
    }
    std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(std::move(name));
  }
  return names;
}

// Removes `name` in the directory `parent` (`path` for messages): a directory with its
// content, anything else (a symbolic link included) by unlinking it. Stays on the device
// `device` (like rm --one-file-system): a mount inside a folder is an error, not descended.
Status RemoveAt(int parent, const std::string& name, const std::string& path, dev_t device,
                int depth) {
  struct stat st {};
  if (fstatat(parent, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
    return errno == ENOENT ? Status::Ok() : Errno("stat", path);
  }
  if (!S_ISDIR(st.st_mode)) {
    if (unlinkat(parent, name.c_str(), 0) != 0 && errno != ENOENT) return Errno("remove", path);
    return Status::Ok();
  }
  if (st.st_dev != device) {
    return FailedPrecondition(path + ": on another file system (a mount): left in place");
  }
  if (depth >= kMaxCheckpointDepth) {
    return FailedPrecondition(path + ": more than " + std::to_string(kMaxCheckpointDepth) +
                              " levels of folders");
  }
  {
    auto dir = OpenDir(parent, name, path);
    if (!dir.ok()) return dir.status();
    const int fd = dirfd(dir->get());
    for (int round = 0;; ++round) {
      if (round == kMaxReads) return FailedPrecondition(path + ": entries keep appearing");
      rewinddir(dir->get());
      auto names = ReadNames(dir->get(), path, kNamesPerRead);
      if (!names.ok()) return names.status();
      if (names->empty()) break;
      for (const std::string& child : *names) {
        CORRAL_RETURN_IF_ERROR(RemoveAt(fd, child, path + "/" + child, device, depth + 1));
      }
    }
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

Result<std::vector<JobId>> CheckpointFolderJobs(const std::string& root, JobId after,
                                                size_t limit) {
  auto dir = OpenRoot(root);
  if (!dir.ok()) return dir.status();
  std::vector<JobId> jobs;
  while (true) {
    errno = 0;
    const dirent* entry = readdir(dir->get());
    if (entry == nullptr) {
      if (errno != 0) return Errno("read", root);
      break;
    }
    const std::string name = entry->d_name;
    if (!IsJobIdName(name)) continue;
    const JobId id(std::stoll(name));
    if (id <= after) continue;
    jobs.push_back(id);
    // Keep the lowest `limit` above `after`, with a bounded vector.
    if (jobs.size() > 2 * limit + 1) {
      std::nth_element(jobs.begin(), jobs.begin() + static_cast<std::ptrdiff_t>(limit), jobs.end());
      jobs.resize(limit);
    }
  }
  std::sort(jobs.begin(), jobs.end());
  if (jobs.size() > limit) jobs.resize(limit);
  return jobs;
}

Status RemoveCheckpointFolder(const std::string& root, JobId job) {
  auto dir = OpenRoot(root);
  if (!dir.ok()) return dir.status();
  struct stat st {};
  if (fstat(dirfd(dir->get()), &st) != 0) return Errno("stat", root);
  const std::string name = std::to_string(job.value());
  return RemoveAt(dirfd(dir->get()), name, root + "/" + name, st.st_dev, 0);
}

}  // namespace corral::server
