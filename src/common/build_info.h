// What this binary was built from, for `corral --version` and bug reports.
//
// kVersion is the project's version (CMakeLists.txt's project(VERSION)). kCommit is the git
// commit the build tree was at when the binary was last built: an abbreviated hash with
// "-dirty" appended when tracked files had uncommitted changes, or "unknown" when the sources
// are not a git checkout (a release tarball) or git is missing. Both are NUL-terminated
// constants with static storage; they are generated at build time (cmake/build_info.cmake), so
// a new commit re-links the binary without recompiling anything else.
#pragma once

namespace corral {

extern const char kVersion[];
extern const char kCommit[];

}  // namespace corral
