#include "server/control/environment_runnable.h"

#include <algorithm>
#include <filesystem>

#include "model/node.h"

namespace corral::server {

namespace {

// The prefix agents report (a folder directly under model::kEnvsRoot), or "" when unchecked.
std::string CheckedPrefix(const protocol::EnvironmentSpec& spec) {
  const std::string& prefix = spec.venv.empty() ? spec.conda : spec.venv;
  if (prefix.empty()) return "";
  return std::filesystem::path(prefix).parent_path() == model::kEnvsRoot ? prefix : "";
}

bool Offers(const std::vector<std::string>& offers, const std::string& name) {
  return std::find(offers.begin(), offers.end(), name) != offers.end();
}

// The names of the process runtime's side: empty when it has none (an image only); {"process"}
// when nothing is checked.
std::vector<std::string> HostNeeds(const protocol::EnvironmentSpec& spec) {
  if (!spec.HasHost() && !spec.image.empty()) return {};
  std::vector<std::string> needs;
  for (const std::string& tool : spec.tools) needs.push_back(model::kToolPrefix + tool);
  if (const std::string prefix = CheckedPrefix(spec); !prefix.empty()) {
    needs.push_back(model::kEnvPrefixPrefix + prefix);
  }
  if (needs.empty()) needs.push_back(model::kProcessRuntime);
  return needs;
}

}  // namespace

std::vector<std::string> EnvironmentNeeds(const protocol::EnvironmentSpec& spec) {
  std::vector<std::string> needs = HostNeeds(spec);
  if (Offers(needs, model::kProcessRuntime)) return {};  // every agent offers it
  if (!spec.image.empty()) needs.insert(needs.begin(), model::kContainerRuntime);
  return needs;
}

std::vector<std::string> NodeOffers(const std::vector<std::string>& runtimes,
                                    const std::vector<std::string>& tools,
                                    const std::vector<std::string>& env_prefixes) {
  std::vector<std::string> offers = runtimes;
  for (const std::string& tool : tools) offers.push_back(model::kToolPrefix + tool);
  for (const std::string& prefix : env_prefixes) offers.push_back(model::kEnvPrefixPrefix + prefix);
  return offers;
}

std::string LaunchRuntime(const protocol::EnvironmentSpec& spec,
                          const std::vector<std::string>& offers) {
  const std::vector<std::string> host = HostNeeds(spec);
  const bool host_here = std::any_of(host.begin(), host.end(), [&](const std::string& name) {
    return name == model::kProcessRuntime || Offers(offers, name);
  });
  return host_here || spec.image.empty() ? model::kProcessRuntime : model::kContainerRuntime;
}

std::string WhyNotRunnable(const protocol::EnvironmentSpec& spec) {
  std::vector<std::string> parts;
  if (!spec.image.empty()) parts.push_back("a container engine (podman or docker) for its image");
  if (const std::string prefix = CheckedPrefix(spec); !prefix.empty()) {
    parts.push_back("the folder " + prefix);
  }
  if (!spec.tools.empty()) {
    std::string tools;
    for (const std::string& t : spec.tools) tools += (tools.empty() ? "" : " or ") + t;
    parts.push_back(tools + " on the PATH");
  }
  std::string why = "needs ";
  for (size_t i = 0; i < parts.size(); ++i) why += (i == 0 ? "" : ", or ") + parts[i];
  why += parts.size() > 1 ? ": no node has any of them" : ": no node has it";
  if (!spec.install.empty()) why += " (" + spec.install + ")";
  return why;
}

bool OffersOneOf(const std::vector<std::string>& needs, const protocol::NodeView& node) {
  if (needs.empty()) return true;
  const std::string_view tool = model::kToolPrefix;
  const std::string_view prefix = model::kEnvPrefixPrefix;
  return std::any_of(needs.begin(), needs.end(), [&](const std::string& name) {
    if (name.rfind(tool, 0) == 0) return Offers(node.tools, name.substr(tool.size()));
    if (name.rfind(prefix, 0) == 0) return Offers(node.env_prefixes, name.substr(prefix.size()));
    return Offers(node.runtimes, name);
  });
}

protocol::EnvironmentRunsHere RunsOn(const protocol::EnvironmentSpec& spec,
                                     const std::vector<const protocol::NodeView*>& nodes) {
  protocol::EnvironmentRunsHere out;
  out.of = static_cast<int>(nodes.size());
  const std::vector<std::string> needs = EnvironmentNeeds(spec);
  for (const protocol::NodeView* n : nodes) out.nodes += OffersOneOf(needs, *n) ? 1 : 0;
  if (out.nodes == 0)
    out.why_not = nodes.empty() ? "no node has registered yet" : WhyNotRunnable(spec);
  return out;
}

}  // namespace corral::server
