#include "compiler/ir/const_fold.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "compiler/ir/format.h"
#include "compiler/ir/printer.h"

namespace kiln::compiler {
namespace {

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();

std::optional<int64_t> FoldCall(const Expr& e, int depth);

std::optional<int64_t> Fold(const Expr& e, int depth) {
  if (depth > kMaxFoldDepth) return std::nullopt;
  switch (e.kind) {
    case ExprKind::kInt:
      return e.int_value;
    case ExprKind::kUnary: {
      if (e.args.size() != 1) return std::nullopt;
      std::optional<int64_t> a = Fold(e.args[0], depth + 1);
      if (!a) return std::nullopt;
      return FoldIntUnary(e.unary_op, *a);
    }
    case ExprKind::kBinary: {
      if (e.args.size() != 2) return std::nullopt;
      std::optional<int64_t> a = Fold(e.args[0], depth + 1);
      if (!a) return std::nullopt;
      std::optional<int64_t> b = Fold(e.args[1], depth + 1);
      if (!b) return std::nullopt;
      return FoldIntBinary(e.binary_op, *a, *b);
    }
    case ExprKind::kCall:
      return FoldCall(e, depth);
    default:
      return std::nullopt;
  }
}

std::optional<int64_t> FoldCall(const Expr& e, int depth) {
  std::vector<int64_t> v;
  for (const Expr& arg : e.args) {
    std::optional<int64_t> a = Fold(arg, depth + 1);
    if (!a) return std::nullopt;
    v.push_back(*a);
  }
  if (e.name == "abs" && v.size() == 1) {
    if (v[0] == kMin) return std::nullopt;
    return v[0] < 0 ? -v[0] : v[0];
  }
  if (v.size() != 2) return std::nullopt;
  if (e.name == "ceildiv") return CeilDiv(v[0], v[1]);
  if (e.name == "min") return std::min(v[0], v[1]);
  if (e.name == "max") return std::max(v[0], v[1]);
  return std::nullopt;
}

Expr FoldRec(const Expr& e, int depth) {
  if (depth > kMaxFoldDepth) return e;
  if (e.kind == ExprKind::kInt) return e;
  if (std::optional<int64_t> v = Fold(e, depth)) return Expr::Int(*v, e.loc);
  // Copy the node without its children, which are folded one by one (copying
  // the whole subtree first would make deep chains quadratic).
  Expr out;
  out.kind = e.kind;
  out.loc = e.loc;
  out.int_value = e.int_value;
  out.float_value = e.float_value;
  out.bool_value = e.bool_value;
  out.name = e.name;
  out.unary_op = e.unary_op;
  out.binary_op = e.binary_op;
  out.dtype = e.dtype;
  out.args.reserve(e.args.size());
  for (const Expr& arg : e.args) out.args.push_back(FoldRec(arg, depth + 1));
  return out;
}

}  // namespace

std::optional<int64_t> FloorDiv(int64_t a, int64_t b) {
  if (b == 0 || (a == kMin && b == -1)) return std::nullopt;
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

std::optional<int64_t> FloorMod(int64_t a, int64_t b) {
  if (b == 0) return std::nullopt;
  if (b == -1) return 0;  // a % -1 would trap for kMin
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

std::optional<int64_t> CeilDiv(int64_t a, int64_t b) {
  // ceildiv(a, b) == -floor(-a / b).
  if (a == kMin) return std::nullopt;
  std::optional<int64_t> q = FloorDiv(-a, b);
  if (!q || *q == kMin) return std::nullopt;
  return -*q;
}

std::optional<int64_t> FoldIntUnary(UnaryOp op, int64_t a) {
  switch (op) {
    case UnaryOp::kNeg:
      if (a == kMin) return std::nullopt;
      return -a;
    case UnaryOp::kBitNot:
      return ~a;
    case UnaryOp::kNot:
      return std::nullopt;  // bool, not int
  }
  return std::nullopt;
}

std::optional<int64_t> FoldIntBinary(BinaryOp op, int64_t a, int64_t b) {
  int64_t r = 0;
  switch (op) {
    case BinaryOp::kAdd:
      if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
      return r;
    case BinaryOp::kSub:
      if (__builtin_sub_overflow(a, b, &r)) return std::nullopt;
      return r;
    case BinaryOp::kMul:
      if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
      return r;
    case BinaryOp::kDiv:  // floor division on integers
      return FloorDiv(a, b);
    case BinaryOp::kMod:
      return FloorMod(a, b);
    case BinaryOp::kShl:
      // Defined as multiplication by 2^b, so an overflow is caught.
      if (b < 0 || b > 63) return std::nullopt;
      if (b == 63) return a == 0 ? std::optional<int64_t>(0) : std::nullopt;
      if (__builtin_mul_overflow(a, int64_t{1} << b, &r)) return std::nullopt;
      return r;
    case BinaryOp::kShr:
      if (b < 0 || b > 63) return std::nullopt;
      return a >> b;  // arithmetic shift (C++20)
    case BinaryOp::kBitAnd:
      return a & b;
    case BinaryOp::kBitOr:
      return a | b;
    case BinaryOp::kBitXor:
      return a ^ b;
    default:
      return std::nullopt;  // comparisons and logic are not int-valued
  }
}

std::optional<int64_t> FoldInt(const Expr& e) { return Fold(e, 0); }

namespace {

std::optional<bool> FoldBoolRec(const Expr& e, int depth) {
  if (depth > kMaxFoldDepth) return std::nullopt;
  if (e.kind == ExprKind::kBool) return e.bool_value;
  if (e.kind == ExprKind::kUnary && e.unary_op == UnaryOp::kNot &&
      e.args.size() == 1) {
    std::optional<bool> a = FoldBoolRec(e.args[0], depth + 1);
    if (!a) return std::nullopt;
    return !*a;
  }
  if (e.kind != ExprKind::kBinary || e.args.size() != 2) return std::nullopt;
  if (e.binary_op == BinaryOp::kAnd || e.binary_op == BinaryOp::kOr) {
    std::optional<bool> a = FoldBoolRec(e.args[0], depth + 1);
    std::optional<bool> b = FoldBoolRec(e.args[1], depth + 1);
    if (!a || !b) return std::nullopt;
    return e.binary_op == BinaryOp::kAnd ? (*a && *b) : (*a || *b);
  }
  std::optional<int64_t> a = FoldInt(e.args[0]);
  std::optional<int64_t> b = FoldInt(e.args[1]);
  if (!a || !b) return std::nullopt;
  switch (e.binary_op) {
    case BinaryOp::kEq:
      return *a == *b;
    case BinaryOp::kNe:
      return *a != *b;
    case BinaryOp::kLt:
      return *a < *b;
    case BinaryOp::kLe:
      return *a <= *b;
    case BinaryOp::kGt:
      return *a > *b;
    case BinaryOp::kGe:
      return *a >= *b;
    default:
      return std::nullopt;
  }
}

}  // namespace

std::optional<bool> FoldBool(const Expr& e) { return FoldBoolRec(e, 0); }

Expr FoldConstants(const Expr& e) { return FoldRec(e, 0); }

DimCompare CompareDims(const Expr& a, const Expr& b) {
  std::optional<int64_t> va = FoldInt(a);
  std::optional<int64_t> vb = FoldInt(b);
  if (va && vb) return *va == *vb ? DimCompare::kEqual : DimCompare::kDiffer;
  if (FoldConstants(a) == FoldConstants(b)) return DimCompare::kEqual;
  return DimCompare::kUnproven;
}

DimCompare CompareShapes(std::span<const Expr> a, std::span<const Expr> b) {
  if (a.size() != b.size()) return DimCompare::kDiffer;
  DimCompare result = DimCompare::kEqual;
  for (size_t i = 0; i < a.size(); ++i) {
    DimCompare c = CompareDims(a[i], b[i]);
    if (c == DimCompare::kDiffer) return c;
    if (c == DimCompare::kUnproven) result = c;
  }
  return result;
}

std::vector<Expr> DropUnitDims(std::span<const Expr> shape) {
  std::vector<Expr> out;
  for (const Expr& d : shape) {
    std::optional<int64_t> v = FoldInt(d);
    if (v && *v == 1) continue;
    out.push_back(d);
  }
  return out;
}

std::string ShapeToString(std::span<const Expr> shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ", ";
    out += Print(FoldConstants(shape[i]));
  }
  out += "]";
  return out;
}

}  // namespace kiln::compiler
