// plan.fused_reductions: a row reduction of a thread-owned fragment fused
// with the `parallel` just before it that writes its source. TileLang's
// norms and softmax compute an element-wise temporary and reduce it at once
// (`A_pow_local = A_local * A_local; reduce_sum(A_pow_local)`, `exp_x =
// exp2(...); reduce_sum(exp_x)`); emitted apart, every element of the
// temporary is live between the two loops, which costs registers and so
// occupancy. Fused, each chunk's elements are computed and combined into
// the partials at once, so they die where they are made.
//
// 1. In every block, a `parallel` P directly followed by a `reduce` R.
// 2. R's source is a whole thread-owned fragment (fragment plan step 7),
//    reduced along its last dim.
// 3. P runs over that fragment's index space (as many variables as its
//    rank, the extents its dims), stores only into R's source and touches
//    no register accumulator. (So each element P stores is its own
//    thread's, stored by the iteration at that element, before R reads it;
//    a P writing other fragments too keeps them all live: not fused.)
// The emitter then emits nothing for P and, inside R's loop over the
// source's chunks, P's body at each element before combining it; barriers
// are placed for the accesses of both. R writes its destination only after
// the loop, so P's reads of it see the value from before, as written.
#include <functional>

#include "compiler/codegen/gpu/planners.h"
#include "compiler/ir/const_fold.h"

namespace kiln::compiler::gpu {
namespace {

// Calls `store` for every element store and `load` for every load in `b`.
void WalkStores(const Block& b,
                const std::function<void(const StoreStmt&)>& store,
                const std::function<void(const Expr&)>& load) {
  std::function<void(const Expr&)> ex = [&](const Expr& e) {
    if (e.kind == ExprKind::kLoad) load(e);
    for (const Expr& a : e.args) ex(a);
  };
  for (const Stmt& s : b) {
    if (auto* l = std::get_if<LetStmt>(&s.node)) {
      ex(l->value);
    } else if (auto* st = std::get_if<StoreStmt>(&s.node)) {
      store(*st);
      for (const Expr& i : st->indices) ex(i);
      ex(st->value);
    } else if (auto* i = std::get_if<IfStmt>(&s.node)) {
      ex(i->cond);
      WalkStores(i->then_body, store, load);
      WalkStores(i->else_body, store, load);
    } else if (auto* f = std::get_if<ForStmt>(&s.node)) {
      if (f->start) ex(*f->start);
      ex(f->stop);
      WalkStores(f->body, store, load);
    }
  }
}

bool Fusable(const ParallelStmt& p, const ReduceStmt& r,
             const FragmentPlan& frag) {
  auto own = frag.owned.find(r.src.name);
  if (own == frag.owned.end() || r.src.has_slices || r.dst.has_slices) {
    return false;
  }
  const OwnedFragment& o = own->second;
  if (r.dim != o.rank - 1) return false;
  const std::vector<int64_t>& dims = frag.tiles.at(r.src.name).dims;
  if (p.vars.size() != dims.size()) return false;
  for (size_t d = 0; d < dims.size(); ++d) {
    if (FoldInt(p.extents[d]) != dims[d]) return false;
  }
  bool ok = true, writes_src = false;
  WalkStores(
      p.body,
      [&](const StoreStmt& s) {
        if (s.name != r.src.name) ok = false;
        writes_src = true;
      },
      [&](const Expr& l) {
        if (frag.registers.count(l.name)) ok = false;
      });
  return ok && writes_src;
}

}  // namespace

const ReduceStmt* FusedReductionAfter(const Block& b, size_t i,
                                      const FragmentPlan& frag) {
  if (i + 1 >= b.size()) return nullptr;
  auto* p = std::get_if<ParallelStmt>(&b[i].node);
  auto* r = std::get_if<ReduceStmt>(&b[i + 1].node);
  return p && r && Fusable(*p, *r, frag) ? r : nullptr;
}

namespace {

void PlanBlock(const Block& b, KernelPlan* plan) {
  for (size_t i = 0; i < b.size(); ++i) {
    if (auto* f = std::get_if<ForStmt>(&b[i].node)) PlanBlock(f->body, plan);
    if (auto* c = std::get_if<IfStmt>(&b[i].node)) {
      PlanBlock(c->then_body, plan);
      PlanBlock(c->else_body, plan);
    }
    if (FusedReductionAfter(b, i, plan->fragments)) {
      plan->fused_reductions[&b[i + 1]] = &b[i];
    }
  }
}

}  // namespace

void PlanFusedReductions(const Kernel& k, KernelPlan* plan) {
  PlanBlock(k.body, plan);
}

}  // namespace kiln::compiler::gpu
