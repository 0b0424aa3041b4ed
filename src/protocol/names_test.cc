// The rule of each kind of name (names.h): what it accepts, what it refuses, and what its error
// says.
#include "protocol/names.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace corral::protocol {
namespace {

using ::testing::HasSubstr;

constexpr NameKind kAllKinds[] = {NameKind::kUser,       NameKind::kUnixUser, NameKind::kProject,
                                  NameKind::kToken,      NameKind::kJob,      NameKind::kNode,
                                  NameKind::kEnvironment};

// What no kind accepts: the attacks of issue 15 (NUL, tab, "../", control characters, 100,000
// bytes) and the other ways a name could mislead a path, an argv or a terminal.
std::vector<std::string> RefusedByEveryKind() {
  using namespace std::string_literals;  // "\0"s keeps the NUL
  return {"ali\0ce"s,
          "root\0"s,
          "a\tb",
          "../x",
          "../x\x01y",
          "a/b",
          "/",
          "..",
          ".hidden",
          "-rf",
          "--help",
          "a b",
          "a\nb",
          "a\rb",
          "a\x1b[31mb",
          "a\x7f",
          "caf\xc3\xa9",
          "a\xe2\x80\xae"
          "b",              // U+202E, right-to-left override
          "a\xc2\x85",      // U+0085, next line (a C1 control)
          "a\xe2\x80\xa8",  // U+2028, line separator
          "\xff\xfe",
          "a;b",
          "a$(id)",
          "a`id`",
          "a\\b",
          "a'b",
          "a\"b",
          "a*",
          "a?",
          "a%2fb",
          "a#b",
          "a|b",
          "a&b",
          "a<b",
          "a>b",
          std::string(100'000, 'a')};
}

TEST(NamesTest, EveryKindRefusesTheAttacks) {
  for (NameKind kind : kAllKinds) {
    for (const std::string& name : RefusedByEveryKind()) {
      EXPECT_FALSE(IsValidName(kind, name)) << static_cast<int>(kind) << " " << name.size();
      const Status s = CheckName(kind, name);
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      // The error shows the name escaped: no control character, nothing beyond ASCII.
      for (char c : s.message()) {
        const auto byte = static_cast<unsigned char>(c);
        EXPECT_TRUE(byte >= 0x20 && byte < 0x7f) << s.message();
      }
    }
  }
}

TEST(NamesTest, UserNamesAreUnixAccountNames) {
  for (const char* name : {"alice", "admin", "root", "a.smith", "bob-2", "_svc", "x",
                           "corral-nobody-here", "abcdefghijklmnopqrstuvwxyz012345"}) {
    EXPECT_TRUE(IsValidName(NameKind::kUser, name)) << name;
    // Every user name is a Unix user name: a --task-user-map can name any of them.
    EXPECT_TRUE(IsValidName(NameKind::kUnixUser, name)) << name;
  }
  for (const char* name : {"", "Alice", "9lives", ".x", "-x", "a@b", "a:b", "a+b", "a=b",
                           "abcdefghijklmnopqrstuvwxyz0123456"}) {  // 33 bytes
    EXPECT_FALSE(IsValidName(NameKind::kUser, name)) << name;
  }
}

TEST(NamesTest, UnixUserNamesArePosixPortableNames) {
  for (const char* name : {"nobody", "a.smith", "John.Doe", "_apt", "svc_build-1", "x9"}) {
    EXPECT_TRUE(IsValidName(NameKind::kUnixUser, name)) << name;
  }
  for (const char* name : {"", "-x", ".x", "9lives", "1000", "a@b", "DOMAIN\\user", "a:b",
                           "abcdefghijklmnopqrstuvwxyz0123456"}) {
    EXPECT_FALSE(IsValidName(NameKind::kUnixUser, name)) << name;
  }
}

TEST(NamesTest, ProjectAndTokenNames) {
  for (NameKind kind : {NameKind::kProject, NameKind::kToken}) {
    for (const std::string& name :
         std::vector<std::string>{"default", "vision", "ML-Team", "nlp.2024", "a_b", "9",
                                  "admin-bootstrap", "initial", std::string(63, 'p')}) {
      EXPECT_TRUE(IsValidName(kind, name)) << name;
    }
    for (const std::string& name :
         std::vector<std::string>{"", "_x", ".x", "-x", "a:b", "a@b", std::string(64, 'p')}) {
      EXPECT_FALSE(IsValidName(kind, name)) << name;
    }
  }
}

TEST(NamesTest, JobNamesAreLabelsWithSweepPunctuationOrEmptyForNone) {
  for (const std::string& name :
       std::vector<std::string>{"", "train", "Train_ResNet50", "ddp-torchrun", "lr=0.1,bs=64",
                                "v1.2+cuda12", "step:3", "_x", std::string(128, 'j')}) {
    EXPECT_TRUE(IsValidName(NameKind::kJob, name)) << name;
  }
  for (const std::string& name :
       std::vector<std::string>{".x", "-x", "+x", "=x", "a b", "a@b", std::string(129, 'j')}) {
    EXPECT_FALSE(IsValidName(NameKind::kJob, name)) << name;
  }
}

TEST(NamesTest, NodeNamesAreHostnamesAndPathTricksAreNot) {
  for (const std::string& name : std::vector<std::string>{"n1", "gpu-a.rack2.example.org", "Node_7",
                                                          "dev", std::string(253, 'n')}) {
    EXPECT_TRUE(IsValidName(NameKind::kNode, name)) << name;
  }
  // Agents use the name as a path component and in cgroup and container names.
  for (const std::string& name :
       std::vector<std::string>{"", ".", "..", "_n", "a:b", std::string(254, 'n')}) {
    EXPECT_FALSE(IsValidName(NameKind::kNode, name)) << name;
  }
}

TEST(NamesTest, EnvironmentNamesAreLowercaseLettersDigitsAndDashes) {
  for (const std::string& name :
       std::vector<std::string>{"pytorch", "cuda-12", "9", std::string(63, 'e')}) {
    EXPECT_TRUE(IsValidName(NameKind::kEnvironment, name)) << name;
  }
  for (const std::string& name :
       std::vector<std::string>{"", "PyTorch", "a_b", "a.b", std::string(64, 'e')}) {
    EXPECT_FALSE(IsValidName(NameKind::kEnvironment, name)) << name;
  }
}

TEST(NamesTest, TheErrorStatesTheRuleAndShowsTheNameEscaped) {
  using namespace std::string_literals;
  EXPECT_EQ(CheckName(NameKind::kUser, "ali\0ce"s).message(),
            "a user name must be 1 to 32 lowercase letters, digits, '_', '.' or '-', starting "
            "with a letter or '_'; got 'ali\\x00ce'");
  EXPECT_EQ(CheckName(NameKind::kProject, "../x\x01y").message(),
            "a project name must be 1 to 63 letters, digits, '_', '.' or '-', starting with a "
            "letter or digit; got '../x\\x01y'");
  // A long name: its first 64 bytes and its length.
  const std::string long_error = CheckName(NameKind::kJob, std::string(100'000, 'j')).message();
  EXPECT_THAT(long_error, HasSubstr("'" + std::string(64, 'j') + "...' (100000 bytes)"));
  EXPECT_LT(long_error.size(), 300u);
  EXPECT_THAT(CheckName(NameKind::kNode, "a\\b").message(), HasSubstr("got 'a\\x5cb'"));
  EXPECT_THAT(CheckName(NameKind::kEnvironment, "../jobs").message(),
              HasSubstr("must be 1 to 63 lowercase letters"));
  EXPECT_TRUE(CheckName(NameKind::kToken, "laptop").ok());
}

}  // namespace
}  // namespace corral::protocol
