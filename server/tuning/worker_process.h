// WorkerProcess: one benchmark worker (kiln-bench-worker) owned by kilnd,
// spoken to over a socket pair in length-prefixed bench.proto frames
// (server/bench_worker/framing.h). The worker is started on the first call
// and again after it died: a candidate that crashes, aborts or hangs ends
// only the worker, and the call says why.
#ifndef KILN_SERVER_TUNING_WORKER_PROCESS_H_
#define KILN_SERVER_TUNING_WORKER_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/bench_worker/bench.pb.h"

namespace kiln::server::tuning {

// The worker binary: $KILN_BENCH_WORKER when set; else kiln-bench-worker
// beside this process's executable, in ../libexec/kiln/ from it, or where
// this build put it. NotFound naming the places looked at.
absl::StatusOr<std::string> FindBenchWorker();

// Not thread-safe: one call at a time (the Autotuner holds a lock per
// device).
class WorkerProcess {
 public:
  // `path` is the worker binary, `device` its --device ("cpu", "cuda:0").
  // The worker inherits this process's environment; with `allow_faults`
  // it also gets KILN_BENCH_WORKER_FAULTS=1 (its test-only fault hook),
  // without it KILN_BENCH_WORKER_FAULTS is removed.
  WorkerProcess(std::string path, std::string device, bool allow_faults);
  // Kills (SIGKILL) and reaps a running worker.
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Sends `request` and waits up to `time_limit` for the reply, starting
  // the worker first if it is not running. Errors (the worker is gone
  // after each, and restarted by the next call):
  // - Aborted "benchmark worker was killed by SIGSEGV (Segmentation
  //   fault)" / "... exited with status N" when it died;
  // - DeadlineExceeded "no result within 2s; benchmark worker killed" when
  //   the time limit passed;
  // - Unavailable when it cannot be started;
  // - Cancelled when `cancelled` (polled every 50 ms while waiting; may be
  //   empty) returns true: the worker is killed, the candidate abandoned.
  absl::StatusOr<kiln::bench::v1::BenchReply> Call(
      const kiln::bench::v1::BenchRequest& request, absl::Duration time_limit,
      const std::function<bool()>& cancelled = nullptr);

  // The running worker's process id (-1: none), and how many times a
  // worker was started.
  pid_t pid() const { return pid_; }
  int starts() const { return starts_; }

 private:
  absl::Status Start();
  // Kills the worker if it runs and reaps it; returns how it ended.
  std::string Stop(bool kill_first);

  const std::string path_;
  const std::string device_;
  const bool allow_faults_;
  pid_t pid_ = -1;
  int fd_ = -1;
  int starts_ = 0;
};

}  // namespace kiln::server::tuning

#endif  // KILN_SERVER_TUNING_WORKER_PROCESS_H_
