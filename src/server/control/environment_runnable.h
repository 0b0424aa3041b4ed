// Where an environment can run (docs/environments.md, "Runs here"): what it needs of a node, as
// the names placement tests (model::Node::runtimes: "container", "tool:python3",
// "prefix:/opt/corral/envs/x"), what a node offers from its agent's report, and, over the
// registered nodes, on how many it runs and why on none. One source for `env list`'s RUNS HERE,
// the submit-time refusal (submit_fit.h), the scheduler's filter (Controller::ModelJobOf) and the
// runtime of a launch. Pure functions.
//
// What is checked: a container engine (for an image), a venv or conda prefix directly under
// model::kEnvsRoot (a prefix elsewhere is not reported by agents and counts as present), and a
// plain-host environment's `host.tools`. Whether an image is present is not: engines pull it at
// the first start.
#pragma once

#include <string>
#include <vector>

#include "protocol/api_environment.h"
#include "protocol/api_node.h"
#include "protocol/environment_spec.h"

namespace corral::server {

// The names of which a node must offer one to run `spec`; empty when every node can (the plain
// host, or a prefix that is not checked).
std::vector<std::string> EnvironmentNeeds(const protocol::EnvironmentSpec& spec);

// The names a node offers: its runtimes, "tool:" each tool, "prefix:" each folder.
std::vector<std::string> NodeOffers(const std::vector<std::string>& runtimes,
                                    const std::vector<std::string>& tools,
                                    const std::vector<std::string>& env_prefixes);

// The runtime a launch of `spec` uses on a node offering `offers`: "process" when its host side
// is there (or it has no image), else "container".
std::string LaunchRuntime(const protocol::EnvironmentSpec& spec,
                          const std::vector<std::string>& offers);

// Why no node offering none of EnvironmentNeeds(spec) can run it: "needs a container engine
// (podman or docker) for its image, or the folder /opt/corral/envs/pytorch: no node has any of
// them". Only meaningful when EnvironmentNeeds(spec) is not empty.
std::string WhyNotRunnable(const protocol::EnvironmentSpec& spec);

// Whether `node` offers one of `needs` (EnvironmentNeeds; empty: yes), without building its
// NodeOffers: what the per-node loops of RunsOn and the submit check use.
bool OffersOneOf(const std::vector<std::string>& needs, const protocol::NodeView& node);

// On how many of `nodes` `spec` runs, and when on none, why.
protocol::EnvironmentRunsHere RunsOn(const protocol::EnvironmentSpec& spec,
                                     const std::vector<const protocol::NodeView*>& nodes);

}  // namespace corral::server
