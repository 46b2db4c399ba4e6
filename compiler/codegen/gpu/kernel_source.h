// GPU C++ source of one kernel (CUDA or HIP, by the dialect, gpu_dialect.h):
// the specialised tile IR (tunables bound, tile ops intact) rendered as a
// __global__ function that calls the vendor's device library (kiln/*.cuh,
// kiln/*.hip.h: the same API) for tile primitives.
//
// Execution model: every thread of the block runs the block-level statements
// (lets, loops, ifs, local-tile stores: block-uniform, computed redundantly);
// each tile op and `parallel` spreads its elements over the threads and is
// followed by __syncthreads() when it touches shared memory. Shared tiles and
// shared-resident fragments live in one dynamic shared-memory buffer;
// register fragments (fragment_plan.h) are per-thread arrays in the matrix
// instruction's accumulator layout. Fast paths: 16-byte tile loads (cp.async
// where the dialect has it; a multi-stage ring in `pipelined` loops),
// matrix-core GEMMs (ldmatrix + mma.sync, MFMA), vectorised tile stores,
// wave-shuffle reductions.
#ifndef KILN_COMPILER_CODEGEN_GPU_KERNEL_SOURCE_H_
#define KILN_COMPILER_CODEGEN_GPU_KERNEL_SOURCE_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/codegen/gpu/fragment_plan.h"
#include "compiler/codegen/gpu/gpu_dialect.h"
#include "compiler/codegen/gpu/kernel_plan.h"
#include "compiler/codegen/metadata_writer.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler::gpu {

struct KernelSource {
  std::string source;   // a complete translation unit (includes the library)
  std::string entry;    // extern "C" name: "kiln_" + kernel name
  int64_t threads = 0;  // the program's threads(...)
  int64_t launch_threads = 0;  // the block launched (+ a producer warpgroup)
  int64_t shared_bytes = 0;    // dynamic shared memory per block
  int64_t static_shared_bytes = 0;         // __shared__ variables (mbarriers)
  std::vector<TensorMapSpec> tensor_maps;  // kernel parameters, in order
  // Walks the grid: launch as many blocks as are resident at once.
  bool persistent = false;
  // Blocks per cluster along x the kernel is written for (1: none).
  int64_t cluster_x = 1;
};

// Kernel ABI (compiler/docs/kernel-handle.md, "CUDA target ABI", the same
// for HIP): one
// parameter per IR parameter in order (tensors as device pointers to their
// storage type, scalars by value in their storage type), then one `long
// long` per dynamic symbol in metadata order; kernels with tensor maps then
// take one `const __grid_constant__ kiln::TensorMap` per map and an `int`
// that is 1 when the runtime built them all (0: take the fallback path).
//
// The emitter renders `plan` (plan_kernel.h) and decides none of its
// parts. InvalidArgument for a kernel that is not specialised (a tile dim
// not constant); Unimplemented for a construct with no GPU
// lowering yet (naming the op and its line).
absl::StatusOr<KernelSource> EmitKernelSource(const Kernel& kernel,
                                              const KernelPlan& plan,
                                              const GpuDialect& dialect);

}  // namespace kiln::compiler::gpu

#endif  // KILN_COMPILER_CODEGEN_GPU_KERNEL_SOURCE_H_
