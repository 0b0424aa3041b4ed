// Fuzzes the simulator's reader of Alibaba openb node lists (sim/trace.h, ReadOpenbNodes:
// `corral sim fill --nodes nodes.csv`), keeping CPU-only nodes and not, through sim/csv.h's CSV
// reader.
//
// What must hold, for any input: no crash, no uncaught exception, no leak, no ASan or UBSan
// report, and bounded time.
#include <cstddef>
#include <cstdint>

#include "input_file.h"
#include "sim/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static corral::fuzz::InputFile input(".csv");
  const std::string& path = input.Write(data, size);
  (void)corral::sim::ReadOpenbNodes(path, /*gpu_nodes_only=*/true);
  (void)corral::sim::ReadOpenbNodes(path, /*gpu_nodes_only=*/false);
  return 0;
}
