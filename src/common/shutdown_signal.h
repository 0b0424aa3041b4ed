// Orderly shutdown of the daemons on SIGINT or SIGTERM.
#pragma once

#include <atomic>

namespace corral {

// Blocks SIGINT and SIGTERM in the calling thread and every thread it creates afterwards. Call
// first thing in a daemon's main, before starting threads.
void BlockShutdownSignals();
// Waits for SIGINT or SIGTERM (blocked with BlockShutdownSignals), then returns.
void WaitForShutdownSignal();
// Starts a thread that sets `stop` on SIGINT or SIGTERM (blocked with BlockShutdownSignals).
void StopOnShutdownSignal(std::atomic<bool>& stop);

}  // namespace corral
