// The device seam of the benchmark worker: what running a candidate needs
// from a device. The CPU device (cpu_device.cc) runs the kernel in this
// process on the runtime's thread pool and times it by wall clock; the CUDA
// device (cuda_device.cc, over runtime/cuda) copies the inputs to the GPU,
// flushes L2 before each timed run and times it with CUDA events.
#ifndef KILN_SERVER_BENCH_WORKER_BENCH_DEVICE_H_
#define KILN_SERVER_BENCH_WORKER_BENCH_DEVICE_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/bench_worker/inputs.h"

namespace kiln::bench {

// One candidate loaded on a device with its inputs bound.
class BenchKernel {
 public:
  virtual ~BenchKernel() = default;
  // One launch, returning when it has finished.
  virtual absl::Status Run() = 0;
  // One launch, timed: microseconds from start to finish on the device.
  virtual absl::StatusOr<double> TimedRunUs() = 0;
  // Copies every tensor back into the host buffers of the Inputs it was
  // prepared with (the CPU's are the same memory: nothing to do).
  virtual absl::Status ReadBack() = 0;
};

class BenchDevice {
 public:
  virtual ~BenchDevice() = default;
  // Loads `binary` (with its launch metadata text) and binds `inputs`,
  // which must outlive the returned kernel. InvalidArgument or NotFound
  // when the binary cannot be loaded for this device.
  virtual absl::StatusOr<std::unique_ptr<BenchKernel>> Prepare(
      std::string_view binary, std::string_view metadata, Inputs& inputs) = 0;
};

// The device named by the worker's --device flag: "cpu", or "cuda:N".
// InvalidArgument for another name.
absl::StatusOr<std::unique_ptr<BenchDevice>> OpenBenchDevice(
    std::string_view name);

// The devices (cpu_device.cc, cuda_device.cc).
std::unique_ptr<BenchDevice> MakeCpuBenchDevice();
std::unique_ptr<BenchDevice> MakeCudaBenchDevice(int ordinal);

}  // namespace kiln::bench

#endif  // KILN_SERVER_BENCH_WORKER_BENCH_DEVICE_H_
