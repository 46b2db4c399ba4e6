// Layout inference for CUDA targets: where each tile lives and how
// fragments map to threads (the analysis is compiler/codegen/cuda/
// fragment_plan.h, which the CUDA code generator runs again on the same
// kernel).
//
// 1. Check the block size is a constant (tile-to-thread maps depend on it).
// 2. Plan fragments: mma accumulators in registers, the rest in shared
//    memory; tensor-core operand tiles swizzled.
// 3. Record the plan in the pass context (shown by --print-ir-after-all).
#include "compiler/codegen/cuda/fragment_plan.h"
#include "compiler/ir/const_fold.h"
#include "compiler/ir/format.h"
#include "compiler/passes/passes.h"

namespace kiln::compiler {
namespace {

class CudaLayoutInferencePass : public Pass {
 public:
  std::string_view name() const override { return "layout-inference"; }
  absl::Status Run(Kernel& k, PassContext& ctx) override {
    auto threads = FoldInt(k.threads);
    if (!threads || *threads < 1 || *threads > 1024) {
      return absl::InvalidArgumentError(StrCat(
          k.loc.line, ":", k.loc.col,
          ": threads(...) must be a constant in 1..1024 for ", ctx.target));
    }
    cuda::FragmentPlan plan = cuda::PlanFragments(k, *threads);
    for (const auto& [tile, layout] : plan.Describe()) {
      ctx.layouts[tile] = layout;
    }
    return absl::OkStatus();
  }
};

// Pipelined loops stay in the IR on CUDA targets: the code generator turns
// them into a multi-stage cp.async ring. This pass checks the stage count.
absl::Status CheckStages(const Block& block) {
  for (const Stmt& s : block) {
    if (auto* f = std::get_if<ForStmt>(&s.node)) {
      if (f->loop == LoopKind::kPipelined) {
        auto stages = f->stages ? FoldInt(*f->stages) : std::nullopt;
        if (!stages || *stages < 1 || *stages > 8) {
          return absl::InvalidArgumentError(
              StrCat(s.loc.line, ":", s.loc.col,
                     ": pipelined loop needs a constant stage count in 1..8"));
        }
      }
      absl::Status st = CheckStages(f->body);
      if (!st.ok()) return st;
    } else if (auto* i = std::get_if<IfStmt>(&s.node)) {
      absl::Status st = CheckStages(i->then_body);
      if (st.ok()) st = CheckStages(i->else_body);
      if (!st.ok()) return st;
    }
  }
  return absl::OkStatus();
}

class CudaPipelineLoopsPass : public Pass {
 public:
  std::string_view name() const override { return "pipeline-loops"; }
  absl::Status Run(Kernel& k, PassContext&) override {
    return CheckStages(k.body);
  }
};

}  // namespace

std::unique_ptr<Pass> CreateCudaLayoutInferencePass() {
  return std::make_unique<CudaLayoutInferencePass>();
}
std::unique_ptr<Pass> CreateCudaPipelineLoopsPass() {
  return std::make_unique<CudaPipelineLoopsPass>();
}

}  // namespace kiln::compiler
