// Fuzzes the simulator's reader of corral's own JSON Lines traces (sim/trace.h, ReadJsonl:
// `corral sim replay|predict --trace FILE.jsonl`), and the round trip its header promises.
//
// What must hold, for any input: no crash, no uncaught exception, no leak, no ASan or UBSan
// report, and bounded time; and for a trace it accepts, WriteJsonl writes it, ReadJsonl reads
// that back, and writing it again gives the same text.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "input_file.h"
#include "sim/trace.h"

namespace {

void Check(bool holds) {
  if (!holds) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static corral::fuzz::InputFile input(".jsonl"), written(".out.jsonl"), rewritten(".out2.jsonl");
  auto trace = corral::sim::ReadJsonl(input.Write(data, size));
  if (!trace.ok()) return 0;
  Check(corral::sim::WriteJsonl(*trace, written.path()).ok());
  auto again = corral::sim::ReadJsonl(written.path());
  Check(again.ok());
  Check(corral::sim::WriteJsonl(*again, rewritten.path()).ok());
  Check(written.Read() == rewritten.Read());
  return 0;
}
