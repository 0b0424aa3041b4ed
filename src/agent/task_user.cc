#include "agent/task_user.h"

#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "agent/file_io.h"
#include "protocol/names.h"

namespace corral::agent {
namespace {

constexpr size_t kMaxPasswdBuffer = 1 << 20;

// getpwnam_r / getpwuid_r with a buffer that grows on ERANGE. `lookup` returns the errno-style
// result of the call; `what` names the entry in messages.
template <typename Lookup>
Result<TaskUser> ReadPasswd(const std::string& what, Lookup lookup) {
  long hint = sysconf(_SC_GETPW_R_SIZE_MAX);
  std::vector<char> buffer(hint > 0 ? static_cast<size_t>(hint) : 4096);
  passwd entry = {};
  passwd* found = nullptr;
  int error = 0;
  while ((error = lookup(&entry, buffer.data(), buffer.size(), &found)) == ERANGE &&
         buffer.size() < kMaxPasswdBuffer) {
    buffer.resize(buffer.size() * 2);
  }
  // "Not found" is found == nullptr with error 0, or one of these for some NSS modules.
  if (found == nullptr &&
      (error == 0 || error == ENOENT || error == ESRCH || error == EBADF || error == EPERM)) {
    return NotFound(what + ": no such user");
  }
  if (found == nullptr)
    return IoError(what + ": cannot read the user database: " + ErrnoText(error));
  TaskUser user;
  user.name = entry.pw_name;
  user.uid = entry.pw_uid;
  user.gid = entry.pw_gid;
  user.home = entry.pw_dir != nullptr && entry.pw_dir[0] != '\0' ? entry.pw_dir : "/";
  return user;
}

}  // namespace

Result<TaskUser> LookUpUser(const std::string& name) {
  if (Status valid = protocol::CheckName(protocol::NameKind::kUnixUser, name); !valid.ok()) {
    return InvalidArgument("task user: " + valid.message());
  }
  const std::string what = "task user '" + name + "'";
  Result<TaskUser> user =
      ReadPasswd(what, [&](passwd* entry, char* buffer, size_t size, passwd** found) {
        return getpwnam_r(name.c_str(), entry, buffer, size, found);
      });
  if (!user.ok()) return user;
  if (user->name != name) {
    return InvalidArgument(what + ": the user database answered with user '" + user->name +
                           "' (uid " + std::to_string(user->uid) +
                           "); corral runs tasks only as the user of exactly the name asked");
  }
  std::vector<gid_t> groups(32);
  int count = static_cast<int>(groups.size());
  while (getgrouplist(user->name.c_str(), user->gid, groups.data(), &count) < 0) {
    // count now holds the number needed; it only grows if the database changed meanwhile.
    if (static_cast<size_t>(count) <= groups.size()) count = static_cast<int>(groups.size()) * 2;
    if (count > 65536) return IoError(what + ": too many supplementary groups");
    groups.resize(static_cast<size_t>(count));
  }
  groups.resize(static_cast<size_t>(count));
  user->groups = std::move(groups);
  return user;
}

Result<std::string> CurrentUserName() {
  const uid_t uid = geteuid();
  Result<TaskUser> user = ReadPasswd("uid " + std::to_string(uid),
                                     [&](passwd* entry, char* buffer, size_t size, passwd** found) {
                                       return getpwuid_r(uid, entry, buffer, size, found);
                                     });
  if (!user.ok()) return user.status();
  return user->name;
}

Result<std::map<std::string, std::string>> ParseUserMap(const std::string& text) {
  std::map<std::string, std::string> map;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    std::istringstream words(line.substr(0, line.find('#')));  // names have no '#'
    std::string corral_user, unix_user, extra;
    words >> corral_user;
    if (corral_user.empty()) continue;
    words >> unix_user >> extra;
    const std::string where = "line " + std::to_string(number) + ": ";
    if (unix_user.empty() || !extra.empty()) {
      return InvalidArgument(where + "expected 'CORRAL_USER UNIX_USER', got '" + line + "'");
    }
    for (const auto& [name, kind] : {std::pair{&corral_user, protocol::NameKind::kUser},
                                     {&unix_user, protocol::NameKind::kUnixUser}}) {
      if (Status valid = protocol::CheckName(kind, *name); !valid.ok()) {
        return InvalidArgument(where + valid.message());
      }
    }
    if (!map.emplace(corral_user, unix_user).second) {
      return InvalidArgument(where + "'" + corral_user + "' is mapped twice");
    }
  }
  return map;
}

namespace {

// Whether `user` may search a folder of status `st`: the owner's, group's or others' x bit, as
// the kernel picks them (the owner's alone for the owner, even where the group's would allow);
// root always may.
bool MaySearch(const struct stat& st, const TaskUser& user) {
  if (user.uid == 0) return true;
  if (st.st_uid == user.uid) return (st.st_mode & S_IXUSR) != 0;
  if (st.st_gid == user.gid ||
      std::find(user.groups.begin(), user.groups.end(), st.st_gid) != user.groups.end()) {
    return (st.st_mode & S_IXGRP) != 0;
  }
  return (st.st_mode & S_IXOTH) != 0;
}

}  // namespace

std::string WhyNotEnterable(const std::string& dir, const TaskUser* user) {
  if (user == nullptr) {
    struct stat st;
    if (stat(dir.c_str(), &st) != 0) {
      return errno == EACCES ? "cannot be entered by the agent's user" : "is not on this node";
    }
    if (!S_ISDIR(st.st_mode)) return "is not a directory here";
    return access(dir.c_str(), X_OK) == 0 ? "" : "cannot be entered by the agent's user";
  }
  // Folder by folder from the root, as the kernel resolves the path for the user, and no
  // further than the user could look: what lies behind a folder they cannot enter is not told.
  const std::string refused = "cannot be entered by user '" + user->name + "'";
  std::string path;
  size_t start = 1;
  while (start <= dir.size()) {
    size_t end = dir.find('/', start);
    if (end == std::string::npos) end = dir.size();
    if (end > start) {
      path += "/" + dir.substr(start, end - start);
      struct stat st;
      if (stat(path.c_str(), &st) != 0) return errno == EACCES ? refused : "is not on this node";
      if (!S_ISDIR(st.st_mode)) return "is not a directory here";
      if (!MaySearch(st, *user)) return refused;
    }
    start = end + 1;
  }
  return "";
}

}  // namespace corral::agent
