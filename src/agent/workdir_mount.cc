#include "agent/workdir_mount.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "agent/file_io.h"

namespace corral::agent {
namespace {

// Sends `fd` (or, when fd < 0, the errno `error`) over the socket `s`.
void SendResult(int s, int fd, int error) {
  char byte = fd >= 0 ? 0 : 1;
  iovec data{&byte, 1};
  msghdr msg{};
  msg.msg_iov = &data;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  if (fd >= 0) {
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
    (void)sendmsg(s, &msg, MSG_NOSIGNAL);
  } else {
    (void)send(s, &byte, 1, MSG_NOSIGNAL);
    (void)send(s, &error, sizeof error, MSG_NOSIGNAL);
  }
}

// The descriptor the child sent, or the errno it failed with (negated).
int ReceiveResult(int s) {
  char byte = 0;
  iovec data{&byte, 1};
  msghdr msg{};
  msg.msg_iov = &data;
  msg.msg_iovlen = 1;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  while ((n = recvmsg(s, &msg, MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR) {
  }
  if (n != 1) return -EIO;  // the child died before answering
  if (byte == 0) {
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    if (c == nullptr || c->cmsg_type != SCM_RIGHTS) return -EIO;
    int fd = -1;
    std::memcpy(&fd, CMSG_DATA(c), sizeof(int));
    return fd;
  }
  int error = EIO;
  while ((n = recv(s, &error, sizeof error, 0)) < 0 && errno == EINTR) {
  }
  return n == sizeof error ? -error : -EIO;
}

}  // namespace

Result<int> OpenDirectoryAs(const std::optional<ShimIdentity>& user, const std::string& path) {
  const int flags = O_RDONLY | O_DIRECTORY | O_CLOEXEC;
  if (!user) {
    const int fd = open(path.c_str(), flags);
    if (fd < 0) return PermissionDenied("workdir " + path + ": " + ErrnoText(errno));
    return fd;
  }
  int sockets[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sockets) != 0) {
    return IoError("workdir " + path + ": socketpair: " + ErrnoText(errno));
  }
  const pid_t child = fork();
  if (child < 0) {
    const int error = errno;
    close(sockets[0]);
    close(sockets[1]);
    return IoError("workdir " + path + ": fork: " + ErrnoText(error));
  }
  if (child == 0) {
    close(sockets[0]);
    int fd = -1;
    int error = 0;
    if (setgroups(user->groups.size(), user->groups.data()) != 0 || setgid(user->gid) != 0 ||
        setuid(user->uid) != 0) {
      error = errno;
    } else if ((fd = open(path.c_str(), flags)) < 0) {
      error = errno;
    }
    SendResult(sockets[1], fd, error);
    _exit(0);
  }
  close(sockets[1]);
  const int result = ReceiveResult(sockets[0]);
  close(sockets[0]);
  while (waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
  }
  if (result < 0) {
    return PermissionDenied("workdir " + path + ": " + ErrnoText(-result) + " as uid " +
                            std::to_string(user->uid));
  }
  return result;
}

Status BindDirectory(int fd, const std::string& target) {
  // The magic link names exactly the directory opened, whatever its path now leads to.
  const std::string source = "/proc/self/fd/" + std::to_string(fd);
  if (mount(source.c_str(), target.c_str(), nullptr, MS_BIND, nullptr) != 0) {
    return IoError("bind the workdir at " + target + ": " + ErrnoText(errno));
  }
  return Status::Ok();
}

Status UnbindDirectory(const std::string& target) {
  if (umount2(target.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW) != 0 && errno != EINVAL &&
      errno != ENOENT) {
    return IoError("unmount the workdir at " + target + ": " + ErrnoText(errno));
  }
  // rmdir, not a recursive removal: should the unmount not have happened, what is mounted
  // there (the user's files) makes it fail instead of being deleted.
  if (rmdir(target.c_str()) != 0 && errno != ENOENT) {
    return IoError("remove " + target + ": " + ErrnoText(errno));
  }
  return Status::Ok();
}

}  // namespace corral::agent
