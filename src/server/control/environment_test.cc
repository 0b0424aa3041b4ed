#include "server/control/environment.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

namespace corral::server {
namespace {

using protocol::ToJson;
using ::testing::HasSubstr;

nlohmann::json Spec() {
  return {{"name", "torch"},
          {"description", "PyTorch"},
          {"image", "nvcr.io/nvidia/pytorch:24.05-py3"},
          {"host", {{"venv", "/opt/corral/envs/torch"}}},
          {"command", {"python3"}},
          {"ports", {6006}},
          {"gpus", {{"min", 1}, {"cuda", "12.4"}}},
          {"env", {{"NCCL_DEBUG", "WARN"}}}};
}

TEST(EnvironmentSpecTest, ParsesAndRoundTrips) {
  auto spec = ParseEnvironmentSpec(Spec());
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->venv, "/opt/corral/envs/torch");
  EXPECT_EQ(spec->min_gpus, 1);
  EXPECT_EQ(spec->Runtimes(), (std::vector<std::string>{"container", "process"}));
  EXPECT_EQ(spec->PreferredRuntime(), "process");
  EXPECT_EQ(ToJson(*spec), Spec());
}

TEST(EnvironmentSpecTest, RuntimesFollowImageAndHost) {
  auto image_only = ParseEnvironmentSpec({{"name", "c"}, {"image", "ubuntu:24.04"}});
  ASSERT_TRUE(image_only.ok());
  EXPECT_EQ(image_only->Runtimes(), (std::vector<std::string>{"container"}));
  EXPECT_EQ(image_only->PreferredRuntime(), "container");
  auto plain = ParseEnvironmentSpec({{"name", "plain"}});
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->Runtimes(), (std::vector<std::string>{"process"}));
}

TEST(EnvironmentSpecTest, HostToolsRoundTripAndRunOnTheProcessRuntime) {
  const nlohmann::json json = {
      {"name", "nb"},
      {"image", "quay.io/jupyter/base-notebook"},
      {"host", {{"tools", {"jupyter-lab", "jupyter-notebook"}}, {"install", "apt install x"}}}};
  auto spec = ParseEnvironmentSpec(json);
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  EXPECT_EQ(spec->install, "apt install x");
  EXPECT_EQ(spec->Runtimes(), (std::vector<std::string>{"container", "process"}));
  EXPECT_EQ(ToJson(*spec), json);
}

TEST(EnvironmentSpecTest, EveryErrorNamesTheField) {
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"description", "x"}}, "field 'name': is required"},
      {{{"name", "Torch"}}, "field 'name'"},
      {{{"name", "t"}, {"colour", "red"}}, "field 'colour': unknown field"},
      {{{"name", "t"}, {"image", "a b"}}, "field 'image'"},
      {{{"name", "t"}, {"host", {{"venv", "rel/path"}}}}, "field 'host.venv'"},
      {{{"name", "t"}, {"host", {{"conda", 3}}}}, "field 'host.conda'"},
      {{{"name", "t"}, {"host", {{"venv", "/a"}, {"conda", "/b"}}}}, "field 'host'"},
      {{{"name", "t"}, {"host", {{"pip", "/a"}}}}, "field 'host.pip'"},
      {{{"name", "t"}, {"host", {{"tools", {"ruby"}}}}}, "field 'host.tools[0]': 'ruby' is not"},
      {{{"name", "t"}, {"host", {{"tools", {"python3", "python3"}}}}},
       "field 'host.tools[1]': 'python3' is listed twice"},
      {{{"name", "t"}, {"host", {{"venv", "/a"}, {"tools", {"python3"}}}}},
       "field 'host.tools': is for the plain host"},
      {{{"name", "t"}, {"host", {{"install", "apt install x"}}}},
       "field 'host': must have 'venv', 'conda' or 'tools'"},
      {{{"name", "t"}, {"command", nlohmann::json::array()}}, "field 'command'"},
      {{{"name", "t"}, {"ports", {80, 70000}}}, "field 'ports[1]'"},
      {{{"name", "t"}, {"ports", {80, 80}}}, "field 'ports[1]': 80 is repeated"},
      {{{"name", "t"}, {"gpus", {{"min", -1}}}}, "field 'gpus.min'"},
      {{{"name", "t"}, {"gpus", {{"cuda", "twelve"}}}}, "field 'gpus.cuda'"},
      {{{"name", "t"}, {"env", {{"1X", "a"}}}}, "field 'env.1X'"},
      {{{"name", "t"}, {"env", {{"CORRAL_NODE_NAME", "a"}}}}, "field 'env.CORRAL_NODE_NAME'"},
      {{{"name", "t"}, {"env", {{"CUDA_VISIBLE_DEVICES", "0"}}}},
       "field 'env.CUDA_VISIBLE_DEVICES'"},
      {{{"name", "t"}, {"host", {{"venv", "/opt/a:/tmp/evil"}}}}, "field 'host.venv'"},
      {{{"name", "t"}, {"host", {{"venv", "/opt/../etc"}}}}, "field 'host.venv'"},
      {{{"name", "t"}, {"host", {{"conda", "/opt/./x"}}}}, "field 'host.conda'"},
      {{{"name", "t"}, {"host", {{"venv", "/opt/a\nb"}}}}, "field 'host.venv'"},
      {{{"name", "t"}, {"image", "--privileged"}}, "field 'image'"},
      {{{"name", "t"}, {"image", "ubuntu;rm"}}, "field 'image'"},
      {{{"name", "t"}, {"image", std::string(600, 'a')}}, "field 'image'"},
      {{{"name", "t"}, {"image", "busybox"}, {"env", {{"A", "x\ny"}}}}, "field 'env.A'"},
  };
  for (const auto& [json, field] : cases) {
    auto spec = ParseEnvironmentSpec(json);
    ASSERT_FALSE(spec.ok()) << json.dump();
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(spec.status().message(), HasSubstr(field)) << json.dump();
  }
}

// The shipped built-ins (envs/ at the repository root) all parse, with unique names.
TEST(EnvironmentDirTest, BuiltinsParse) {
  auto specs = LoadEnvironmentDir(CORRAL_SOURCE_DIR "/envs");
  ASSERT_TRUE(specs.ok()) << specs.status().ToString();
  std::set<std::string> names;
  for (const auto& s : *specs) names.insert(s.name);
  EXPECT_EQ(names, (std::set<std::string>{"cuda-base", "pytorch", "pytorch-deepspeed", "tensorflow",
                                          "jax", "hf-transformers", "vllm", "rapids", "jupyter",
                                          "mpi-horovod", "host", "python"}));
  // jupyter runs as a session: it serves where corral says, its token from the environment
  // (JUPYTER_TOKEN), never on its command line.
  for (const auto& s : *specs) {
    if (s.name != "jupyter") continue;
    ASSERT_EQ(s.command.size(), 3u);
    EXPECT_EQ(s.command[0], "sh");
    for (const char* part :
         {"--port=\"$CORRAL_SESSION_PORT\"", "--ServerApp.base_url=\"$CORRAL_SESSION_URL_PREFIX\"",
          "export JUPYTER_TOKEN=\"$CORRAL_SESSION_TOKEN\";", "exec jupyter lab",
          "exec jupyter notebook", "--NotebookApp.base_url=\"$CORRAL_SESSION_URL_PREFIX\"",
          "install jupyter-notebook (Debian) or jupyterlab"}) {
      EXPECT_THAT(s.command[2], HasSubstr(part));
    }
    EXPECT_EQ(s.command[2].find("token=\"$CORRAL"), std::string::npos) << s.command[2];
    EXPECT_EQ(s.tools, (std::vector<std::string>{"jupyter-lab", "jupyter-notebook"}));
  }
}

TEST(EnvironmentDirTest, ErrorsNameTheFile) {
  auto missing = LoadEnvironmentDir("/nonexistent/envs");
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/envs"));
}

}  // namespace
}  // namespace corral::server
