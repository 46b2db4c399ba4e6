// Tensor element accesses made safe on every target (tile-ir.md §8): an
// element load of a tensor reads zero, and an element store is skipped,
// where any index is outside its dim.
//
// 1. Every load `T[i, ...]` of a tensor, anywhere in the body (lets,
//    stores, conditions, loop bounds, region starts), innermost first,
//    becomes `select(in_range, T[i, ...], T-typed 0)`; the back ends
//    evaluate a select's branches lazily (CPU: a branch; GPU: `?:`).
// 2. Every store `T[i, ...] = v` into a tensor (allowed in `parallel`
//    bodies) becomes `if in_range { T[i, ...] = v }`.
// `in_range` is the conjunction over dims of `0 <= i` and `i < dim`,
// leaving out the conjuncts that constants decide (a constant index, or
// `e % c` into a dim of at least c) and those the prover shows true from
// the facts in scope, as the simplify pass gathers them: symbols >= 0,
// block indices in the grid, `assume`s, loop and parallel variables in
// their ranges, the conditions of enclosing `if`s, index lets (so
// `if col < N { ... W[col] ... }` tests nothing more). The GPU emitter
// hoists the linear ones left into one test per statement.
#include <map>

#include "compiler/arith/prover.h"
#include "compiler/arith/simplify_expr.h"
#include "compiler/ir/const_fold.h"
#include "compiler/passes/kernel_facts.h"
#include "compiler/passes/passes.h"

namespace kiln::compiler {
namespace {

class Guarder {
 public:
  Guarder(const Kernel& k, Prover* prover) : prover_(prover) {
    for (const Param& p : k.params) {
      if (p.is_tensor) tensors_[p.name] = &p;
    }
  }

  // The kernel-wide facts, then the body.
  void Run(Kernel& k) {
    prover_->Push();
    AddSymbolFacts(k, prover_, &names_);
    for (const Expr& a : k.assumptions) prover_->AddFact(a);
    AddBlockRanges(k, prover_, &names_);
    Rewrite(k.body);
    prover_->Pop();
  }

  bool Proven(const Expr& c) {
    return IsIndexExpr(c, names_) && prover_->CanProve(c);
  }

  Expr InRange(const Param& p, const std::vector<Expr>& idx) {
    Expr g = Expr::Bool(true);
    auto conj = [&](Expr c) {
      g = g.kind == ExprKind::kBool
              ? std::move(c)
              : Expr::Binary(BinaryOp::kAnd, std::move(g), std::move(c));
    };
    for (size_t d = 0; d < idx.size() && d < p.shape.size(); ++d) {
      const auto i = FoldInt(idx[d]);
      const auto dim = FoldInt(p.shape[d]);
      // `e % c` (floor modulo) with c > 0 is in [0, c).
      if (idx[d].kind == ExprKind::kBinary &&
          idx[d].binary_op == BinaryOp::kMod && dim) {
        const auto c = FoldInt(idx[d].args[1]);
        if (c && *c > 0 && *c <= *dim) continue;
      }
      if (!i || *i < 0) {
        Expr lo = Expr::Binary(BinaryOp::kLe, Expr::Int(0), idx[d]);
        if (!Proven(lo)) conj(std::move(lo));
      }
      if (!i || !dim || *i >= *dim) {
        Expr hi = Expr::Binary(BinaryOp::kLt, idx[d], p.shape[d]);
        if (!Proven(hi)) conj(std::move(hi));
      }
    }
    return g;
  }

  static Expr Zero(DType t) {
    if (t == DType::kBool) return Expr::Bool(false);
    return Expr::Cast(t, Expr::Int(0));
  }

  void Rewrite(Expr& e) {
    for (Expr& a : e.args) Rewrite(a);
    if (e.kind != ExprKind::kLoad) return;
    auto it = tensors_.find(e.name);
    if (it == tensors_.end()) return;
    Expr guard = InRange(*it->second, e.args);
    if (guard.kind == ExprKind::kBool) return;  // constants in range
    const Loc loc = e.loc;
    Expr load = std::move(e);
    e = Expr::Call("select",
                   {std::move(guard), std::move(load), Zero(it->second->dtype)},
                   loc);
  }

  void Rewrite(Region& r) {
    for (Slice& s : r.slices) {
      if (s.kind != Slice::Kind::kFull) Rewrite(s.start);
      if (s.kind == Slice::Kind::kRange) Rewrite(s.extent);
    }
  }

  void Rewrite(Block& b) {
    prover_->Push();  // lets are visible to the end of their block
    for (Stmt& s : b) {
      std::visit(
          [&](auto& n) {
            using T = std::decay_t<decltype(n)>;
            if constexpr (std::is_same_v<T, LetStmt>) {
              Rewrite(n.value);
              AddLetFact(n.name, n.value, prover_, &names_);
            } else if constexpr (std::is_same_v<T, StoreStmt>) {
              for (Expr& i : n.indices) Rewrite(i);
              Rewrite(n.value);
            } else if constexpr (std::is_same_v<T, IfStmt>) {
              Rewrite(n.cond);
              const bool fact = IsIndexExpr(n.cond, names_);
              prover_->Push();
              if (fact) prover_->AddFact(n.cond);
              Rewrite(n.then_body);
              prover_->Pop();
              prover_->Push();
              if (fact) {
                prover_->AddFact(Expr::Unary(UnaryOp::kNot, n.cond));
              }
              Rewrite(n.else_body);
              prover_->Pop();
            } else if constexpr (std::is_same_v<T, ForStmt>) {
              if (n.start) Rewrite(*n.start);
              Rewrite(n.stop);
              prover_->Push();
              names_.insert(n.var);
              prover_->AddRange(n.var, n.start ? *n.start : Expr::Int(0),
                                n.stop);
              Rewrite(n.body);
              prover_->Pop();
            } else if constexpr (std::is_same_v<T, ParallelStmt>) {
              prover_->Push();
              AddParallelRanges(n, prover_, &names_);
              Rewrite(n.body);
              prover_->Pop();
            } else if constexpr (std::is_same_v<T, CopyStmt>) {
              Rewrite(n.src);
              Rewrite(n.dst);
            } else if constexpr (std::is_same_v<T, FillStmt>) {
              Rewrite(n.dst);
              Rewrite(n.value);
            } else if constexpr (std::is_same_v<T, GemmStmt>) {
              Rewrite(n.a);
              Rewrite(n.b);
              Rewrite(n.c);
            } else if constexpr (std::is_same_v<T, ReduceStmt> ||
                                 std::is_same_v<T, CumsumStmt> ||
                                 std::is_same_v<T, AtomicAddStmt>) {
              Rewrite(n.src);
              Rewrite(n.dst);
            } else if constexpr (std::is_same_v<T, RasterizeStmt>) {
              Rewrite(n.panel);
            }
          },
          s.node);
      // A store into a tensor: skipped out of range.
      if (auto* st = std::get_if<StoreStmt>(&s.node)) {
        auto it = tensors_.find(st->name);
        if (it == tensors_.end()) continue;
        Expr guard = InRange(*it->second, st->indices);
        if (guard.kind == ExprKind::kBool) continue;
        IfStmt wrap;
        wrap.cond = std::move(guard);
        Stmt inner;
        inner.loc = s.loc;
        inner.node = std::move(*st);
        wrap.then_body.push_back(std::move(inner));
        s.node = std::move(wrap);
      }
    }
    prover_->Pop();
  }

 private:
  std::map<std::string, const Param*> tensors_;
  Prover* prover_;
  IndexNames names_;
};

class GuardTensorElementsPass : public Pass {
 public:
  std::string_view name() const override { return "guard-tensor-elements"; }
  absl::Status Run(Kernel& k, PassContext& ctx) override {
    Guarder(k, ctx.prover).Run(k);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Pass> CreateGuardTensorElementsPass() {
  return std::make_unique<GuardTensorElementsPass>();
}

}  // namespace kiln::compiler
