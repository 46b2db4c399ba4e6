// Graceful shutdown on SIGINT and SIGTERM: the signals are blocked in every
// thread and received synchronously by one waiting thread (sigwait), so no
// work happens in a signal handler.
#ifndef KILN_SERVER_SHUTDOWN_SIGNALS_H_
#define KILN_SERVER_SHUTDOWN_SIGNALS_H_

#include "absl/status/status.h"

namespace kiln::server {

// Blocks SIGINT and SIGTERM in the calling thread. Call it first in main(),
// before any thread exists: threads inherit the mask, so the signals then
// wait for WaitForShutdownSignal() instead of killing the process.
absl::Status BlockShutdownSignals();

// Waits until SIGINT or SIGTERM arrives and returns its number. Requires
// BlockShutdownSignals() to have run.
int WaitForShutdownSignal();

}  // namespace kiln::server

#endif  // KILN_SERVER_SHUTDOWN_SIGNALS_H_
