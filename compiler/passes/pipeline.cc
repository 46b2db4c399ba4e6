#include "compiler/passes/pipeline.h"

#include "absl/strings/str_split.h"
#include "compiler/codegen/gpu/kernel_plan.h"
#include "compiler/ir/format.h"
#include "compiler/ir/printer.h"

namespace kiln::compiler {

std::vector<std::unique_ptr<Pass>> BuildPipeline(const std::string& target) {
  std::vector<std::unique_ptr<Pass>> passes;
  passes.push_back(CreateSpecializePass());
  passes.push_back(CreateStoresToCopiesPass());
  passes.push_back(CreateReuseLoadsPass());
  passes.push_back(CreateGuardAccessesPass());
  if (target.rfind("sm_", 0) == 0 || target.rfind("gfx", 0) == 0) {
    // CUDA and HIP: the code generator lowers tile ops itself
    // (codegen/gpu/, with codegen/cuda/ or codegen/hip/).
    // (The plan points into the kernel: it comes last.)
    passes.push_back(CreateGpuPipelineLoopsPass());
    passes.push_back(CreateGpuPlanPass());
    return passes;
  }
  passes.push_back(CreateLayoutInferencePass());
  passes.push_back(CreatePipelineLoopsPass());
  passes.push_back(CreateLowerTileOpsPass());
  passes.push_back(CreateSimplifyPass());
  return passes;
}

absl::Status RunPipeline(Kernel& kernel, PassContext& ctx,
                         std::string* ir_dump) {
  for (const auto& pass : BuildPipeline(ctx.target)) {
    absl::Status st = pass->Run(kernel, ctx);
    if (!st.ok()) {
      // (The location stays a payload: ErrorLocation.)
      absl::Status named(st.code(), StrCat(pass->name(), ": ", st.message()));
      st.ForEachPayload([&](absl::string_view key, const absl::Cord& value) {
        named.SetPayload(key, value);
      });
      return named;
    }
    if (ir_dump) {
      StrAppend(ir_dump, "// ----- after ", pass->name(), " -----\n");
      if (pass->name() == "layout-inference" || pass->name() == "plan") {
        for (const auto& [tile, layout] : ctx.layouts) {
          StrAppend(ir_dump, "// layout ", tile, ": ", layout, "\n");
        }
      }
      if (pass->name() == "plan" && ctx.gpu_plan) {
        for (absl::string_view line : absl::StrSplit(
                 gpu::PrintPlan(*ctx.gpu_plan), '\n', absl::SkipEmpty())) {
          StrAppend(ir_dump, "// plan ", line, "\n");
        }
      }
      StrAppend(ir_dump, Print(kernel));
    }
  }
  return absl::OkStatus();
}

}  // namespace kiln::compiler
