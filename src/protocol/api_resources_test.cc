// The API resources' codecs (api_*.h): a round trip per resource, and refusals that name the
// field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "protocol/api_node.h"

namespace corral::protocol {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// The message of `result`'s error ("" when it is OK).
template <typename T>
std::string ErrorOf(const Result<T>& result) {
  return result.ok() ? "" : result.status().message();
}

NodeView SomeNode() {
  NodeView n;
  n.name = "gpu-01";
  n.state = model::NodeState::kCordoned;
  n.last_heartbeat = Seconds(1700000000);
  n.gpu_model = "A100";
  n.gpus = 2;
  n.cpu = CpuMilli(64000);
  n.memory = MemoryMib(524288);
  n.labels = {{"rack", "r1"}};
  n.runtimes = {"process", "container"};
  n.container_engine = "podman 4.3.1";
  n.free = NodeFree{{1000, 500}, CpuMilli(60000), MemoryMib(500000)};
  n.gpu_tasks = {{}, {{JobId(7), 0, "alice", "vision", MilliGpu(500)}}};
  return n;
}

TEST(ApiNodeTest, RoundTrips) {
  const NodeView node = SomeNode();
  auto parsed = ParseNodeView(ToJson(node));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, node);
  // Optional fields stay absent when empty, as the API always sent them.
  NodeView bare = node;
  bare.container_engine.clear();
  bare.free.reset();
  const json j = ToJson(bare);
  EXPECT_FALSE(j.contains("container_engine"));
  EXPECT_FALSE(j.contains("gpu_metrics_error"));
  EXPECT_FALSE(j.contains("gpu_free_milli"));
  EXPECT_EQ(j["gpu_tasks"], json::parse(R"([[], [{"job": 7, "task": 0, "user": "alice",
      "project": "vision", "milli": 500}]])"));
  auto list = ParseNodeViews(ToJson(std::vector<NodeView>{node, bare}));
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_EQ(*list, (std::vector<NodeView>{node, bare}));
}

TEST(ApiNodeTest, RefusalsNameTheField) {
  json j = ToJson(SomeNode());
  j["state"] = "gone";
  EXPECT_THAT(ErrorOf(ParseNodeView(j)), HasSubstr("node: field 'state': unknown node state"));
  j = ToJson(SomeNode());
  j["gpu_tasks"][1][0]["milli"] = 0;
  EXPECT_THAT(ErrorOf(ParseNodeView(j)),
              HasSubstr("node: field 'gpu_tasks[1][0].milli': must be in 1..1000, got 0"));
  j = ToJson(SomeNode());
  j.erase("name");
  EXPECT_THAT(ErrorOf(ParseNodeViews(json::array({j}))),
              HasSubstr("nodes: field '[0].name': is required"));
  j = ToJson(SomeNode());
  j["gpus"] = "2";
  EXPECT_THAT(ErrorOf(ParseNodeView(j)), HasSubstr("node: field 'gpus': must be an integer"));
}

}  // namespace
}  // namespace corral::protocol
