#include "server/http/web_assets.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

namespace corral::server {
namespace {

namespace fs = std::filesystem;

void WriteFile(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// A built dashboard in a temporary directory, next to a secret that must never be served:
//   DIR/dist/index.html, DIR/dist/assets/app-1234.js, DIR/dist/assets/alias.js -> app-1234.js,
//   DIR/dist/assets/leak.txt -> ../../secret.txt, DIR/dist/assets/out -> DIR (a directory),
//   DIR/dist/.hidden, DIR/secret.txt
class WebAssetsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-web-assets-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    WriteFile(dir_ / "dist/index.html", "<!doctype html><title>corral</title>");
    WriteFile(dir_ / "dist/assets/app-1234.js", "console.log(1);");
    WriteFile(dir_ / "dist/assets/app-1234.css", "body{}");
    WriteFile(dir_ / "dist/.hidden", "hidden");
    WriteFile(dir_ / "secret.txt", "SECRET");
    fs::create_symlink("app-1234.js", dir_ / "dist/assets/alias.js");
    fs::create_symlink("../../secret.txt", dir_ / "dist/assets/leak.txt");
    fs::create_directory_symlink(dir_, dir_ / "dist/assets/out");
    auto assets = WebAssets::Create((dir_ / "dist").string());
    ASSERT_TRUE(assets.ok()) << assets.status().message();
    assets_.emplace(std::move(assets).value());
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The body served for `path`, or "<refused>".
  std::string Get(std::string_view path) {
    auto asset = assets_->Lookup(path);
    return asset.ok() ? asset->body : "<refused>";
  }

  fs::path dir_;
  std::optional<WebAssets> assets_;
};

TEST_F(WebAssetsTest, ServesIndexAndAssetsWithTypesAndCachePolicy) {
  auto index = assets_->Lookup("/");
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index->body, "<!doctype html><title>corral</title>");
  EXPECT_EQ(index->content_type, "text/html; charset=utf-8");
  EXPECT_EQ(index->cache_control, "no-cache");
  EXPECT_EQ(assets_->Lookup("/index.html")->body, index->body);

  auto js = assets_->Lookup("/assets/app-1234.js");
  ASSERT_TRUE(js.ok());
  EXPECT_EQ(js->body, "console.log(1);");
  EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
  EXPECT_EQ(js->cache_control, "public, max-age=31536000, immutable");
  EXPECT_EQ(assets_->Lookup("/assets/app-1234.css")->content_type, "text/css; charset=utf-8");
  // A link that stays inside the root is followed.
  EXPECT_EQ(Get("/assets/alias.js"), "console.log(1);");
}

TEST_F(WebAssetsTest, RefusesEverythingOutsideTheRoot) {
  const std::string secret = (dir_ / "secret.txt").string();
  for (std::string_view path :
       {"/../secret.txt", "/assets/../../secret.txt", "/assets/..", "/..", "/./index.html",
        "/assets/./app-1234.js",
        "//etc/passwd",  // an absolute path after the first slash
        "/assets//app-1234.js", "/.hidden", "/assets\\..\\..\\secret.txt", "",
        "index.html",              // not a path
        "/assets/leak.txt",        // a symlink out of the root
        "/assets/out/secret.txt",  // through a directory symlink out of the root
        "/assets", "/assets/",     // a directory, not a file
        "/missing.js"}) {
    EXPECT_EQ(Get(path), "<refused>") << "path " << path;
  }
  EXPECT_EQ(Get("/" + secret), "<refused>");  // "//tmp/...": an absolute path
  EXPECT_EQ(Get(secret), "<refused>");        // "/tmp/.../secret.txt" under the root: none
  EXPECT_EQ(Get(std::string("/index.html\0/../../secret.txt", 29)), "<refused>");
}

TEST_F(WebAssetsTest, CreateNeedsABuiltDashboard) {
  EXPECT_FALSE(WebAssets::Create((dir_ / "missing").string()).ok());
  EXPECT_FALSE(WebAssets::Create(dir_.string()).ok());  // a directory without index.html
  EXPECT_FALSE(WebAssets::Create((dir_ / "secret.txt").string()).ok());
}

TEST(WebAssetsContentType, ByExtension) {
  EXPECT_EQ(ContentTypeOf("a.html"), "text/html; charset=utf-8");
  EXPECT_EQ(ContentTypeOf("a.svg"), "image/svg+xml");
  EXPECT_EQ(ContentTypeOf("a.json"), "application/json");
  EXPECT_EQ(ContentTypeOf("a.js.map"), "application/json");
  EXPECT_EQ(ContentTypeOf("js"), "application/octet-stream");
  EXPECT_EQ(ContentTypeOf("a.exe"), "application/octet-stream");
}

// Sends `target` verbatim (no client-side normalisation) and returns the status line.
std::string RawGet(int port, const std::string& target) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(fd);
    return "connect failed";
  }
  const std::string request =
      "GET " + target + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  (void)!write(fd, request.data(), request.size());
  std::string answer;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;) answer.append(buf, static_cast<size_t>(n));
  close(fd);
  return answer;
}

// What the server does with it: httplib decodes the path (%2e%2e is ".."), then Lookup.
TEST_F(WebAssetsTest, EncodedTraversalThroughARealServerIsRefused) {
  httplib::Server http;
  http.Get(R"(/.*)", [this](const httplib::Request& req, httplib::Response& res) {
    auto asset = assets_->Lookup(req.path);
    if (!asset.ok()) {
      res.status = 404;
      return;
    }
    res.set_content(asset->body, asset->content_type);
  });
  const int port = http.bind_to_any_port("127.0.0.1");
  ASSERT_GT(port, 0);
  std::thread serve([&] { http.listen_after_bind(); });
  while (!http.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(5));

  EXPECT_NE(RawGet(port, "/assets/app-1234.js").find("console.log(1);"), std::string::npos);
  EXPECT_NE(RawGet(port, "/assets/app%2d1234.js").find("console.log(1);"), std::string::npos);
  const std::vector<std::string> targets = {"/assets/%2e%2e/%2e%2e/secret.txt",
                                            "/assets/%2E%2E%2F%2E%2E%2Fsecret.txt",
                                            "/..%2fsecret.txt",
                                            "/%2e%2e/secret.txt",
                                            "/assets/..%5c..%5csecret.txt",
                                            "/%2f" + (dir_ / "secret.txt").string(),
                                            "/assets/leak.txt",
                                            "/index.html%00/../../secret.txt"};
  for (const std::string& target : targets) {
    const std::string answer = RawGet(port, target);
    EXPECT_EQ(answer.find("SECRET"), std::string::npos) << target << ":\n" << answer;
    EXPECT_NE(answer.find(" 404 "), std::string::npos) << target << ":\n" << answer;
  }
  http.stop();
  serve.join();
}

}  // namespace
}  // namespace corral::server
