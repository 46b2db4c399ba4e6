// GpuLauncher: the target-independent half of a GPU kernel launch, shared by
// the CUDA (cuLaunchKernel) and HIP (hipModuleLaunchKernel) runtimes, whose
// kernel-parameter conventions are the same: params[i] points at argument
// i's value (a device pointer per tensor, the scalar's bytes), then one
// 64-bit value per dynamic symbol (compiler/docs/kernel-handle.md). It binds
// the arguments with launch_args.h, remembers the last binding so that a
// launch repeating its dtypes, shapes, strides and scalars skips the checks,
// builds the parameter array and hands it to the target's enqueue call.
#ifndef KILN_RUNTIME_GPU_LAUNCH_H_
#define KILN_RUNTIME_GPU_LAUNCH_H_

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "runtime/kernel_metadata.h"
#include "runtime/launch_args.h"

namespace kiln::runtime {

// What a successful launch bound: its arguments without data pointers, the
// grid and block it ran with and the dynamic symbols' values.
struct GpuBinding {
  std::vector<ArgValue> args;
  std::array<unsigned, 3> grid = {1, 1, 1};
  std::array<unsigned, 3> block = {1, 1, 1};
  std::vector<long long> symbols;
};

class GpuLauncher {
 public:
  // The target's limits: OK, or InvalidArgument saying which one `grid`
  // and `block` (evaluated, all positive) exceed.
  using CheckDims = absl::FunctionRef<absl::Status(
      const std::array<int64_t, 3>& grid, const std::array<int64_t, 3>& block)>;
  // Enqueues the kernel with `binding`'s grid and block and `params`.
  using Enqueue =
      absl::FunctionRef<absl::Status(const GpuBinding& binding, void** params)>;

  // Binds `args` against `metadata` (InvalidArgument for any mismatch, see
  // BindLaunch; nothing is launched), checks the dims with `check` and calls
  // `enqueue`, returning its status. Arguments with the same dtypes, shapes,
  // strides and scalar values as the last successful launch reuse its
  // binding without checking again. An empty grid launches nothing and
  // returns OK. `extra` parameters follow the symbols (CUDA: the tensor
  // maps and their flag). Thread-safe.
  absl::Status Launch(const KernelMetadata& metadata,
                      absl::Span<const ArgValue> args, CheckDims check,
                      Enqueue enqueue,
                      absl::Span<void* const> extra = {}) const;

 private:
  absl::Status EnqueueWith(const GpuBinding& binding,
                           absl::Span<const ArgValue> args,
                           absl::Span<void* const> extra,
                           Enqueue enqueue) const;

  mutable absl::Mutex mu_;
  mutable std::shared_ptr<const GpuBinding> last_ ABSL_GUARDED_BY(mu_);
};

// Calls `launch_kernel`, cuLaunchKernel or hipModuleLaunchKernel (the same
// parameters), for `function` with `binding`'s grid and block, `params` and
// no `extra`; returns its result code.
template <typename LaunchKernel, typename Function, typename Stream>
auto CallLaunchKernel(LaunchKernel launch_kernel, Function function,
                      const GpuBinding& binding, int64_t shared_bytes,
                      Stream stream, void** params) {
  const GpuBinding& b = binding;
  return launch_kernel(
      function, b.grid[0], b.grid[1], b.grid[2], b.block[0], b.block[1],
      b.block[2], static_cast<unsigned>(shared_bytes), stream, params, nullptr);
}

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_GPU_LAUNCH_H_
