// The CUDA target's back end: a specialised kernel (tile ops intact, see
// gpu/kernel_source.h) to CUDA C++ source through the shared GPU lowering
// with the CUDA dialect, compiled by NVRTC to a cubin for one architecture,
// plus its launch metadata (compiler/docs/kernel-handle.md, "CUDA target
// ABI"). NVRTC is loaded with dlopen (nvrtc.h); no GPU needed.
#ifndef KILN_COMPILER_CODEGEN_CUDA_CUDA_CODEGEN_H_
#define KILN_COMPILER_CODEGEN_CUDA_CUDA_CODEGEN_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/codegen/gpu/gpu_dialect.h"
#include "compiler/codegen/gpu/render.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler {

// sm_80, sm_86, sm_89, sm_90 and sm_90a (Hopper with its
// architecture-specific instructions: wgmma).
bool IsCudaTarget(std::string_view target);
// The NVRTC architecture a target compiles for (the target itself).
std::string CudaArch(std::string_view target);

// What the shared GPU lowering needs to know about CUDA: 32-lane warps,
// mma.sync m16n8k16 accumulators, cp.async, kiln/kiln.cuh; on sm_90a also
// warpgroup MMA (wgmma).
const gpu::GpuDialect& CudaDialect(std::string_view target);

struct CudaCodegenOptions {
  std::string target = "sm_80";
  bool want_ptx = false;  // keep the PTX (kiln compile --emit ptx)
  // The kernel's plan from the pipeline (gpu/render.h); null: planned here.
  const gpu::KernelPlan* plan = nullptr;
};

// The rendered kernel (source: the generated CUDA C++; entry, metadata,
// layouts, shared_bytes) and what NVRTC made of it.
struct CudaArtifact : gpu::RenderedKernel {
  std::string cubin;      // ELF cubin for the target architecture
  std::string ptx;        // with want_ptx
  std::string nvrtc_log;  // ptxas -v report and warnings
  int64_t registers = -1;
  int64_t spill_stores = 0, spill_loads = 0;
};

// Compiles `specialized` for `options.target`. InvalidArgument for kernels
// the target cannot hold (shared memory over the architecture's limit) and
// for generated source NVRTC rejects (its log, tied to the generated lines);
// FailedPrecondition when NVRTC is not installed; Unimplemented for
// constructs without a CUDA lowering.
absl::StatusOr<CudaArtifact> GenerateCuda(const Kernel& specialized,
                                          const CudaCodegenOptions& options);

// The CUDA source only (no NVRTC): for tests and `--emit source` on hosts
// without NVRTC.
absl::StatusOr<CudaArtifact> GenerateCudaSource(const Kernel& specialized,
                                                const CudaCodegenOptions& o);

// "nvrtc-13.0 sm_90 kiln-device-<hash>": NVRTC version, architecture and
// the device-library hash. FailedPrecondition without NVRTC.
absl::StatusOr<std::string> CudaToolchainIdentity(std::string_view target);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_CODEGEN_CUDA_CUDA_CODEGEN_H_
