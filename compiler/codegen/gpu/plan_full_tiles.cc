// PlanFullTiles: serial loops split into the iterations whose tiles are
// whole and the edge ones, so that a kernel over run-time shapes runs the
// same straight-line body a kernel over constant shapes does.
// 1. Every `serial` loop outside `parallel` bodies (not a ring's, not
//    unrolled) with no gemm in its body (the body is printed twice).
// 2. Its candidate copies: at the top level of the body, between a tensor
//    and a whole thread-owned fragment (fragment_plan.h), the tensor
//    region's starts (the body's lets before the copy resolved, none
//    loading memory) affine in the loop variable with a literal
//    coefficient of 0 or more and its extents constants.
// 3. The first part's end: the loop's stop, lowered for each dim moving
//    with the loop variable (start a * v + b, extent n, size D) to
//    floor((D - n - b) / a) + 1, the last iteration with the region inside;
//    the loop's start where a dim not moving with it, or a moving dim's
//    first start, is outside. The regions at the first two iterations are
//    recorded for the printer's alignment test (a start affine in the loop
//    variable moves by a constant step: aligned at two consecutive
//    iterations, aligned at every one).
// 4. The facts: every candidate region inside its tensor, over the loop
//    variable. A loop whose body binds a name the facts use (a shadowing
//    let or index) is not split: the facts would read it wrongly.
#include "compiler/codegen/gpu/kernel_source_internal.h"
#include "compiler/codegen/gpu/planners.h"
#include "compiler/ir/const_fold.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/rewrite.h"

namespace kiln::compiler::gpu {
namespace {

bool Loads(const Expr& e) {
  if (e.kind == ExprKind::kLoad) return true;
  for (const Expr& a : e.args) {
    if (Loads(a)) return true;
  }
  return false;
}

Expr Bin(BinaryOp op, Expr a, Expr b) {
  if ((op == BinaryOp::kAdd || op == BinaryOp::kSub) &&
      b.kind == ExprKind::kInt && b.int_value == 0) {
    return a;
  }
  return FoldConstants(Expr::Binary(op, std::move(a), std::move(b)));
}

// Appends `e` unless it is already there (two copies of one row block).
void AddOnce(std::vector<Expr>* v, Expr e) {
  for (const Expr& x : *v) {
    if (Print(x) == Print(e)) return;
  }
  v->push_back(std::move(e));
}

struct FullTilesPlanner {
  const Kernel& k;
  KernelPlan* plan;
  std::map<std::string, const Param*> tensors;

  // The copy's tensor side and owned side, when it is a candidate's.
  const Region* TensorSide(const CopyStmt& c) const {
    const auto& owned = plan->fragments.owned;
    if (tensors.count(c.src.name) && owned.count(c.dst.name)) return &c.src;
    if (tensors.count(c.dst.name) && owned.count(c.src.name)) return &c.dst;
    return nullptr;
  }

  void Loop(const ForStmt& f) {
    if (f.loop != LoopKind::kSerial || plan->RingOf(&f) || plan->ws.loop == &f)
      return;
    for (const Stmt& s : f.body) {
      if (std::holds_alternative<GemmStmt>(s.node)) return;
    }
    FullTilesPlan out;
    out.loop = &f;
    const Expr start = f.start ? *f.start : Expr::Int(0);
    const Expr var = Expr::Var(f.var);
    Expr stop = f.stop;
    std::vector<Expr> invariant;  // conditions free of the loop variable
    std::vector<Expr> lasts;      // per moving dim: its last whole iteration
    std::map<std::string, Expr> lets;
    for (const Stmt& s : f.body) {
      if (auto* l = std::get_if<LetStmt>(&s.node)) {
        lets[l->name] = Substitute(l->value, lets);
        continue;
      }
      auto* c = std::get_if<CopyStmt>(&s.node);
      const Region* r = c ? TensorSide(*c) : nullptr;
      if (!r) continue;
      const Param& t = *tensors.at(r->name);
      if (r->has_slices && r->slices.size() != t.shape.size()) continue;
      struct Dim {
        int64_t step = 0;
        Expr rest, start;
        int64_t span = 0;
      };
      std::vector<Dim> dims;
      bool ok = true;
      for (size_t d = 0; d < t.shape.size() && ok; ++d) {
        const Slice* sl = r->has_slices ? &r->slices[d] : nullptr;
        if (!sl || sl->kind == Slice::Kind::kFull) {
          dims.push_back({0, Expr::Int(0), Expr::Int(0), -1});
          continue;
        }
        Dim dim;
        dim.start = FoldConstants(Substitute(sl->start, lets));
        if (sl->kind == Slice::Kind::kRange) {
          auto n = FoldInt(sl->extent);
          if (!n || *n < 1) ok = false;
          dim.span = n.value_or(0);
        } else {
          dim.span = 1;
        }
        auto split = internal::AffineSplit(dim.start, f.var);
        if (!split || split->first < 0 || Loads(dim.start)) ok = false;
        if (split) {
          dim.step = split->first;
          dim.rest = split->second;
        }
        dims.push_back(dim);
      }
      if (!ok) continue;
      std::vector<Slice> at0, at1;
      for (size_t d = 0; d < dims.size(); ++d) {
        const Dim& dim = dims[d];
        if (dim.span < 0) continue;  // a whole dim
        const Expr& size = t.shape[d];
        const Expr lo = Bin(BinaryOp::kLe, Expr::Int(0), dim.start);
        const Expr hi =
            Bin(BinaryOp::kLe,
                Bin(BinaryOp::kAdd, dim.start, Expr::Int(dim.span)), size);
        AddOnce(&out.facts, lo);
        AddOnce(&out.facts, hi);
        if (dim.step == 0) {
          AddOnce(&invariant, lo);
          AddOnce(&invariant, hi);
          continue;
        }
        // (The start rises with the loop variable: inside at the first
        // iteration from below, and up to the last one fitting.)
        const Expr first_lo = FoldConstants(Substitute(lo, {{f.var, start}}));
        if (FoldBool(first_lo) != std::optional<bool>(true)) {
          AddOnce(&invariant, first_lo);
        }
        const Expr last = Bin(
            BinaryOp::kAdd,
            Bin(BinaryOp::kDiv,
                Bin(BinaryOp::kSub,
                    Bin(BinaryOp::kSub, size, Expr::Int(dim.span)), dim.rest),
                Expr::Int(dim.step)),
            Expr::Int(1));
        AddOnce(&lasts, last);
      }
      Region first = *r, second = *r;
      const Expr next = Bin(BinaryOp::kAdd, start, Expr::Int(1));
      for (size_t d = 0; d < first.slices.size(); ++d) {
        if (first.slices[d].kind == Slice::Kind::kFull) continue;
        first.slices[d].start =
            FoldConstants(Substitute(dims[d].start, {{f.var, start}}));
        second.slices[d].start =
            FoldConstants(Substitute(dims[d].start, {{f.var, next}}));
      }
      out.copies.push_back(&s);
      out.first.push_back(std::move(first));
      out.second.push_back(std::move(second));
    }
    if (out.copies.empty()) return;
    // A name the facts use bound again inside the body.
    std::set<std::string> used, declared, in_facts;
    internal::CollectUses(f.body, &used, &declared);
    for (const Expr& e : out.facts) internal::ExprUses(e, &in_facts);
    for (const std::string& n : declared) {
      if (in_facts.count(n) || n == f.var) return;
    }
    for (const Expr& e : lasts) {
      stop = FoldConstants(Expr::Call("min", {stop, e}));
    }
    std::optional<Expr> inside;
    for (const Expr& e : invariant) {
      inside = inside ? Bin(BinaryOp::kAnd, *inside, e) : e;
    }
    const Expr bounded = FoldConstants(Expr::Call("max", {start, stop}));
    auto known = inside ? FoldBool(*inside) : std::optional<bool>(true);
    out.full_stop =
        known ? (*known ? bounded : start)
              : FoldConstants(Expr::Call("select", {*inside, bounded, start}));
    plan->full_tiles.push_back(std::move(out));
  }

  void Block(const kiln::compiler::Block& b) {
    for (const Stmt& s : b) {
      if (auto* f = std::get_if<ForStmt>(&s.node)) {
        Loop(*f);
        Block(f->body);
      } else if (auto* i = std::get_if<IfStmt>(&s.node)) {
        Block(i->then_body);
        Block(i->else_body);
      }
    }
  }
};

}  // namespace

void PlanFullTiles(const Kernel& k, KernelPlan* plan) {
  FullTilesPlanner p{k, plan, {}};
  for (const Param& param : k.params) {
    if (param.is_tensor) p.tensors[param.name] = &param;
  }
  p.Block(k.body);
}

}  // namespace kiln::compiler::gpu
