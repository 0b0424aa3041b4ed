#include "model/allocation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

namespace corral::model {
namespace {

using ::testing::HasSubstr;

Allocation Distributed() {
  Allocation a;
  a.gpus = {{0, MilliGpu(1000)}, {3, MilliGpu(1000)}};
  a.cpu = CpuMilli(8000);
  a.memory = MemoryMib(65536);
  a.rendezvous = Rendezvous{"10.0.0.1", 29500, {"10.0.0.1", "10.0.0.2"}};
  return a;
}

TEST(Allocation, RoundTripsThroughItsJson) {
  Allocation session;
  session.gpus = {{1, MilliGpu(250)}};
  session.session = SessionEndpoint{"n1", 29501};
  for (const Allocation& a : {Distributed(), session, Allocation{}}) {
    auto back = AllocationFromJson(nlohmann::json::parse(ToJson(a).dump()));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, a);
  }
}

// Exactly what corral wrote into the tasks table before schema version 9 (the controller's
// AllocationJson(), plus the rendezvous it added): the "node" it repeated is ignored.
TEST(Allocation, ReadsTheFormWrittenBeforeSchemaVersion9) {
  auto a = AllocationFromJson(nlohmann::json::parse(
      R"({"node":"n1","gpus":[{"index":0,"milli":1000},{"index":3,"milli":1000}],)"
      R"("cpu_milli":8000,"memory_mib":65536,)"
      R"("rendezvous":{"master_addr":"10.0.0.1","port":29500,"hosts":["10.0.0.1","10.0.0.2"]}})"));
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(*a, Distributed());
}

TEST(Allocation, ErrorsNameTheField) {
  const std::pair<std::string, std::string> cases[] = {
      {R"([])", "must be a JSON object"},
      {R"({"cpu_milli":0,"memory_mib":0})", "field 'gpus': is required"},
      {R"({"gpus":[{"index":0,"milli":0}],"cpu_milli":0,"memory_mib":0})",
       "field 'gpus[0].milli': must be in 1..1000, got 0"},
      {R"({"gpus":[{"index":"0","milli":5}],"cpu_milli":0,"memory_mib":0})",
       "field 'gpus[0].index': must be an integer"},
      {R"({"gpus":[{"index":2,"milli":5},{"index":2,"milli":5}],"cpu_milli":0,"memory_mib":0})",
       "field 'gpus[1].index': GPU 2 is listed twice"},
      {R"({"gpus":[],"memory_mib":0})", "field 'cpu_milli': is required"},
      {R"({"gpus":[],"cpu_milli":-1,"memory_mib":0})", "field 'cpu_milli': must be >= 0"},
      {R"({"gpus":[],"cpu_milli":0,"memory_mib":1.5})", "field 'memory_mib': must be an integer"},
      {R"({"gpus":[],"cpu_milli":0,"memory_mib":0,"session":{"address":"n1","port":70000}})",
       "field 'session.port': must be in 1..65535"},
      {R"({"gpus":[],"cpu_milli":0,"memory_mib":0,"session":{"port":80}})",
       "field 'session.address': is required"},
      {R"({"gpus":[],"cpu_milli":0,"memory_mib":0,"rendezvous":[]})",
       "field 'rendezvous': must be an object"},
      {R"({"gpus":[],"cpu_milli":0,"memory_mib":0,)"
       R"("rendezvous":{"master_addr":"a","port":1,"hosts":[]}})",
       "field 'rendezvous.hosts': must not be empty"},
  };
  for (const auto& [text, why] : cases) {
    auto a = AllocationFromJson(nlohmann::json::parse(text));
    ASSERT_FALSE(a.ok()) << text;
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(a.status().message(), HasSubstr("allocation: "));
    EXPECT_THAT(a.status().message(), HasSubstr(why)) << text;
  }
}

TEST(Allocation, ValidateChecksWhatTheCodecChecks) {
  EXPECT_TRUE(Validate(Distributed()).ok());
  Allocation a = Distributed();
  a.gpus[1].index = 0;
  EXPECT_THAT(Validate(a).message(), HasSubstr("field 'gpus[1].index'"));
  a = Distributed();
  a.rendezvous->port = 0;
  EXPECT_THAT(Validate(a).message(), HasSubstr("field 'rendezvous.port'"));
  a = Distributed();
  a.memory = MemoryMib(-1);
  EXPECT_THAT(Validate(a).message(), HasSubstr("field 'memory_mib'"));
}

}  // namespace
}  // namespace corral::model
