// The environments users may see, create, clone, share and run jobs in (docs/environments.md),
// over the Store's immutable versions.
//
// Visibility: the built-ins (owner "", loaded from the server's environments directory) are
// visible to everyone; a user's own environments to them; an environment shared with a project
// to that project's members; admins see everything. An environment the caller may not see is
// NotFound, as if it did not exist.
//
// Thread safety: as the Store (every method is one or a few store calls; no state of its own).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "protocol/api_environment.h"
#include "server/control/environment.h"
#include "server/http/auth.h"
#include "store/store.h"

namespace corral::server {

// The most a user's environment spec may hold as stored (its normalised JSON). The codec bounds
// each part (variables, argv entries, ports, string lengths); this bounds the whole, which
// every job that runs in it carries in its own spec. Built-ins (the server's own files) are not
// held to it.
inline constexpr size_t kMaxEnvironmentSpecBytes = size_t{64} * 1024;

// One stored version with its parsed spec.
struct EnvironmentVersion {
  store::EnvironmentRecord record;
  EnvironmentSpec spec;
};

// The version as the API shows it.
protocol::EnvironmentView ViewOf(const EnvironmentVersion& env);

class EnvironmentCatalog {
 public:
  // Borrows `store` and `clock`, which must outlive the catalog.
  EnvironmentCatalog(store::Store& store, Clock& clock) : store_(store), clock_(clock) {}

  // What LoadBuiltins did.
  struct BuiltinsLoaded {
    std::vector<std::string> added;    // new versions, as "NAME@VERSION"
    std::vector<std::string> skipped;  // why a built-in was not loaded (its name is a user's)
  };
  // Makes `specs` the built-ins: a name not stored yet gets version 1, one whose latest version
  // differs from its spec a new version; an unchanged one stays. A built-in whose name a user
  // already owns (say, one added to envs/ after the user chose the name) is skipped, so that the
  // server still starts; the user keeps the name.
  Result<BuiltinsLoaded> LoadBuiltins(const std::vector<EnvironmentSpec>& specs);

  // The latest version of every environment `who` may see, by name.
  Result<std::vector<EnvironmentVersion>> List(const Principal& who);
  // One version (none: the latest) of an environment `who` may see.
  Result<EnvironmentVersion> Get(const Principal& who, const std::string& name,
                                 std::optional<int64_t> version);
  // "NAME" or "NAME@VERSION" (`field` names the field in errors), as Get.
  Result<EnvironmentVersion> Resolve(const Principal& who, const std::string& ref,
                                     const std::string& field);
  // A pinned version, whoever may see it now (a submitted job keeps the version it resolved).
  Result<EnvironmentVersion> Pinned(const std::string& name, int64_t version);

  // Stores `spec` (a spec the codec accepted) as a new version owned by `who`: version 1 of a
  // new name, the next version of the caller's own. AlreadyExists when the name is a built-in or
  // another user's; InvalidArgument naming the limit when its stored form (normalised JSON) is
  // over kMaxEnvironmentSpecBytes. A clone is the latest version of a source `who` may see (Get),
  // changed (protocol::CloneEnvironmentSpec) and created as the cloner's own.
  Result<EnvironmentVersion> Create(const Principal& who, const EnvironmentSpec& spec);
  // Lets the members of `project` see and use every version of `name`. Only its owner (who must
  // be a member of `project`) or an admin; built-ins are everyone's already
  // (FailedPrecondition).
  Status Share(const Principal& who, const std::string& name, const std::string& project);

 private:
  static bool MaySee(const Principal& who, const store::EnvironmentRecord& record);
  static Result<EnvironmentVersion> Parsed(store::EnvironmentRecord record);

  store::Store& store_;
  Clock& clock_;
};

}  // namespace corral::server
