#include "server/control/log_sink.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
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

  // The output of job 7's task 0, run 1, as the API reads it: page by page from `offset`.
  std::string ReadAll(const LogSink& sink, int64_t offset = 0) const {
    std::string out;
    for (;;) {
      auto page = sink.Read(JobId(7), 0, 1, "stdout", offset, 1 << 20);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok() || page->data.empty()) return out;
      out += page->data;
      offset = page->next_offset;
    }
  }
  std::string Path() const { return LogSink::PathOf(dir_.string(), JobId(7), 0, 1, "stdout"); }
  // Bytes the file holds on disk.
  int64_t OnDisk() const {
    struct stat st {};
    EXPECT_EQ(::stat(Path().c_str(), &st), 0);
    return static_cast<int64_t>(st.st_blocks) * 512;
  }

  std::filesystem::path dir_;
};

// Numbered lines "line 000123\n" (12 bytes each) from `first`, `count` of them.
std::string Lines(int first, int count) {
  std::string out;
  char line[16];
  for (int i = first; i < first + count; ++i) {
    std::snprintf(line, sizeof line, "line %06d\n", i);
    out += line;
  }
  return out;
}

TEST_F(LogSinkTest, AStreamOverItsCapKeepsItsNewestOutputAndReadsWithANote) {
  constexpr int64_t kCap = LogSink::kMinMaxBytes;  // 64 KiB
  LogSink sink(dir_.string(), kCap);
  sink.Open(41, {JobId(7), 0, 1, "a"});
  // 1 MiB and a bit, in the 64 KiB chunks an agent sends.
  const std::string output = Lines(0, 90000);
  for (size_t at = 0; at < output.size(); at += 65536) {
    sink.Write("a", {Chunk(41, 1, static_cast<int64_t>(at), output.substr(at, 65536))});
  }
  // The disk holds the newest 64 KiB (and less than a block more), the stream's length stays.
  EXPECT_LE(OnDisk(), kCap + 2 * 4096);
  EXPECT_EQ(std::filesystem::file_size(Path()), output.size());
  const std::string read = ReadAll(sink);
  const std::string prefix = "[corral: ";
  ASSERT_EQ(read.substr(0, prefix.size()), prefix) << read.substr(0, 200);
  const size_t note_end = read.find('\n') + 1;
  const int64_t dropped = std::stoll(read.substr(prefix.size()));
  EXPECT_EQ(read.substr(0, note_end), LogSink::DroppedNote(dropped, kCap));
  EXPECT_EQ(read.substr(0, note_end),
            "[corral: " + std::to_string(dropped) +
                " bytes of older output dropped: log over its cap of 64 KiB]\n");
  EXPECT_GT(dropped, 0);
  EXPECT_EQ(dropped % 12, 0) << "the note is followed by whole lines";
  // After the note: exactly the stream from the first whole line kept to the end.
  EXPECT_EQ(read.substr(note_end), output.substr(dropped));
  EXPECT_GE(static_cast<int64_t>(output.size()) - dropped, kCap - 12);
  EXPECT_LE(static_cast<int64_t>(output.size()) - dropped, kCap + 4096);
  // A reader past the dropped part reads on without a note; one that fell into it gets the
  // note and goes on from the oldest output kept.
  EXPECT_EQ(ReadAll(sink, dropped + 12), output.substr(dropped + 12));
  auto behind = sink.Read(JobId(7), 0, 1, "stdout", 100, 1 << 20);
  ASSERT_TRUE(behind.ok());
  EXPECT_EQ(behind->data.substr(0, note_end), read.substr(0, note_end));
  EXPECT_EQ(behind->next_offset, static_cast<int64_t>(output.size()));
  EXPECT_EQ(behind->size, static_cast<int64_t>(output.size()));
}

TEST_F(LogSinkTest, OffsetsStayTheStreamsAcrossADropAndARestart) {
  constexpr int64_t kCap = LogSink::kMinMaxBytes;
  const std::string output = Lines(0, 20000);  // 240,000 bytes
  {
    LogSink sink(dir_.string(), kCap);
    sink.Open(41, {JobId(7), 0, 1, "a"});
    for (size_t at = 0; at < output.size(); at += 40000) {
      sink.Write("a", {Chunk(41, 1, static_cast<int64_t>(at), output.substr(at, 40000))});
    }
  }
  // A restarted server knows nothing but the file.
  LogSink sink(dir_.string(), kCap);
  sink.Open(41, {JobId(7), 0, 1, "a"});
  const std::string before = ReadAll(sink);
  // A chunk sent again lands on the same bytes, one from the dropped part stays dropped, and
  // the next one goes on at its offset.
  sink.Write("a", {Chunk(41, 1, 200000, output.substr(200000, 40000)),
                   Chunk(41, 1, 0, output.substr(0, 40000))});
  EXPECT_EQ(ReadAll(sink), before);
  const std::string more = Lines(20000, 10);
  sink.Write("a", {Chunk(41, 1, static_cast<int64_t>(output.size()), more)});
  const std::string after = ReadAll(sink);
  EXPECT_EQ(after.substr(after.size() - more.size() - 12),
            output.substr(output.size() - 12) + more);
  EXPECT_LE(OnDisk(), kCap + 2 * 4096);
}

TEST_F(LogSinkTest, OutputWithoutLinesIsKeptFromTheFirstBlockKept) {
  LogSink sink(dir_.string(), LogSink::kMinMaxBytes);
  sink.Open(41, {JobId(7), 0, 1, "a"});
  const std::string output(300000, 'x');
  for (size_t at = 0; at < output.size(); at += 65536) {
    sink.Write("a", {Chunk(41, 1, static_cast<int64_t>(at), output.substr(at, 65536))});
  }
  const std::string read = ReadAll(sink);
  const size_t note_end = read.find('\n') + 1;
  const int64_t dropped = std::stoll(read.substr(std::string("[corral: ").size()));
  EXPECT_EQ(dropped % 4096, 0);
  EXPECT_EQ(read.substr(note_end), output.substr(dropped));
}

TEST_F(LogSinkTest, UnderItsCapAStreamIsReadAsWritten) {
  LogSink sink(dir_.string(), LogSink::kMinMaxBytes);
  sink.Open(41, {JobId(7), 0, 1, "a"});
  const std::string output = Lines(0, 5000);  // 60,000 bytes: under 64 KiB
  sink.Write("a", {Chunk(41, 1, 0, output)});
  EXPECT_EQ(ReadAll(sink), output);
  EXPECT_EQ(ReadAll(sink, 12), output.substr(12));
  auto page = sink.Read(JobId(7), 0, 1, "stdout", 0, 100);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(page->data, output.substr(0, 100));
  EXPECT_EQ(page->next_offset, 100);
  auto end = sink.Read(JobId(7), 0, 1, "stdout", 60000, 100);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(end->data, "");
  EXPECT_EQ(end->next_offset, 60000);
  auto none = sink.Read(JobId(7), 0, 2, "stdout", 0, 100);  // a run with no output yet
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->size, 0);
}

TEST_F(LogSinkTest, OnlyTheNodeOfAnOpenOrRecentlyClosedRunWritesItsOutput) {
  LogSink sink(dir_.string(), LogSink::kDefaultMaxBytes);
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
  LogSink sink(dir_.string(), LogSink::kDefaultMaxBytes);
  sink.Open(41, {JobId(7), 0, 1, "a"});
  sink.Write("a", {Chunk(41, 1, 0, "abc"), Chunk(41, 1, 0, "abc"), Chunk(41, 1, 3, "def")});
  sink.Write("a", {Chunk(41, 1, 1 << 30, "far past the end")});
  EXPECT_EQ(Output(1), "abcdef");
  EXPECT_EQ(std::filesystem::file_size(LogSink::PathOf(dir_.string(), JobId(7), 0, 1, "stdout")),
            6u);
}

TEST_F(LogSinkTest, OnlyTheNewestClosedRunsStayWritable) {
  LogSink sink(dir_.string(), LogSink::kDefaultMaxBytes);
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
  LogSink sink("", LogSink::kDefaultMaxBytes);
  sink.Open(41, {JobId(7), 0, 1, "a"});
  sink.Write("a", {Chunk(41, 1, 0, "dropped\n")});
  EXPECT_FALSE(std::filesystem::exists(dir_));
}

}  // namespace
}  // namespace corral::server
