// Autotuner: the daemon's transport-free tuning path (kiln.v1.Autotune).
//
//   request -> parse, verify, check shape and fixed bindings
//     -> tuning key (tuning_key.h) -> stored result? answer it ("cached")
//     -> the space: every combination of tunable values satisfying the
//        kernel's constraints (compiler/tuning_space.h), at most
//        max_candidates, narrowed by fixed tunables
//     -> compile every candidate in parallel on the CompileEngine (so each
//        is cached like any kernel); compile errors and resource excess are
//        pruned with the reason
//     -> benchmark each compiled candidate in the device's worker process
//        (worker_process.h): same seeded inputs, outputs checked against
//        the first valid candidate (output_check.h), timed after warm-up
//     -> measure the fastest few again, choose the lowest median
//     -> store under the tuning key (tuning_record.h), answer.
//
// One worker per device; tunings of the same device take turns, so their
// timings do not disturb each other. Uses kiln.v1 messages as plain data;
// no gRPC.
#ifndef KILN_SERVER_TUNING_AUTOTUNER_H_
#define KILN_SERVER_TUNING_AUTOTUNER_H_

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/cache.h"
#include "proto/kiln.pb.h"
#include "server/engine/compile_engine.h"

namespace kiln::bench::v1 {
class BenchRequest;
class BenchReply;
}  // namespace kiln::bench::v1

namespace kiln::server::tuning {

// A GPU of the host that candidates of its target can run on.
struct TuningGpu {
  int index = 0;
  std::string target;  // "sm_90a"
  std::string sku;     // "NVIDIA-H200-132SM"
};

struct AutotunerOptions {
  // The worker binary; FindBenchWorker() when empty.
  std::string worker_path;
  // Honour AutotuneOptions.faults (tests). Default: whether this process's
  // environment has KILN_BENCH_WORKER_FAULTS=1 (the worker inherits it).
  bool allow_faults = false;
  // Compile requests in flight at once; 0: twice the hardware threads.
  int compile_parallelism = 0;
  // The host's GPUs (CPU is always there).
  std::vector<TuningGpu> gpus;
  // GPU tunings at shapes whose symbol values multiply to at most this
  // check every candidate against the CPU target's output (an independent
  // code generator) instead of the first candidate that ran.
  int64_t cpu_reference_max_work = int64_t{1} << 24;
  // Tests: use the CPU reference for every tuning, CPU targets and any
  // shape included.
  bool cpu_reference_always = false;
};

// Reads KILN_BENCH_WORKER_FAULTS from the environment.
bool FaultsAllowedByEnvironment();

class Autotuner {
 public:
  // `engine` and `cache` are not owned and must outlive the tuner.
  Autotuner(CompileEngine* engine, cache::Cache* cache,
            AutotunerOptions options);
  ~Autotuner();

  struct Call {
    absl::Time deadline = absl::InfiniteFuture();
    std::function<bool()> cancelled;  // polled between candidates
  };

  // Tunes (or answers from the cache), calling `progress` for every event,
  // one call at a time, the last with EVENT_DONE or EVENT_CACHED. Errors:
  // InvalidArgument for an empty IR text, an invalid program (FILE:LINE:COL
  // lines), unknown target, a shape or fixed binding naming nothing of the
  // kernel, a missing or non-positive shape value, negative options;
  // NotFound for an unknown kernel; FailedPrecondition when the target has
  // no device here, faults are asked for without KILN_BENCH_WORKER_FAULTS=1,
  // or no candidate ran correctly (every reason is in the progress
  // events); Cancelled / DeadlineExceeded; NotFound when the worker binary
  // is missing; cache I/O errors. Thread-safe.
  absl::Status Tune(
      const kiln::v1::AutotuneRequest& request, const Call& call,
      const std::function<void(const kiln::v1::AutotuneProgress&)>& progress);

  // How many benchmark workers were started so far (all devices).
  int worker_starts() const;

 private:
  struct Device;
  absl::StatusOr<Device*> DeviceFor(const std::string& target);
  // Compiles `request` (a candidate's, for the CPU target) and runs it once
  // on `bench`'s inputs in the CPU worker, returning its outputs. `held` is
  // the device whose lock the caller holds (the CPU's in a CPU tuning).
  absl::StatusOr<kiln::bench::v1::BenchReply> CpuReference(
      const CompileRequest& request, const kiln::bench::v1::BenchRequest& bench,
      Device* held, const std::string& worker_path, absl::Duration limit,
      const Call& call);

  CompileEngine* const engine_;
  cache::Cache* const cache_;
  const AutotunerOptions options_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<Device>> devices_ ABSL_GUARDED_BY(mu_);
};

}  // namespace kiln::server::tuning

#endif  // KILN_SERVER_TUNING_AUTOTUNER_H_
