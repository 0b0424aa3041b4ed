// Fuzzes the simulator's reader of node lists in JSON Lines (sim/trace.h, ReadNodesJsonl:
// `corral sim fill|replay --nodes FILE.jsonl`), and the round trip through WriteNodesJsonl.
//
// What must hold, for any input: no crash, no uncaught exception, no leak, no ASan or UBSan
// report, and bounded time; and for nodes it accepts, WriteNodesJsonl writes them (one GPU
// memory size per node, as the format has), ReadNodesJsonl reads that back, and writing them
// again gives the same text.
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
  auto nodes = corral::sim::ReadNodesJsonl(input.Write(data, size));
  if (!nodes.ok()) return 0;
  Check(corral::sim::WriteNodesJsonl(*nodes, written.path()).ok());
  auto again = corral::sim::ReadNodesJsonl(written.path());
  Check(again.ok());
  Check(corral::sim::WriteNodesJsonl(*again, rewritten.path()).ok());
  Check(written.Read() == rewritten.Read());
  return 0;
}
