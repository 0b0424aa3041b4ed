// The names people and agents give things, one rule per kind (docs/security.md, "Names"). A
// name is checked where it is made: the API's requests that create a user, project or token
// (api_account.h, api_project.h), a submitted job spec (job_spec.h), an environment spec
// (environment_spec.h), an agent's registration (agent_messages.h), and on the agent, its own
// node name, its --task-user-map and the submitters it runs tasks as (agent/task_user.h).
//
//   kind         length   characters                              first character
//   user         1..32    a-z 0-9 _ . -                           a-z or _
//   Unix user    1..32    A-Z a-z 0-9 _ . -                       a letter or _
//   project      1..63    A-Z a-z 0-9 _ . -                       a letter or digit
//   token        1..63    A-Z a-z 0-9 _ . -                       a letter or digit
//   job          0..128   A-Z a-z 0-9 _ . - + = , :               a letter, digit or _
//   node         1..253   A-Z a-z 0-9 _ . -                       a letter or digit
//   environment  1..63    a-z 0-9 -                               a-z or a digit
//
// Every rule is ASCII only: no NUL, no control character (C0, DEL or Unicode's), no blank, no
// '/' and no byte >= 0x80, so that a name is one argv word, one path component, one URL path
// segment and one column of a table, and reads the same in a terminal as in a log. No name
// starts with '-' (an option to a CLI) or '.' (a hidden file, "..").
//
// Why each:
//  - user: agents may run a submitter's tasks as the Unix account of that name
//    (--run-as-submitter): the lowercase subset of POSIX's portable user names, as Debian's
//    adduser asks (NAME_REGEX) with '.' added ("a.smith"), at most 32 bytes (useradd's limit).
//  - Unix user: what a --task-user-map maps a corral user to: POSIX's portable user names (the
//    portable filename characters), uppercase included, as directories such as LDAP may have
//    them, starting as useradd asks (never a digit: "1000" would read as a uid). Every user
//    name is also a Unix user name.
//  - project, token: go into URL paths (/api/v1/projects/NAME/...), metrics and tables.
//  - job: a label in `corral jobs`, case kept, with the punctuation sweeps name runs with
//    ("lr=0.1,bs=64"); empty is no name.
//  - node: a hostname (or an agent's --name): also a path component on the node (the agent's
//    work directory and cgroups).
//  - environment: goes into URL paths and is written NAME@VERSION.
//
// Only new names are checked: names a store already holds (made before a rule existed or was
// made stricter) are looked up and listed as they are, never refused on reading.
#pragma once

#include <string_view>

#include "common/status.h"

namespace corral::protocol {

enum class NameKind { kUser, kUnixUser, kProject, kToken, kJob, kNode, kEnvironment };

// Whether `name` follows the rule of its kind.
bool IsValidName(NameKind kind, std::string_view name);

// OK, or InvalidArgument stating the rule and what is wrong, without a field (callers add it:
// FieldError, FieldReader::Bad): "a user name must be 1 to 32 lowercase letters, digits, '_',
// '.' or '-', starting with a letter or '_'; got 'a\x00b'". The name is shown escaped (bytes
// outside printable ASCII as \xNN) and cut after 64 bytes, so an error never carries a control
// character or invalid UTF-8 to a terminal or into JSON.
Status CheckName(NameKind kind, std::string_view name);

}  // namespace corral::protocol
