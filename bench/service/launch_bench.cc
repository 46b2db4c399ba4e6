// kiln_launch_bench (GPU): the host cost of Kernel::Launch (argument and
// assumption checks, grid evaluation, cuLaunchKernel) against a raw
// cuLaunchKernel of the same cubin with the same arguments, in one run.
// Goal: Kernel::Launch within 1.1x of raw. The kernel (Y = X * a over 4096
// elements) is compiled by a kilnd started here (KILN_KILND or the build's);
// both paths enqueue on the default stream, 20,000 launches per round,
// median of 7 rounds, each round ending with a synchronise.
// Usage: kiln_launch_bench [LAUNCHES]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/time/clock.h"
#include "client/client.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_driver.h"
#include "tests/support/kilnd_process.h"
#include "tests/support/test_kernels.h"

namespace {

using kiln::runtime::ArgValue;
namespace cuda = kiln::runtime::cuda;

template <typename Fn>
double MedianMicrosPerLaunch(int launches, const cuda::Driver& driver, Fn fn) {
  std::vector<double> rounds;
  for (int r = 0; r < 7; ++r) {
    const absl::Time start = absl::Now();
    for (int i = 0; i < launches; ++i) fn();
    driver.api().cuCtxSynchronize();
    rounds.push_back(absl::ToDoubleMicroseconds(absl::Now() - start) /
                     launches);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[rounds.size() / 2];
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "launch_bench: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int launches = argc > 1 ? std::atoi(argv[1]) : 20000;
  auto devices = cuda::ListDevices();
  if (!devices.ok()) {
    std::printf("launch_bench: no GPU (%s); nothing measured\n",
                devices.status().ToString().c_str());
    return 2;
  }
  if (!cuda::UseDevice(0).ok()) return Fail("cannot use device 0");
  auto driver = cuda::Driver::Get();
  if (!driver.ok()) return Fail(driver.status().ToString());

  const char* env = std::getenv("KILN_KILND");
  auto kilnd = kiln::testing::KilndProcess::Start(
      env != nullptr ? env : KILN_KILND_PATH);
  if (!kilnd.ok()) return Fail(kilnd.status().ToString());
  auto client = kiln::Client::Connect((*kilnd)->address());
  if (!client.ok()) return Fail(client.status().ToString());
  kiln::KernelRequest request;
  request.ir_text = kiln::testing::kScaleKernel;
  request.target = "auto";
  request.bindings = {{"B", 128}};
  absl::StatusOr<kiln::Kernel> kernel = (*client)->Compile(request);
  if (!kernel.ok()) return Fail(kernel.status().ToString());

  const int64_t n = 4096;
  auto x = cuda::DeviceBuffer::Allocate(n * 4);
  auto y = cuda::DeviceBuffer::Allocate(n * 4);
  if (!x.ok() || !y.ok()) return Fail("cannot allocate");
  const float a = 2.0f;
  const std::vector<ArgValue> args = {
      ArgValue::Tensor(x->data(), kiln::runtime::DType::kF32, {n}),
      ArgValue::Tensor(y->data(), kiln::runtime::DType::kF32, {n}),
      ArgValue::F32(a)};

  // The raw path: the same cubin loaded again, the grid the metadata gives.
  auto plan = kiln::runtime::BindLaunch(kernel->metadata(), args);
  if (!plan.ok()) return Fail(plan.status().ToString());
  const cuda::DriverApi& api = (*driver)->api();
  cuda::CUmodule module = nullptr;
  cuda::CUfunction function = nullptr;
  if (api.cuModuleLoadData(&module, kernel->binary().data()) != 0 ||
      api.cuModuleGetFunction(&function, module,
                              kernel->metadata().entry.c_str()) != 0) {
    return Fail("raw cubin load failed");
  }
  auto block = kernel->metadata().block[0].Evaluate(plan->values);
  if (!block.ok()) return Fail(block.status().ToString());
  void* xp = x->data();
  void* yp = y->data();
  long long nn = n;
  void* params[] = {&xp, &yp, const_cast<float*>(&a), &nn};

  absl::Status first = kernel->Launch(args, nullptr);
  if (!first.ok()) return Fail(first.ToString());
  int raw_errors = 0;
  auto raw = [&] {
    raw_errors += api.cuLaunchKernel(
                      function, static_cast<unsigned>(plan->grid[0]), 1, 1,
                      static_cast<unsigned>(*block), 1, 1,
                      static_cast<unsigned>(kernel->metadata().shared_bytes),
                      nullptr, params, nullptr) != 0;
  };
  int kiln_errors = 0;
  auto kiln_launch = [&] {
    kiln_errors += !kernel->Launch(args, nullptr).ok();
  };
  // Interleave: raw, kiln, raw, kiln (warm-up included in the first pair).
  MedianMicrosPerLaunch(1000, **driver, raw);
  MedianMicrosPerLaunch(1000, **driver, kiln_launch);
  const double raw_us = MedianMicrosPerLaunch(launches, **driver, raw);
  const double kiln_us = MedianMicrosPerLaunch(launches, **driver, kiln_launch);
  if (raw_errors + kiln_errors > 0) return Fail("a launch failed");

  std::printf("device %s (%s), kernel %s, grid %lld x block %lld\n",
              (*devices)[0].name.c_str(), kernel->target().c_str(),
              kernel->name().c_str(), static_cast<long long>(plan->grid[0]),
              static_cast<long long>(*block));
  std::printf("%-34s %14s\n", "launch path", "us per launch");
  std::printf("%-34s %14.2f\n", "raw cuLaunchKernel", raw_us);
  std::printf("%-34s %14.2f\n", "kiln::Kernel::Launch", kiln_us);
  std::printf("%-34s %13.2fx\n", "Kernel::Launch / raw", kiln_us / raw_us);
  return 0;
}
