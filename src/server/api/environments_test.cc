// The environments routes (environments.cc) through real HTTP: list, view, create, clone and
// share, and who may see what.
#include <algorithm>

#include "server/api/api_test_fixture.h"
#include "server/control/environment.h"

namespace corral::server::api_testing {

class EnvironmentsApiTest : public ApiTest {
 protected:
  void SetUp() override {
    ApiTest::SetUp();
    auto builtin = ParseEnvironmentSpec({{"name", "cuda-base"}, {"image", "ubuntu:24.04"}});
    ASSERT_TRUE(builtin.ok()) << builtin.status().ToString();
    ASSERT_TRUE(controller().Environments().LoadBuiltins({*builtin}).ok());
  }
  static json TorchSpec(const std::string& image = "pytorch/pytorch:2.3.0") {
    return {{"name", "torch"}, {"image", image}};
  }
  // The names GET /api/v1/environments lists for the owner of `token`.
  std::vector<std::string> Listed(const std::string& token) {
    const Answer a = Get("/api/v1/environments", token);
    EXPECT_EQ(a.status, 200) << a;
    std::vector<std::string> names;
    if (!a.body.is_object()) return names;
    for (const json& e : a.body["environments"]) names.push_back(e["name"]);
    std::sort(names.begin(), names.end());
    return names;
  }
};

TEST_F(EnvironmentsApiTest, CreateMakesVersionsOfTheCallersOwn) {
  const Answer first = Post("/api/v1/environments", TorchSpec(), alice_token_);
  ASSERT_EQ(first.status, 201) << first;
  EXPECT_EQ(first.body["name"], "torch");
  EXPECT_EQ(first.body["version"], 1);
  EXPECT_EQ(first.body["owner"], "alice");
  EXPECT_EQ(first.body["builtin"], false);
  EXPECT_EQ(first.body["spec"]["image"], "pytorch/pytorch:2.3.0");
  const Answer second =
      Post("/api/v1/environments", TorchSpec("pytorch/pytorch:2.4.0"), alice_token_);
  ASSERT_EQ(second.status, 201) << second;
  EXPECT_EQ(second.body["version"], 2);

  EXPECT_EQ(Get("/api/v1/environments/torch", alice_token_).body["version"], 2);
  const Answer v1 = Get("/api/v1/environments/torch?version=1", alice_token_);
  ASSERT_EQ(v1.status, 200) << v1;
  EXPECT_EQ(v1.body["spec"]["image"], "pytorch/pytorch:2.3.0");
  ExpectProblem(Get("/api/v1/environments/torch?version=3", alice_token_), 404);
  ExpectProblem(Get("/api/v1/environments/torch?version=0", alice_token_), 400, "version");

  // The name is alice's, and the built-in's is everyone's.
  ExpectProblem(Post("/api/v1/environments", TorchSpec(), bob_token_), 409, "torch");
  ExpectProblem(Post("/api/v1/environments", {{"name", "cuda-base"}}, alice_token_), 409,
                "cuda-base");
}

TEST_F(EnvironmentsApiTest, AnEnvironmentIsItsOwnersUntilShared) {
  ASSERT_EQ(Post("/api/v1/environments", TorchSpec(), alice_token_).status, 201);
  EXPECT_EQ(Listed(alice_token_), (std::vector<std::string>{"cuda-base", "torch"}));
  EXPECT_EQ(Listed(bob_token_), std::vector<std::string>{"cuda-base"});
  EXPECT_EQ(Listed(root_token_), (std::vector<std::string>{"cuda-base", "torch"}));
  ExpectProblem(Get("/api/v1/environments/torch", bob_token_), 404, "torch");
  ExpectProblem(Post("/api/v1/environments/torch/clone", {{"name", "mine"}}, bob_token_), 404);
  ExpectProblem(Post("/api/v1/environments/torch/share", {{"project", "default"}}, bob_token_),
                404);
  ExpectProblem(Get("/api/v1/environments", ""), 401);
  ExpectProblem(Post("/api/v1/environments", TorchSpec(), ""), 401);

  const Answer shared =
      Post("/api/v1/environments/torch/share", {{"project", "default"}}, alice_token_);
  ASSERT_EQ(shared.status, 200) << shared;
  EXPECT_EQ(shared.body["projects"], json({"default"}));
  EXPECT_EQ(Listed(bob_token_), (std::vector<std::string>{"cuda-base", "torch"}));
  EXPECT_EQ(Get("/api/v1/environments/torch", bob_token_).status, 200);
  // bob may use it, not share it on.
  ExpectProblem(Post("/api/v1/environments/torch/share", {{"project", "default"}}, bob_token_), 403,
                "alice");
}

TEST_F(EnvironmentsApiTest, SharingIsChecked) {
  ASSERT_EQ(Post("/api/v1/environments", TorchSpec(), bob_token_).status, 201);
  ExpectProblem(Post("/api/v1/environments/torch/share", {{"project", "vision"}}, bob_token_), 403,
                "vision");
  ExpectProblem(Post("/api/v1/environments/torch/share", json::object(), bob_token_), 400,
                "field 'project'");
  ExpectProblem(Post("/api/v1/environments/cuda-base/share", {{"project", "default"}}, root_token_),
                409, "built-in");
  ExpectProblem(Post("/api/v1/environments/nope/share", {{"project", "default"}}, root_token_), 404,
                "nope");
  // An admin may share anyone's, with a project that exists.
  ExpectProblem(Post("/api/v1/environments/torch/share", {{"project", "nope"}}, root_token_), 404,
                "nope");
  EXPECT_EQ(Get("/api/v1/environments/torch", root_token_).body["projects"], json::array());
  EXPECT_EQ(Post("/api/v1/environments/torch/share", {{"project", "vision"}}, root_token_).status,
            200);
  EXPECT_EQ(Get("/api/v1/environments/torch", alice_token_).status, 200);
}

TEST_F(EnvironmentsApiTest, BadSpecsNameTheField) {
  ExpectProblem(Post("/api/v1/environments", {{"name", "Torch"}}, alice_token_), 400,
                "field 'name'");
  ExpectProblem(Post("/api/v1/environments", json::object(), alice_token_), 400, "field 'name'");
  ExpectProblem(Post("/api/v1/environments", {{"name", "t"}, {"colour", "red"}}, alice_token_), 400,
                "field 'colour'");
  ExpectProblem(Post("/api/v1/environments", {{"name", "t"}, {"ports", {80, 70000}}}, alice_token_),
                400, "field 'ports[1]'");
  ExpectProblem(PostText("/api/v1/environments", "nope", alice_token_), 400, "request body");
  ExpectProblem(Get("/api/v1/environments/none", alice_token_), 404, "none");
  EXPECT_EQ(Listed(root_token_), std::vector<std::string>{"cuda-base"});
}

TEST_F(EnvironmentsApiTest, CloneCopiesWithChanges) {
  const Answer clone = Post("/api/v1/environments/cuda-base/clone",
                            {{"name", "my-cuda"}, {"set", {{"env", {{"FOO", "1"}}}}}}, bob_token_);
  ASSERT_EQ(clone.status, 201) << clone;
  EXPECT_EQ(clone.body["name"], "my-cuda");
  EXPECT_EQ(clone.body["owner"], "bob");
  EXPECT_EQ(clone.body["spec"]["image"], "ubuntu:24.04");
  EXPECT_EQ(clone.body["spec"]["env"]["FOO"], "1");
  ExpectProblem(Post("/api/v1/environments/cuda-base/clone", json::object(), bob_token_), 400,
                "field 'name'");
  ExpectProblem(Post("/api/v1/environments/cuda-base/clone",
                     {{"name", "x"}, {"set", {{"name", "y"}}}}, bob_token_),
                400, "set.name");
  ExpectProblem(Post("/api/v1/environments/cuda-base/clone",
                     {{"name", "x"}, {"set", {{"ports", "80"}}}}, bob_token_),
                400, "ports");
  ExpectProblem(Post("/api/v1/environments/none/clone", {{"name", "x"}}, bob_token_), 404);
  // The new name follows the rule, whatever its length: no NUL, no 64 KiB message instead.
  for (const std::string& name :
       {std::string("../x"), std::string("m\0y", 3), std::string(100'000, 'm')}) {
    ExpectProblem(Post("/api/v1/environments/cuda-base/clone", {{"name", name}}, bob_token_), 400,
                  "field 'name': an environment name must be 1 to 63 lowercase letters");
  }
}

}  // namespace corral::server::api_testing
