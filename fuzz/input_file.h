// For fuzz targets whose code under test reads and writes files by path (the simulator's trace
// readers and writers): a file of the process's own, holding the current input or an output.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

namespace corral::fuzz {

// A file in the temporary directory ($TMPDIR, else /tmp) named after the process, ending in
// `suffix` (".csv", ".jsonl": a reader that tells formats by extension sees it). Removed when
// the InputFile is destroyed (a static one: when the fuzzer exits normally).
class InputFile {
 public:
  explicit InputFile(const std::string& suffix)
      : path_((std::filesystem::temp_directory_path() /
               ("corral-fuzz-" + std::to_string(::getpid()) + suffix))
                  .string()) {}
  ~InputFile() { std::filesystem::remove(path_); }
  InputFile(const InputFile&) = delete;
  InputFile& operator=(const InputFile&) = delete;

  // Replaces the file's content with `size` bytes at `data`; aborts when it cannot (a fuzzer
  // that reads stale inputs would report nonsense).
  const std::string& Write(const uint8_t* data, size_t size) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.close();
    if (!out) std::abort();
    return path_;
  }
  const std::string& path() const { return path_; }
  // The file's content ("" when it cannot be read).
  std::string Read() const {
    std::ifstream in(path_, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

 private:
  std::string path_;
};

}  // namespace corral::fuzz
