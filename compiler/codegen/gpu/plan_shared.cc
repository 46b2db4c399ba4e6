// PlanSharedLives: shared tiles whose lives do not overlap may share bytes
// (a kernel's output staging tile over its input tiles, dead by then),
// where nothing reads shared memory asynchronously behind the block's
// barriers: no warp specialisation, no wgmma. A tile's life is the range of
// the kernel body's top-level statements that use it (an alloc is not a
// use; a tile allocated inside a nested block lives in that statement).
// The emitter places tiles first-fit among those whose lives meet.
#include <functional>

#include "compiler/codegen/gpu/planners.h"
#include "compiler/codegen/gpu/stmt_access.h"

namespace kiln::compiler::gpu {

namespace {

void ForEachAlloc(const Stmt& s,
                  const std::function<void(const AllocStmt&)>& fn) {
  if (auto* a = std::get_if<AllocStmt>(&s.node)) fn(*a);
  auto block = [&](const Block& b) {
    for (const Stmt& t : b) ForEachAlloc(t, fn);
  };
  if (auto* f = std::get_if<ForStmt>(&s.node)) block(f->body);
  if (auto* i = std::get_if<IfStmt>(&s.node)) {
    block(i->then_body);
    block(i->else_body);
  }
}

}  // namespace

void PlanSharedLives(const Kernel& k, KernelPlan* plan) {
  SharedPlan& sp = plan->shared;
  sp.alias = !plan->WarpSpecialised() && plan->fragments.wgmma_tiles.empty();
  if (!sp.alias) return;
  std::set<std::string> shared;
  for (const Stmt& s : k.body) {
    ForEachAlloc(s, [&](const AllocStmt& a) {
      if (a.scope == Scope::kShared) shared.insert(a.name);
    });
  }
  const BufferPred is_shared = [&](const std::string& n) {
    return shared.count(n) > 0;
  };
  for (int i = 0; i < static_cast<int>(k.body.size()); ++i) {
    const Stmt& s = k.body[i];
    std::set<std::string> used;
    if (!std::holds_alternative<AllocStmt>(s.node)) {
      std::set<std::string> w;
      StmtAccesses(s, plan->fragments, is_shared, &used, &w);
      used.insert(w.begin(), w.end());
      ForEachAlloc(s, [&](const AllocStmt& a) { used.insert(a.name); });
    }
    for (const std::string& n : used) {
      if (!shared.count(n)) continue;
      auto it = sp.lives.find(n);
      if (it == sp.lives.end()) {
        sp.lives[n] = {i, i};
      } else {
        it->second.second = i;
      }
    }
  }
}

}  // namespace kiln::compiler::gpu
