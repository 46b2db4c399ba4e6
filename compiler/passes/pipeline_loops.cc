// Software pipelining of `pipelined` loops.
//
// 1. Check the stage counts (CheckPipelineStages: an integer 1..8 after
//    specialisation).
// 2. On targets where one thread runs the whole block (CPU), copies cannot
//    overlap compute, so the loop becomes a plain serial loop. GPU targets
//    rewrite it into a multi-stage ring of asynchronous copies (CUDA target).
#include "compiler/ir/format.h"
#include "compiler/ir/pipeline_stages.h"
#include "compiler/passes/passes.h"

namespace kiln::compiler {
namespace {

absl::Status Rewrite(Block& block) {
  for (Stmt& s : block) {
    absl::Status st = absl::OkStatus();
    if (auto* f = std::get_if<ForStmt>(&s.node)) {
      if (f->loop == LoopKind::kPipelined) {
        f->loop = LoopKind::kSerial;
        f->stages.reset();
      }
      st = Rewrite(f->body);
    } else if (auto* i = std::get_if<IfStmt>(&s.node)) {
      st = Rewrite(i->then_body);
      if (st.ok()) st = Rewrite(i->else_body);
    } else if (auto* p = std::get_if<ParallelStmt>(&s.node)) {
      st = Rewrite(p->body);
    }
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

class PipelineLoopsPass : public Pass {
 public:
  std::string_view name() const override { return "pipeline-loops"; }
  absl::Status Run(Kernel& k, PassContext& ctx) override {
    if (ctx.target != "cpu") {
      return absl::UnimplementedError(
          StrCat("target '", ctx.target, "' has no loop pipelining yet"));
    }
    absl::Status st = CheckPipelineStages(k.body);
    if (!st.ok()) return st;
    return Rewrite(k.body);
  }
};

}  // namespace

std::unique_ptr<Pass> CreatePipelineLoopsPass() {
  return std::make_unique<PipelineLoopsPass>();
}

}  // namespace kiln::compiler
