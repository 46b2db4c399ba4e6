// The planning pass for GPU targets (CUDA sm_*, HIP gfx*), the last of
// their pipeline: the kernel plan (compiler/codegen/gpu/plan_kernel.h, with
// the target's dialect), which the back end renders without planning again.
//
// 1. Check the block size is a constant (tile-to-thread maps depend on it).
// 2. Run the planning passes: fragment layouts (matrix-core accumulators in
//    registers, operand tiles swizzled), loop facts, pipeline, launch and
//    walk order, clusters, epilogue, shared-memory sharing.
// 3. Record the plan and its layouts in the pass context (shown by
//    --print-ir-after-all).
// (The pipelined loops' stage counts are checked here too:
// GpuPipelineLoopsPass.)
#include "compiler/codegen/cuda/cuda_codegen.h"
#include "compiler/codegen/gpu/kernel_plan.h"
#include "compiler/codegen/gpu/plan_kernel.h"
#include "compiler/codegen/hip/hip_codegen.h"
#include "compiler/ir/const_fold.h"
#include "compiler/ir/diagnostic.h"
#include "compiler/ir/format.h"
#include "compiler/ir/pipeline_stages.h"
#include "compiler/passes/passes.h"

namespace kiln::compiler {
namespace {

const gpu::GpuDialect& DialectOf(const std::string& target) {
  return IsHipTarget(target) ? HipDialect() : CudaDialect(target);
}

class GpuPlanPass : public Pass {
 public:
  std::string_view name() const override { return "plan"; }
  absl::Status Run(Kernel& k, PassContext& ctx) override {
    auto threads = FoldInt(k.threads);
    if (!threads || *threads < 1 || *threads > 1024) {
      return LocatedError(
          k.loc, StrCat("threads(...) must be a constant in 1..1024 for ",
                        ctx.target));
    }
    absl::StatusOr<gpu::KernelPlan> plan =
        gpu::PlanKernel(k, DialectOf(ctx.target));
    if (!plan.ok()) return plan.status();
    for (const auto& [tile, layout] : plan->fragments.Describe()) {
      ctx.layouts[tile] = layout;
    }
    ctx.gpu_plan = std::make_shared<const gpu::KernelPlan>(*std::move(plan));
    return absl::OkStatus();
  }
};

// Pipelined loops stay in the IR on GPU targets: the code generator turns
// them into a multi-stage shared-memory ring. This pass checks their stage
// counts (the rule every target shares, CheckPipelineStages).
class GpuPipelineLoopsPass : public Pass {
 public:
  std::string_view name() const override { return "pipeline-loops"; }
  absl::Status Run(Kernel& k, PassContext&) override {
    return CheckPipelineStages(k.body);
  }
};

}  // namespace

std::unique_ptr<Pass> CreateGpuPlanPass() {
  return std::make_unique<GpuPlanPass>();
}
std::unique_ptr<Pass> CreateGpuPipelineLoopsPass() {
  return std::make_unique<GpuPipelineLoopsPass>();
}

}  // namespace kiln::compiler
