// API routes of the agent gateway (docs/control-plane.md, "Agent protocol"): register and
// heartbeat.

#include "common/build_info.h"
#include "protocol/agent_messages.h"
#include "server/api/http_api_impl.h"

namespace corral::server {

using namespace api_internal;  // NOLINT(google-build-using-namespace)
using nlohmann::json;

// The agent gateway (docs/control-plane.md, "Agent protocol"): each route authenticates from
// headers first, then checks the protocol version, and only then reads the body through its
// codec (protocol/agent_messages.h).
void HttpApi::Impl::RegisterAgents(httplib::Server& http) {
  http.Post("/api/v1/agent/register", [this](const httplib::Request& req, httplib::Response& res) {
    if (config_.join_token_hash.empty() ||
        !SecureEquals(HashToken(BearerToken(req)), config_.join_token_hash)) {
      return SendProblem(res, Unauthenticated("invalid join token"));
    }
    auto body = ParseBody(req);
    if (!body.ok()) return SendProblem(res, body.status());
    auto version = protocol::ReadProtocolVersion(*body);
    if (!version.ok()) return SendProblem(res, version.status());
    if (Status s =
            protocol::CheckAgentProtocolVersion(*version, kVersion, controller_.NodeTimeout());
        !s.ok()) {
      return SendProblem(res, s);
    }
    auto request = protocol::ParseRegisterRequest(*body);
    if (!request.ok()) return SendProblem(res, request.status());
    auto registered = controller_.RegisterNode(*request);
    if (!registered.ok()) return SendProblem(res, registered.status());
    SendJson(res, 200, protocol::ToJson(*registered));
  });
  http.Post("/api/v1/agent/heartbeat", [this](const httplib::Request& req, httplib::Response& res) {
    const std::string name = req.get_header_value(protocol::kNodeHeader);
    if (name.empty()) {
      // Agents before protocol versions named their node in the body. Unauthenticated: such
      // an agent registers again, and its registration is refused naming the upgrade.
      return SendProblem(
          res, Unauthenticated(std::string("no ") + protocol::kNodeHeader + " header: " +
                               protocol::CheckAgentProtocolVersion(std::nullopt, kVersion,
                                                                   controller_.NodeTimeout())
                                   .message()));
    }
    const std::optional<uint64_t> registration =
        controller_.AuthenticateNode(name, BearerToken(req));
    if (!registration) {
      return SendProblem(res, Unauthenticated("invalid node token: register again"));
    }
    auto body = ParseBody(req);
    if (!body.ok()) return SendProblem(res, body.status());
    auto report = protocol::ParseReport(*body);
    if (!report.ok()) return SendProblem(res, report.status());
    auto answer = controller_.Heartbeat(name, *registration, *report);
    if (!answer.ok()) return SendProblem(res, answer.status());
    SendJson(res, 200, protocol::ToJson(*answer));
  });
}

}  // namespace corral::server
