// The GPU back ends' common front half: a specialised kernel to source text
// through layout inference (fragment_plan.h) and the shared emitter
// (kernel_source.h) with one vendor's dialect, the shared-memory limit
// checked, and the launch metadata written. cuda_codegen.cc and
// hip_codegen.cc add the target checks and the toolchain.
#ifndef KILN_COMPILER_CODEGEN_GPU_RENDER_H_
#define KILN_COMPILER_CODEGEN_GPU_RENDER_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "compiler/codegen/gpu/gpu_dialect.h"
#include "compiler/codegen/gpu/kernel_plan.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler::gpu {

struct RenderOptions {
  std::string target;            // written into the metadata ("gfx90a")
  std::string arch;              // named in errors ("sm_90")
  int64_t max_shared_bytes = 0;  // per block
  // Empty when the target has thread block clusters; else what cluster(...)
  // needs, for the error ("thread block clusters (sm_90)").
  std::string clusters_need;
  // The kernel's plan, made by the pipeline's `plan` pass for this very
  // kernel (it points into it); null: planned here.
  const KernelPlan* plan = nullptr;
  // > 0: the warp-specialised producer's registers (LaunchPlan), instead
  // of the plan's.
  int producer_regs = 0;
  // false: planned here without the TMA producer (as where the dialect
  // has no TMA), whatever `plan` says.
  bool warp_specialise = true;
};

struct RenderedKernel {
  std::string source;    // the translation unit
  std::string entry;     // "kiln_" + kernel name
  std::string metadata;  // launch metadata (kernel-handle.md)
  std::string layouts;   // "TILE: LAYOUT" lines (fragment_plan.h)
  std::string plan;      // the KernelPlan, printed (kernel_plan.h)
  int64_t shared_bytes = 0;
  bool warp_specialised = false;
  // A warp-specialised kernel whose warpgroups rebalance registers: the
  // producer's (LaunchPlan::producer_regs, resolved); else 0.
  int producer_regs = 0;
};

// Plans the kernel (plan_kernel.h), then renders the plan.
// InvalidArgument when threads(...) is not a constant, the kernel asks for
// clusters the target lacks (`clusters_need`) or needs more shared memory
// than `max_shared_bytes`; the emitter's and metadata
// writer's errors otherwise.
absl::StatusOr<RenderedKernel> RenderKernel(const Kernel& specialized,
                                            const GpuDialect& dialect,
                                            const RenderOptions& options);

}  // namespace kiln::compiler::gpu

#endif  // KILN_COMPILER_CODEGEN_GPU_RENDER_H_
