#include "compiler/ir/pipeline_stages.h"

#include "compiler/ir/const_fold.h"
#include "compiler/ir/diagnostic.h"
#include "compiler/ir/format.h"

namespace kiln::compiler {

std::optional<int64_t> PipelineStages(const ForStmt& f) {
  if (f.loop != LoopKind::kPipelined || !f.stages) return std::nullopt;
  std::optional<int64_t> s = FoldInt(*f.stages);
  if (!s || *s < 1 || *s > kMaxPipelineStages) return std::nullopt;
  return s;
}

absl::Status CheckPipelineStages(const Block& block) {
  for (const Stmt& s : block) {
    absl::Status st = absl::OkStatus();
    if (auto* f = std::get_if<ForStmt>(&s.node)) {
      if (f->loop == LoopKind::kPipelined && !PipelineStages(*f)) {
        return LocatedError(
            s.loc, StrCat("pipelined loop needs a constant stage count in 1..",
                          kMaxPipelineStages));
      }
      st = CheckPipelineStages(f->body);
    } else if (auto* i = std::get_if<IfStmt>(&s.node)) {
      st = CheckPipelineStages(i->then_body);
      if (st.ok()) st = CheckPipelineStages(i->else_body);
    } else if (auto* p = std::get_if<ParallelStmt>(&s.node)) {
      st = CheckPipelineStages(p->body);
    }
    if (!st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace kiln::compiler
