#include "server/shutdown_signals.h"

#include <pthread.h>
#include <signal.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace kiln::server {
namespace {

sigset_t ShutdownSignalSet() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

}  // namespace

absl::Status BlockShutdownSignals() {
  sigset_t set = ShutdownSignalSet();
  if (int error = pthread_sigmask(SIG_BLOCK, &set, nullptr); error != 0) {
    return absl::InternalError(
        absl::StrCat("pthread_sigmask: ", std::strerror(error)));
  }
  return absl::OkStatus();
}

int WaitForShutdownSignal() {
  sigset_t set = ShutdownSignalSet();
  int signal_number = 0;
  // sigwait fails only for an invalid set; retry defensively anyway.
  while (sigwait(&set, &signal_number) != 0) {
  }
  return signal_number;
}

}  // namespace kiln::server
