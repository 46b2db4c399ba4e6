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
// `e % c` into a dim of at least c); the simplify pass (CPU) drops the rest
// where the prover shows them true, and the GPU emitter hoists the linear
// ones into one test per statement.
#include <map>

#include "compiler/ir/const_fold.h"
#include "compiler/passes/passes.h"

namespace kiln::compiler {
namespace {

class Guarder {
 public:
  explicit Guarder(const Kernel& k) {
    for (const Param& p : k.params) {
      if (p.is_tensor) tensors_[p.name] = &p;
    }
  }

  Expr InRange(const Param& p, const std::vector<Expr>& idx) const {
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
      if (!i || *i < 0) conj(Expr::Binary(BinaryOp::kLe, Expr::Int(0), idx[d]));
      if (!i || !dim || *i >= *dim) {
        conj(Expr::Binary(BinaryOp::kLt, idx[d], p.shape[d]));
      }
    }
    return g;
  }

  static Expr Zero(DType t) {
    if (t == DType::kBool) return Expr::Bool(false);
    return Expr::Cast(t, Expr::Int(0));
  }

  void Rewrite(Expr& e) const {
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

  void Rewrite(Region& r) const {
    for (Slice& s : r.slices) {
      if (s.kind != Slice::Kind::kFull) Rewrite(s.start);
      if (s.kind == Slice::Kind::kRange) Rewrite(s.extent);
    }
  }

  void Rewrite(Block& b) const {
    for (Stmt& s : b) {
      std::visit(
          [&](auto& n) {
            using T = std::decay_t<decltype(n)>;
            if constexpr (std::is_same_v<T, LetStmt>) {
              Rewrite(n.value);
            } else if constexpr (std::is_same_v<T, StoreStmt>) {
              for (Expr& i : n.indices) Rewrite(i);
              Rewrite(n.value);
            } else if constexpr (std::is_same_v<T, IfStmt>) {
              Rewrite(n.cond);
              Rewrite(n.then_body);
              Rewrite(n.else_body);
            } else if constexpr (std::is_same_v<T, ForStmt>) {
              if (n.start) Rewrite(*n.start);
              Rewrite(n.stop);
              Rewrite(n.body);
            } else if constexpr (std::is_same_v<T, ParallelStmt>) {
              Rewrite(n.body);
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
  }

 private:
  std::map<std::string, const Param*> tensors_;
};

class GuardTensorElementsPass : public Pass {
 public:
  std::string_view name() const override { return "guard-tensor-elements"; }
  absl::Status Run(Kernel& k, PassContext&) override {
    Guarder(k).Rewrite(k.body);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Pass> CreateGuardTensorElementsPass() {
  return std::make_unique<GuardTensorElementsPass>();
}

}  // namespace kiln::compiler
