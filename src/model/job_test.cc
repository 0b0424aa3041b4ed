#include "model/job.h"

#include <gtest/gtest.h>

#include "model/node.h"

namespace corral::model {
namespace {

Job MakeJob(TaskResources r) {
  Job job;
  job.id = JobId(3);
  job.resources = std::move(r);
  return job;
}

TEST(JobValidation, AcceptsWholeGpusSharesAndCpuOnly) {
  EXPECT_TRUE(Validate(MakeJob(MakeResources(8, 1000, 32000, 1024))).ok());
  EXPECT_TRUE(Validate(MakeJob(MakeResources(1, 250, 1000, 1024))).ok());
  EXPECT_TRUE(Validate(MakeJob(MakeResources(0, 0, 1000, 1024))).ok());
}

TEST(JobValidation, ElasticRangesHoldTheSizeNowAndOneUnit) {
  Job gpus = MakeJob(MakeResources(2, 1000, 0, 0));
  gpus.elastic = ElasticBounds{ElasticUnit::kGpus, 2, 8, 0};
  EXPECT_TRUE(Validate(gpus).ok());
  gpus.resources.gpus = GpuCount(16);  // beyond MAX
  EXPECT_NE(Validate(gpus).message().find("'resources.gpus': must lie in the elastic range 2-8"),
            std::string::npos)
      << Validate(gpus).message();
  gpus.resources.gpus = GpuCount(2);
  gpus.tasks = 2;  // a range of GPUs is for one task
  EXPECT_NE(Validate(gpus).message().find("one task"), std::string::npos);
  Job nodes = MakeJob(MakeResources(4, 1000, 0, 0));
  nodes.elastic = ElasticBounds{ElasticUnit::kNodes, 1, 2, 0};
  EXPECT_TRUE(Validate(nodes).ok());
  nodes.elastic->min = 3;  // min > max
  EXPECT_NE(Validate(nodes).message().find("'elastic'"), std::string::npos);
  nodes.elastic = ElasticBounds{ElasticUnit::kNodes, 1, kMaxElasticSize + 1, 0};
  EXPECT_FALSE(Validate(nodes).ok());
  nodes.elastic = ElasticBounds{ElasticUnit::kNodes, 1, 2, -1};
  EXPECT_NE(Validate(nodes).message().find("'elastic.step'"), std::string::npos);
}

TEST(JobValidation, ErrorsNameTheField) {
  Status s = Validate(MakeJob(MakeResources(2, 500, 0, 0)));
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("job 3"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("resources.gpu_milli"), std::string::npos) << s.message();

  s = Validate(MakeJob(MakeResources(-1, 1000, 0, 0)));
  EXPECT_NE(s.message().find("resources.gpus"), std::string::npos) << s.message();

  s = Validate(MakeJob(MakeResources(1, 1001, 0, 0)));
  EXPECT_NE(s.message().find("resources.gpu_milli"), std::string::npos) << s.message();

  s = Validate(MakeJob(MakeResources(0, 10, 0, 0)));
  EXPECT_NE(s.message().find("resources.gpu_milli"), std::string::npos) << s.message();

  Job job = MakeJob(MakeResources(1, 1000, 0, 0));
  job.tasks = 0;
  s = Validate(job);
  EXPECT_NE(s.message().find("'tasks'"), std::string::npos) << s.message();
}

TEST(JobValidation, ArrayLimitBelongsToAnElementAndIsPositive) {
  Job job = MakeJob(MakeResources(1, 1000, 0, 0));
  job.array_id = JobId(3);
  EXPECT_TRUE(Validate(job).ok());
  job.array_max_running = 2;
  EXPECT_TRUE(Validate(job).ok());
  job.array_max_running = 0;
  EXPECT_NE(Validate(job).message().find("field 'array_max_running': must be >= 1, got 0"),
            std::string::npos)
      << Validate(job).message();
  job.array_max_running = 2;
  job.array_id.reset();
  EXPECT_NE(Validate(job).message().find("array_max_running"), std::string::npos);
  job.array_id = JobId(-1);
  EXPECT_NE(Validate(job).message().find("array_id"), std::string::npos);
}

TEST(JobValidation, EnvNames) {
  EXPECT_TRUE(IsEnvName("lr"));
  EXPECT_TRUE(IsEnvName("_BATCH_2"));
  EXPECT_FALSE(IsEnvName(""));
  EXPECT_FALSE(IsEnvName("2x"));
  EXPECT_FALSE(IsEnvName("learning-rate"));
  EXPECT_FALSE(IsEnvName("a b"));
}

TEST(NodeValidation, ErrorsNameTheField) {
  Node n = MakeNode("n1", "", 2, CpuMilli(1000), MemoryMib(1));
  Status s = Validate(n);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("gpu_model"), std::string::npos) << s.message();
  n.gpu_model = "T4";
  EXPECT_TRUE(Validate(n).ok());
  n.cpu = CpuMilli(0);
  EXPECT_NE(Validate(n).message().find("cpu_milli"), std::string::npos);
  n.cpu = CpuMilli(kMaxNodeCpuMilli);
  EXPECT_TRUE(Validate(n).ok());
  n.cpu = CpuMilli(kMaxNodeCpuMilli + 1);
  EXPECT_NE(
      Validate(n).message().find("field 'cpu_milli': must be at most 2147483647, got 2147483648"),
      std::string::npos)
      << Validate(n).message();
}

TEST(NodeValidation, LabelsAndAddresses) {
  Node n = MakeNode("n1", "T4", 1, CpuMilli(1000), MemoryMib(1));
  n.labels = {{"rack", "r-12"}, {"topology.corral/switch", "s_1.a"}};
  EXPECT_TRUE(Validate(n).ok());
  n.labels = {{"rack", "has space"}};
  Status s = Validate(n);
  EXPECT_NE(s.message().find("node 'n1': field 'labels'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("rack"), std::string::npos) << s.message();
  EXPECT_FALSE(ValidateLabel("", "x").ok());
  EXPECT_FALSE(ValidateLabel("k", "").ok());
  EXPECT_FALSE(ValidateLabel(std::string(kMaxLabelLength + 1, 'k'), "x").ok());
  EXPECT_TRUE(ValidateLabel(std::string(kMaxLabelLength, 'k'), "x").ok());
  EXPECT_FALSE(ValidateLabel("k", "a;rm -rf /").ok());
  EXPECT_TRUE(ValidateNodeAddress("10.0.0.2").ok());
  EXPECT_TRUE(ValidateNodeAddress("fe80::1").ok());
  EXPECT_TRUE(ValidateNodeAddress("gpu-07.cluster.example").ok());
  EXPECT_FALSE(ValidateNodeAddress("").ok());
  EXPECT_FALSE(ValidateNodeAddress("a b").ok());
  EXPECT_FALSE(ValidateNodeAddress("$(reboot)").ok());
  EXPECT_FALSE(ValidateNodeAddress(std::string(254, 'a')).ok());
}

}  // namespace
}  // namespace corral::model
