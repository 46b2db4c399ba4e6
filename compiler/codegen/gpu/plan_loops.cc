// PlanLoops: the facts the launch and pipeline planners decide from, for
// every top-level loop of the kernel body.
// 1. Resolve the loop's bounds through the top-level lets before it.
// 2. Prove how each bound moves along the x block index (trip_trend.h).
#include "compiler/codegen/gpu/planners.h"

namespace kiln::compiler::gpu {

void PlanLoops(const Kernel& k, KernelPlan* plan) {
  for (const Stmt& s : k.body) {
    auto* f = std::get_if<ForStmt>(&s.node);
    if (!f) continue;
    const std::map<std::string, Expr> lets = TopLevelLets(k, &s);
    LoopFacts facts;
    facts.loop = f;
    facts.var = f->var;
    facts.start = f->start ? ResolveLets(*f->start, lets) : Expr::Int(0);
    facts.stop = ResolveLets(f->stop, lets);
    if (!k.block_vars.empty()) {
      facts.start_along_x = TrendAlongBlock(k, facts.start, k.block_vars[0]);
      facts.stop_along_x = TrendAlongBlock(k, facts.stop, k.block_vars[0]);
    }
    plan->loops.push_back(std::move(facts));
  }
}

}  // namespace kiln::compiler::gpu
