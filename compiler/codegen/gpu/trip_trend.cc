// 1. Resolve the expression's lets (TopLevelLets, ResolveLets).
// 2. Monotone composition: sums, differences, products and quotients by
//    non-negative constants, min, max and ceildiv by a positive constant of
//    rising (or falling) terms move the same way. Decides the common forms
//    without a solver.
// 3. Otherwise the prover, with the block index ranging over all but the
//    last block (x + 1 stays in the grid), the other block indices over the
//    grid, symbols non-negative and the kernel's assumptions: x + 1 gives
//    the same value (constant), no less (rising) or no more (falling).
#include "compiler/codegen/gpu/trip_trend.h"

#include "compiler/arith/prover.h"
#include "compiler/codegen/gpu/kernel_source_internal.h"
#include "compiler/ir/const_fold.h"
#include "compiler/ir/rewrite.h"

namespace kiln::compiler::gpu {

namespace {

Trend Flip(Trend t) {
  if (t == Trend::kRising) return Trend::kFalling;
  if (t == Trend::kFalling) return Trend::kRising;
  return t;
}

// Two terms moving in these directions, added.
Trend Both(Trend a, Trend b) {
  if (a == Trend::kConstant) return b;
  if (b == Trend::kConstant) return a;
  return a == b ? a : Trend::kUnknown;
}

bool ConstAtLeast(const Expr& x, int64_t lo) {
  auto c = FoldInt(x);
  return c && *c >= lo;
}

// Step 2; names outside `fixed` (other than `v`) are kUnknown.
Trend Compose(const Expr& e, const std::string& v,
              const std::set<std::string>& fixed) {
  switch (e.kind) {
    case ExprKind::kInt:
      return Trend::kConstant;
    case ExprKind::kVar:
      if (e.name == v) return Trend::kRising;
      return fixed.count(e.name) ? Trend::kConstant : Trend::kUnknown;
    case ExprKind::kUnary:
      if (e.unary_op == UnaryOp::kNeg)
        return Flip(Compose(e.args[0], v, fixed));
      return Trend::kUnknown;
    case ExprKind::kBinary: {
      const Trend a = Compose(e.args[0], v, fixed);
      const Trend b = Compose(e.args[1], v, fixed);
      if (a == Trend::kUnknown || b == Trend::kUnknown) return Trend::kUnknown;
      switch (e.binary_op) {
        case BinaryOp::kAdd:
          return Both(a, b);
        case BinaryOp::kSub:
          return Both(a, Flip(b));
        case BinaryOp::kMul:
          if (b == Trend::kConstant && ConstAtLeast(e.args[1], 0)) return a;
          if (a == Trend::kConstant && ConstAtLeast(e.args[0], 0)) return b;
          return a == Trend::kConstant && b == Trend::kConstant
                     ? Trend::kConstant
                     : Trend::kUnknown;
        case BinaryOp::kDiv:
          if (b == Trend::kConstant && ConstAtLeast(e.args[1], 1)) return a;
          return a == Trend::kConstant && b == Trend::kConstant
                     ? Trend::kConstant
                     : Trend::kUnknown;
        default:
          return a == Trend::kConstant && b == Trend::kConstant
                     ? Trend::kConstant
                     : Trend::kUnknown;
      }
    }
    case ExprKind::kCall: {
      Trend t = Trend::kConstant;
      for (const Expr& a : e.args) {
        const Trend ta = Compose(a, v, fixed);
        if (ta == Trend::kUnknown) return Trend::kUnknown;
        t = Both(t, ta);
      }
      if (t == Trend::kConstant) return t;
      if (e.name == "min" || e.name == "max") return t;
      if (e.name == "ceildiv" && e.args.size() == 2 &&
          Compose(e.args[1], v, fixed) == Trend::kConstant &&
          ConstAtLeast(e.args[1], 1)) {
        return t;
      }
      return Trend::kUnknown;
    }
    default: {
      std::set<std::string> used;
      internal::ExprUses(e, &used);
      return used.count(v) ? Trend::kUnknown : Trend::kConstant;
    }
  }
}

}  // namespace

std::string_view TrendName(Trend t) {
  switch (t) {
    case Trend::kConstant:
      return "constant";
    case Trend::kRising:
      return "rising";
    case Trend::kFalling:
      return "falling";
    case Trend::kUnknown:
      break;
  }
  return "unknown";
}

std::map<std::string, Expr> TopLevelLets(const Kernel& k, const Stmt* before) {
  std::map<std::string, Expr> lets;
  for (const Stmt& s : k.body) {
    if (&s == before) break;
    if (auto* l = std::get_if<LetStmt>(&s.node)) {
      lets[l->name] = ResolveLets(l->value, lets);
    }
  }
  return lets;
}

Expr ResolveLets(const Expr& e, const std::map<std::string, Expr>& lets) {
  return lets.empty() ? e : Substitute(e, lets);
}

Trend TrendAlongBlock(const Kernel& k, const Expr& e,
                      const std::string& block_var) {
  std::set<std::string> used;
  internal::ExprUses(e, &used);
  if (!used.count(block_var)) return Trend::kConstant;
  std::set<std::string> fixed(k.block_vars.begin(), k.block_vars.end());
  fixed.erase(block_var);
  for (const Param& p : k.params) fixed.insert(p.name);
  for (const Param& p : k.params) {
    for (const Expr& d : p.shape) {
      if (d.kind == ExprKind::kVar) fixed.insert(d.name);
    }
  }
  const Trend composed = Compose(e, block_var, fixed);
  if (composed != Trend::kUnknown) return composed;
  for (const std::string& u : used) {
    if (u != block_var && !fixed.count(u)) return Trend::kUnknown;
  }

  Prover prover;
  for (const Param& p : k.params) {
    for (const Expr& d : p.shape) {
      if (d.kind == ExprKind::kVar) {
        prover.AddFact(Expr::Binary(BinaryOp::kGe, d, Expr::Int(0)));
      }
    }
  }
  for (const Expr& a : k.assumptions) prover.AddFact(a);
  for (size_t d = 0; d < k.block_vars.size() && d < k.grid.size(); ++d) {
    const std::string& b = k.block_vars[d];
    prover.AddRange(b, Expr::Int(0),
                    b == block_var
                        ? Expr::Binary(BinaryOp::kSub, k.grid[d], Expr::Int(1))
                        : k.grid[d]);
  }
  const Expr next = Substitute(
      e, {{block_var,
           Expr::Binary(BinaryOp::kAdd, Expr::Var(block_var), Expr::Int(1))}});
  if (prover.CanProve(Expr::Binary(BinaryOp::kEq, next, e))) {
    return Trend::kConstant;
  }
  if (prover.CanProve(Expr::Binary(BinaryOp::kGe, next, e))) {
    return Trend::kRising;
  }
  if (prover.CanProve(Expr::Binary(BinaryOp::kLe, next, e))) {
    return Trend::kFalling;
  }
  return Trend::kUnknown;
}

}  // namespace kiln::compiler::gpu
