// A loaded CUDA kernel: the cubin of a `target sm_*` handle, loaded into the
// current device's primary context, plus its metadata; Launch checks the
// arguments against the metadata (launch_args.h), evaluates the grid and
// launches on a caller-given stream (ABI: compiler/docs/kernel-handle.md,
// "CUDA target ABI").
#ifndef KILN_RUNTIME_CUDA_CUDA_KERNEL_H_
#define KILN_RUNTIME_CUDA_CUDA_KERNEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/gpu_launch.h"
#include "runtime/kernel_metadata.h"
#include "runtime/launch_args.h"

namespace kiln::runtime::cuda {

class CudaKernel {
 public:
  // Loads `cubin` on device `ordinal` (its primary context becomes current)
  // and raises the function's dynamic shared-memory limit when the metadata
  // asks for more than the default 48 KiB. FailedPrecondition without a
  // driver or GPU; InvalidArgument when the metadata's target is not a CUDA
  // one, or the device cannot hold the shared memory; Internal with the
  // driver's error otherwise (e.g. a cubin for another architecture).
  static absl::StatusOr<std::unique_ptr<CudaKernel>> Load(
      std::string_view cubin, KernelMetadata metadata, int ordinal = 0);
  static absl::StatusOr<std::unique_ptr<CudaKernel>> Load(
      std::string_view cubin, std::string_view metadata_text, int ordinal = 0);

  // Binds `args` (tensors carry device pointers) and enqueues the kernel on
  // `stream` (nullptr: the legacy default stream). A launch whose arguments
  // have the same dtypes, shapes, strides and scalar values as the last
  // successful one reuses its binding (grid, symbols): only the pointers
  // are new, so the checks are not repeated. Returns once enqueued;
  // InvalidArgument for any argument mismatch (nothing is launched), and
  // the driver's error when the launch is refused. The grid may be empty
  // (a zero dim): nothing is launched.
  absl::Status Launch(absl::Span<const ArgValue> args,
                      CUstream stream = nullptr) const;

  const KernelMetadata& metadata() const { return metadata_; }
  ~CudaKernel();

  // The TMA tensor maps of the metadata for `args` (128 bytes each, in
  // order), and whether all could be built: a tensor whose base address is
  // not 16-byte aligned, whose innermost dim is not contiguous or whose
  // other strides are not multiples of 16 bytes cannot have one, nor can
  // any when the driver lacks cuTensorMapEncodeTiled; the kernel then takes
  // its fallback path (the `int` after the maps is 0). Maps are cached: a
  // launch with the same tensors (pointers, shapes, strides) as the last
  // one reuses them.
  struct alignas(64) TensorMap {  // CUtensorMap's storage
    uint64_t opaque[16];
  };
  struct TensorMaps {
    std::vector<TensorMap> maps;
    int ok = 0;
    // The kernel parameters they make: each map, then &ok.
    std::vector<void*> params;
  };
  std::shared_ptr<const TensorMaps> BuildTensorMaps(
      absl::Span<const ArgValue> args) const;

 private:
  CudaKernel(const Driver* d, KernelMetadata md)
      : driver_(d), metadata_(std::move(md)) {}

  const Driver* driver_;
  KernelMetadata metadata_;
  GpuLauncher launcher_;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  // Blocks of this kernel resident at once on the device it was loaded on
  // (SMs times blocks per SM): a persistent kernel's grid.
  int64_t resident_blocks_ = 1;
  // Blocks per cluster along x (the `cluster` record; 1: none).
  unsigned cluster_x_ = 1;
  // The last tensor maps and the tensors they describe.
  mutable absl::Mutex maps_mu_;
  mutable std::vector<ArgValue> maps_for_ ABSL_GUARDED_BY(maps_mu_);
  mutable std::shared_ptr<const TensorMaps> maps_ ABSL_GUARDED_BY(maps_mu_);
};

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_CUDA_KERNEL_H_
