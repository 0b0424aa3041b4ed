// The Unix user that tasks run as (ProcessRuntimeOptions::task_user, or each submitter's with
// run_as_submitter), looked up in the user database (/etc/passwd, NSS) by the agent before the
// fork, once at startup or at each launch: the forked task only makes the system calls that
// switch to it (shim.h).
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

#include "common/status.h"

namespace corral::agent {

struct TaskUser {
  std::string name;
  uid_t uid = 0;
  gid_t gid = 0;              // primary group
  std::vector<gid_t> groups;  // supplementary groups (getgrouplist: the primary one included)
  std::string home;           // HOME of its tasks; "/" when the database gives none
};

// Looks `name` up by exactly that name. Errors: InvalidArgument when `name` is not a Unix user
// name (protocol/names.h: so no NUL can cut it short on its way to getpwnam, and no odd byte
// reaches a directory service), or when the database answers with another user (a directory
// that matches names loosely, e.g. case-insensitively); NotFound "task user 'x': no such user";
// IoError when the user database cannot be read.
Result<TaskUser> LookUpUser(const std::string& name);

// The name of the user this process runs as (effective uid). NotFound when the uid has no
// entry in the user database (e.g. a container started with an arbitrary uid).
Result<std::string> CurrentUserName();

// Parses a user map (the agent's --task-user-map): one "CORRAL_USER UNIX_USER" pair per line;
// '#' starts a comment, blank lines are ignored. CORRAL_USER must be a user name and UNIX_USER
// a Unix user name (protocol/names.h). Errors name the line: "line 3: expected 'CORRAL_USER
// UNIX_USER', got 'alice'", "line 2: a user name must be ..."; a corral user mapped twice is an
// error.
Result<std::map<std::string, std::string>> ParseUserMap(const std::string& text);

// Why `user` (nullptr: this process's own user) could not make `dir` (an absolute path) its
// working folder, as a sentence's end ("is not on this node", "is not a directory here",
// "cannot be entered by user 'alice'"); "" when it can: every folder of the path, from the
// root, exists and the user may search it (the owner's, group's or others' x bit, as the kernel
// picks them; root always may). The walk stops at the first folder the user may not enter, so
// the answer tells nothing of what lies behind it. A symbolic link in the path is followed
// without checking the folders above its target (the task then fails to enter it, naming it).
std::string WhyNotEnterable(const std::string& dir, const TaskUser* user);

}  // namespace corral::agent
