// API routes of nodes: list, cordon, uncordon, drain, remove.

#include "server/api/http_api_impl.h"

namespace corral::server {

using namespace api_internal;  // NOLINT(google-build-using-namespace)
using nlohmann::json;

void HttpApi::Impl::RegisterNodes(HttpServer& http) {
  http.Get("/api/v1/nodes", Authed([this](const Principal& who, const auto&, auto& res) {
             SendJson(res, 200, protocol::ToJson(controller_.Nodes(who)));
           }));
  http.Post(R"(/api/v1/nodes/([^/]+)/(cordon|uncordon|drain|remove))",
            Authed(
                [this](const Principal&, const auto& req, auto& res) {
                  Status s = controller_.SetNodeState(req.matches[1], req.matches[2]);
                  if (!s.ok()) return SendProblem(res, s);
                  SendJson(res, 200,
                           {{"node", std::string(req.matches[1])},
                            {"action", std::string(req.matches[2])}});
                },
                /*admin_only=*/true));
}

}  // namespace corral::server
