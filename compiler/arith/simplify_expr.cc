#include "compiler/arith/simplify_expr.h"

#include "compiler/arith/prover.h"
#include "compiler/ir/const_fold.h"

namespace kiln::compiler {
namespace {

bool IsInt(const Expr& e, int64_t v) {
  return e.kind == ExprKind::kInt && e.int_value == v;
}

}  // namespace

bool IsIndexExpr(const Expr& e, const IndexNames& names) {
  switch (e.kind) {
    case ExprKind::kInt:
      return true;
    case ExprKind::kVar:
      return names.count(e.name) > 0;
    case ExprKind::kUnary:
    case ExprKind::kBinary:
      if (e.kind == ExprKind::kUnary && e.unary_op == UnaryOp::kNot) {
        return false;
      }
      for (const Expr& a : e.args) {
        if (!IsIndexExpr(a, names)) return false;
      }
      return true;
    case ExprKind::kCall:
      if (e.name != "min" && e.name != "max" && e.name != "ceildiv")
        return false;
      for (const Expr& a : e.args) {
        if (!IsIndexExpr(a, names)) return false;
      }
      return true;
    default:
      return false;
  }
}

namespace {

bool IsCompare(const Expr& e) {
  if (e.kind != ExprKind::kBinary) return false;
  switch (e.binary_op) {
    case BinaryOp::kLt:
    case BinaryOp::kLe:
    case BinaryOp::kGt:
    case BinaryOp::kGe:
    case BinaryOp::kEq:
    case BinaryOp::kNe:
      return true;
    default:
      return false;
  }
}

Expr Simplify(const Expr& in, const IndexNames& names, Prover* prover,
              int depth) {
  if (depth > 256) return in;
  Expr e = in;
  for (Expr& a : e.args) a = Simplify(a, names, prover, depth + 1);
  e = FoldConstants(e);
  if (e.kind == ExprKind::kBinary && e.args.size() == 2 &&
      IsIndexExpr(e, names)) {
    Expr& a = e.args[0];
    Expr& b = e.args[1];
    switch (e.binary_op) {
      case BinaryOp::kAdd:
        if (IsInt(b, 0)) return a;
        if (IsInt(a, 0)) return b;
        // (x + c1) + c2 -> x + (c1 + c2)
        if (b.kind == ExprKind::kInt && a.kind == ExprKind::kBinary &&
            a.binary_op == BinaryOp::kAdd && a.args[1].kind == ExprKind::kInt) {
          int64_t sum;
          if (!__builtin_add_overflow(a.args[1].int_value, b.int_value, &sum)) {
            return Simplify(
                Expr::Binary(BinaryOp::kAdd, a.args[0], Expr::Int(sum), e.loc),
                names, prover, depth + 1);
          }
        }
        break;
      case BinaryOp::kSub:
        if (IsInt(b, 0)) return a;
        if (a == b) return Expr::Int(0, e.loc);
        break;
      case BinaryOp::kMul:
        if (IsInt(b, 1)) return a;
        if (IsInt(a, 1)) return b;
        if (IsInt(a, 0) || IsInt(b, 0)) return Expr::Int(0, e.loc);
        break;
      case BinaryOp::kDiv:
        if (IsInt(b, 1)) return a;
        break;
      case BinaryOp::kMod:
        if (IsInt(b, 1)) return Expr::Int(0, e.loc);
        break;
      default:
        break;
    }
  }
  if (e.kind == ExprKind::kBinary && e.args.size() == 2 &&
      (e.binary_op == BinaryOp::kAnd || e.binary_op == BinaryOp::kOr)) {
    const bool is_and = e.binary_op == BinaryOp::kAnd;
    for (int i = 0; i < 2; ++i) {
      const Expr& x = e.args[i];
      if (x.kind != ExprKind::kBool) continue;
      // true && y -> y, false && y -> false; false || y -> y, true || y -> true
      if (x.bool_value == is_and) return e.args[1 - i];
      return Expr::Bool(!is_and, e.loc);
    }
  }
  if (prover && IsCompare(e) && IsIndexExpr(e, names)) {
    if (prover->CanProve(e)) return Expr::Bool(true, e.loc);
    if (prover->CanProve(Expr::Unary(UnaryOp::kNot, e))) {
      return Expr::Bool(false, e.loc);
    }
  }
  if (e.kind == ExprKind::kCall && e.name == "select" && e.args.size() == 3 &&
      e.args[0].kind == ExprKind::kBool) {
    return e.args[0].bool_value ? e.args[1] : e.args[2];
  }
  return e;
}

}  // namespace

Expr SimplifyExpr(const Expr& e, const IndexNames& names, Prover* prover) {
  return Simplify(e, names, prover, 0);
}

}  // namespace kiln::compiler
