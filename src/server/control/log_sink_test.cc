#include "server/control/log_sink.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

namespace corral::server {
namespace {

protocol::LogChunk Chunk(int64_t allocation, int64_t generation, int64_t offset,
                         const std::string& data) {
  protocol::LogChunk chunk;
  chunk.key = {protocol::AllocationId(allocation), generation};
  chunk.stream = protocol::LogStream::kStdout;
  chunk.offset = offset;
  chunk.data = data;
  return chunk;
}

class LogSinkTest : public ::testing::Test {
 protected:
  LogSinkTest()
      : dir_(std::filesystem::temp_directory_path() /
             ("corral-log-sink-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(dir_);
  }
  ~LogSinkTest() override { std::filesystem::remove_all(dir_); }

  // The stdout of task 0 of job 7, run `generation`; "" when there is no file.
  std::string Output(int64_t generation) const {
    std::ifstream in(LogSink::PathOf(dir_.string(), JobId(7), 0, generation, "stdout"));
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

  std::filesystem::path dir_;
};

TEST_F(LogSinkTest, OnlyTheNodeOfAnOpenOrRecentlyClosedRunWritesItsOutput) {
  LogSink sink(dir_.string());
  sink.Open(41, {JobId(7), 0, 1, "a"});
  sink.Write("a", {Chunk(41, 1, 0, "hello "), Chunk(41, 1, 6, "world\n")});
  EXPECT_EQ(Output(1), "hello world\n");
  sink.Write("b", {Chunk(41, 1, 12, "not b's\n")});  // another node's task
  sink.Write("a", {Chunk(41, 2, 0, "no such run\n")});
  sink.Write("a", {Chunk(99, 1, 0, "no such allocation\n")});
  EXPECT_EQ(Output(1), "hello world\n");
  EXPECT_EQ(Output(2), "");
  // Ended: its last lines may come after its end.
  sink.Close(41);
  sink.Write("a", {Chunk(41, 1, 12, "last\n")});
  EXPECT_EQ(Output(1), "hello world\nlast\n");
}

TEST_F(LogSinkTest, AChunkSentTwiceLandsOnTheSameBytesAndNoneLeavesAHole) {
  LogSink sink(dir_.string());
  sink.Open(41, {JobId(7), 0, 1, "a"});
  sink.Write("a", {Chunk(41, 1, 0, "abc"), Chunk(41, 1, 0, "abc"), Chunk(41, 1, 3, "def")});
  sink.Write("a", {Chunk(41, 1, 1 << 30, "far past the end")});
  EXPECT_EQ(Output(1), "abcdef");
  EXPECT_EQ(std::filesystem::file_size(LogSink::PathOf(dir_.string(), JobId(7), 0, 1, "stdout")),
            6u);
}

TEST_F(LogSinkTest, OnlyTheNewestClosedRunsStayWritable) {
  LogSink sink(dir_.string());
  for (int64_t a = 1; a <= static_cast<int64_t>(LogSink::kRecentlyClosed) + 1; ++a) {
    sink.Open(a, {JobId(7), 0, a, "a"});
    sink.Close(a);
  }
  sink.Write("a", {Chunk(1, 1, 0, "too late\n")});  // the oldest was dropped
  sink.Write("a", {Chunk(2, 2, 0, "in time\n")});
  EXPECT_EQ(Output(1), "");
  EXPECT_EQ(Output(2), "in time\n");
}

TEST_F(LogSinkTest, WithoutAFolderOutputIsDropped) {
  LogSink sink("");
  sink.Open(41, {JobId(7), 0, 1, "a"});
  sink.Write("a", {Chunk(41, 1, 0, "dropped\n")});
  EXPECT_FALSE(std::filesystem::exists(dir_));
}

}  // namespace
}  // namespace corral::server
