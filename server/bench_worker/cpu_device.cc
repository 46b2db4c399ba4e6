// The CPU benchmark device: runs the kernel on the runtime's thread pool in
// this process, timed by wall clock.
#include <chrono>
#include <utility>

#include "runtime/cpu/cpu_kernel.h"
#include "server/bench_worker/bench_device.h"

namespace kiln::bench {
namespace {

class CpuBenchKernel final : public BenchKernel {
 public:
  CpuBenchKernel(std::unique_ptr<runtime::CpuKernel> kernel, Inputs& inputs)
      : kernel_(std::move(kernel)), inputs_(inputs) {}

  absl::Status Run() override { return kernel_->Launch(inputs_.args); }

  absl::StatusOr<double> TimedRunUs() override {
    const auto start = std::chrono::steady_clock::now();
    absl::Status status = kernel_->Launch(inputs_.args);
    const auto end = std::chrono::steady_clock::now();
    if (!status.ok()) return status;
    return std::chrono::duration<double, std::micro>(end - start).count();
  }

  absl::Status ReadBack() override { return absl::OkStatus(); }

 private:
  std::unique_ptr<runtime::CpuKernel> kernel_;
  Inputs& inputs_;
};

class CpuBenchDevice final : public BenchDevice {
 public:
  absl::StatusOr<std::unique_ptr<BenchKernel>> Prepare(
      std::string_view binary, std::string_view metadata,
      Inputs& inputs) override {
    absl::StatusOr<std::unique_ptr<runtime::CpuKernel>> kernel =
        runtime::CpuKernel::Load(binary, metadata);
    if (!kernel.ok()) return kernel.status();
    return std::make_unique<CpuBenchKernel>(*std::move(kernel), inputs);
  }
};

}  // namespace

std::unique_ptr<BenchDevice> MakeCpuBenchDevice() {
  return std::make_unique<CpuBenchDevice>();
}

}  // namespace kiln::bench
