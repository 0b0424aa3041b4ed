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
Status HttpApi::Impl::CheckJoinToken(const HttpRequest& req) const {
  if (config_.join_token_hash.empty() ||
      !SecureEquals(HashToken(BearerToken(req)), config_.join_token_hash)) {
    return Unauthenticated("invalid join token");
  }
  return Status::Ok();
}

Result<uint64_t> HttpApi::Impl::AuthenticateNode(const HttpRequest& req) {
  const std::string name = req.Header(protocol::kNodeHeader);
  if (name.empty()) {
    // Agents before protocol versions named their node in the body. Unauthenticated: such
    // an agent registers again, and its registration is refused naming the upgrade.
    return Unauthenticated(
        std::string("no ") + protocol::kNodeHeader + " header: " +
        protocol::CheckAgentProtocolVersion(std::nullopt, kVersion, controller_.NodeTimeout())
            .message());
  }
  const std::optional<uint64_t> registration = controller_.AuthenticateNode(name, BearerToken(req));
  if (!registration) return Unauthenticated("invalid node token: register again");
  return *registration;
}

void HttpApi::Impl::RegisterAgents(HttpServer& http) {
  http.Post(kRegisterPath, [this](const HttpRequest& req, HttpResponse& res) {
    if (Status joined = CheckJoinToken(req); !joined.ok()) return SendProblem(res, joined);
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
  http.Post(kHeartbeatPath, [this](const HttpRequest& req, HttpResponse& res) {
    auto registration = AuthenticateNode(req);
    if (!registration.ok()) return SendProblem(res, registration.status());
    const std::string name = req.Header(protocol::kNodeHeader);
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
