#include "common/shutdown_signal.h"

#include <pthread.h>
#include <signal.h>

#include <thread>

namespace corral {

namespace {

sigset_t ShutdownSignals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

void BlockShutdownSignals() {
  sigset_t set = ShutdownSignals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

void WaitForShutdownSignal() {
  sigset_t set = ShutdownSignals();
  int signal = 0;
  sigwait(&set, &signal);
}

void StopOnShutdownSignal(std::atomic<bool>& stop) {
  std::thread([&stop] {
    WaitForShutdownSignal();
    stop = true;
  }).detach();
}

}  // namespace corral
