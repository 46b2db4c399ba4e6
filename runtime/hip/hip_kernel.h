// A loaded HIP kernel: the code object of a `target gfx*` handle, loaded on
// one AMD GPU, plus its metadata; Launch checks the arguments against the
// metadata (launch_args.h), evaluates the grid and launches on a caller-given
// stream. The kernel ABI is the CUDA target's (compiler/docs/kernel-handle.md,
// "HIP target ABI"): the same parameters, grid, block and dynamic shared
// memory (LDS), launched with hipModuleLaunchKernel.
#ifndef KILN_RUNTIME_HIP_HIP_KERNEL_H_
#define KILN_RUNTIME_HIP_HIP_KERNEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/gpu_launch.h"
#include "runtime/hip/hip_driver.h"
#include "runtime/kernel_metadata.h"
#include "runtime/launch_args.h"

namespace kiln::runtime::hip {

class HipKernel {
 public:
  // Loads `code_object` on device `ordinal` (which becomes the calling
  // thread's current HIP device). InvalidArgument when the metadata's target
  // is not a gfx one, or the kernel needs more LDS than the device has;
  // FailedPrecondition "no AMD GPU: ..." without a HIP runtime or a GPU;
  // NotFound for an ordinal that does not exist; Internal with HIP's error
  // otherwise (e.g. a code object for another gfx architecture:
  // hipErrorNoBinaryForGpu).
  static absl::StatusOr<std::unique_ptr<HipKernel>> Load(
      std::string_view code_object, KernelMetadata metadata, int ordinal = 0);
  static absl::StatusOr<std::unique_ptr<HipKernel>> Load(
      std::string_view code_object, std::string_view metadata_text,
      int ordinal = 0);

  // Binds `args` (tensors carry device pointers) and enqueues the kernel on
  // `stream` (nullptr: the null stream of the kernel's device, which then
  // becomes the calling thread's current device). Returns once enqueued;
  // InvalidArgument for any argument mismatch or a grid beyond the device's
  // limits (nothing is launched), HIP's error when the launch is refused.
  // Repeated shapes reuse the last binding, as for CUDA (gpu_launch.h).
  absl::Status Launch(absl::Span<const ArgValue> args,
                      hipStream_t stream = nullptr) const;

  const KernelMetadata& metadata() const { return metadata_; }
  ~HipKernel();

 private:
  HipKernel(const Driver* d, KernelMetadata md, int ordinal)
      : driver_(d), metadata_(std::move(md)), ordinal_(ordinal) {}

  const Driver* driver_;
  KernelMetadata metadata_;
  int ordinal_;
  std::array<int64_t, 3> max_grid_ = {0, 0, 0};
  // HIP may read the image after hipModuleLoadData returns (it extracts
  // code objects lazily), so the kernel keeps its own copy.
  std::string image_;
  GpuLauncher launcher_;
  hipModule_t module_ = nullptr;
  hipFunction_t function_ = nullptr;
};

}  // namespace kiln::runtime::hip

#endif  // KILN_RUNTIME_HIP_HIP_KERNEL_H_
