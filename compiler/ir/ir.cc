#include "compiler/ir/ir.h"

#include <cmath>
#include <utility>

#include "compiler/ir/assign_op.h"

namespace kiln::compiler {

bool Expr::operator==(const Expr& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case ExprKind::kInt:
      return int_value == o.int_value;
    case ExprKind::kFloat:
      // Bitwise-equal spellings: 0.0 and -0.0 differ, as they print.
      return float_value == o.float_value &&
             std::signbit(float_value) == std::signbit(o.float_value);
    case ExprKind::kBool:
      return bool_value == o.bool_value;
    case ExprKind::kVar:
      return name == o.name;
    case ExprKind::kUnary:
      return unary_op == o.unary_op && args == o.args;
    case ExprKind::kBinary:
      return binary_op == o.binary_op && args == o.args;
    case ExprKind::kCall:
    case ExprKind::kLoad:
      return name == o.name && args == o.args;
    case ExprKind::kCast:
      return dtype == o.dtype && args == o.args;
  }
  return false;
}

Expr Expr::Int(int64_t v, Loc loc) {
  Expr e;
  e.kind = ExprKind::kInt;
  e.int_value = v;
  e.loc = loc;
  return e;
}

Expr Expr::Float(double v, Loc loc) {
  Expr e;
  e.kind = ExprKind::kFloat;
  e.float_value = v;
  e.loc = loc;
  return e;
}

Expr Expr::Bool(bool v, Loc loc) {
  Expr e;
  e.kind = ExprKind::kBool;
  e.bool_value = v;
  e.loc = loc;
  return e;
}

Expr Expr::Var(std::string name, Loc loc) {
  Expr e;
  e.kind = ExprKind::kVar;
  e.name = std::move(name);
  e.loc = loc;
  return e;
}

Expr Expr::Unary(UnaryOp op, Expr a, Loc loc) {
  Expr e;
  e.kind = ExprKind::kUnary;
  e.unary_op = op;
  e.args.push_back(std::move(a));
  e.loc = loc;
  return e;
}

Expr Expr::Binary(BinaryOp op, Expr a, Expr b, Loc loc) {
  Expr e;
  e.kind = ExprKind::kBinary;
  e.binary_op = op;
  e.args.push_back(std::move(a));
  e.args.push_back(std::move(b));
  e.loc = loc;
  return e;
}

Expr Expr::Call(std::string name, std::vector<Expr> args, Loc loc) {
  Expr e;
  e.kind = ExprKind::kCall;
  e.name = std::move(name);
  e.args = std::move(args);
  e.loc = loc;
  return e;
}

Expr Expr::Cast(DType dtype, Expr a, Loc loc) {
  Expr e;
  e.kind = ExprKind::kCast;
  e.dtype = dtype;
  e.args.push_back(std::move(a));
  e.loc = loc;
  return e;
}

Expr Expr::Load(std::string name, std::vector<Expr> indices, Loc loc) {
  Expr e;
  e.kind = ExprKind::kLoad;
  e.name = std::move(name);
  e.args = std::move(indices);
  e.loc = loc;
  return e;
}

bool ParallelStmt::operator==(const ParallelStmt& o) const {
  return vars == o.vars && extents == o.extents && body == o.body;
}

bool ForStmt::operator==(const ForStmt& o) const {
  return var == o.var && loop == o.loop && start == o.start && stop == o.stop &&
         stages == o.stages && body == o.body;
}

bool IfStmt::operator==(const IfStmt& o) const {
  return cond == o.cond && then_body == o.then_body &&
         else_body == o.else_body && has_else == o.has_else;
}

const Kernel* Program::Find(std::string_view name) const {
  for (const Kernel& k : kernels) {
    if (k.name == name) return &k;
  }
  return nullptr;
}

std::string_view ScopeName(Scope s) {
  switch (s) {
    case Scope::kGlobal:
      return "global";
    case Scope::kShared:
      return "shared";
    case Scope::kFragment:
      return "fragment";
    case Scope::kLocal:
      return "local";
  }
  return "?";
}

std::string_view ReduceName(ReduceKind r) {
  switch (r) {
    case ReduceKind::kSum:
      return "sum";
    case ReduceKind::kMax:
      return "max";
    case ReduceKind::kMin:
      return "min";
    case ReduceKind::kAbsMax:
      return "absmax";
  }
  return "?";
}

std::string_view LoopName(LoopKind l) {
  switch (l) {
    case LoopKind::kSerial:
      return "serial";
    case LoopKind::kUnroll:
      return "unroll";
    case LoopKind::kPipelined:
      return "pipelined";
  }
  return "?";
}

std::string_view PolicyName(GemmPolicy p) {
  switch (p) {
    case GemmPolicy::kSquare:
      return "square";
    case GemmPolicy::kFullRow:
      return "full_row";
    case GemmPolicy::kFullCol:
      return "full_col";
  }
  return "?";
}

std::string_view BinaryOpSpelling(BinaryOp op) {
  switch (op) {
    case BinaryOp::kAdd:
      return "+";
    case BinaryOp::kSub:
      return "-";
    case BinaryOp::kMul:
      return "*";
    case BinaryOp::kDiv:
      return "/";
    case BinaryOp::kMod:
      return "%";
    case BinaryOp::kShl:
      return "<<";
    case BinaryOp::kShr:
      return ">>";
    case BinaryOp::kBitAnd:
      return "&";
    case BinaryOp::kBitOr:
      return "|";
    case BinaryOp::kBitXor:
      return "^";
    case BinaryOp::kEq:
      return "==";
    case BinaryOp::kNe:
      return "!=";
    case BinaryOp::kLt:
      return "<";
    case BinaryOp::kLe:
      return "<=";
    case BinaryOp::kGt:
      return ">";
    case BinaryOp::kGe:
      return ">=";
    case BinaryOp::kAnd:
      return "&&";
    case BinaryOp::kOr:
      return "||";
  }
  return "?";
}

std::string_view UnaryOpSpelling(UnaryOp op) {
  switch (op) {
    case UnaryOp::kNeg:
      return "-";
    case UnaryOp::kNot:
      return "!";
    case UnaryOp::kBitNot:
      return "~";
  }
  return "?";
}

std::string_view AssignOpSpelling(AssignOp op) {
  switch (op) {
    case AssignOp::kSet:
      return "=";
    case AssignOp::kAdd:
      return "+=";
    case AssignOp::kSub:
      return "-=";
    case AssignOp::kMul:
      return "*=";
    case AssignOp::kDiv:
      return "/=";
    case AssignOp::kMax:
      return "max=";
    case AssignOp::kMin:
      return "min=";
  }
  return "?";
}

std::optional<BinaryOp> CompoundBinaryOp(AssignOp op) {
  switch (op) {
    case AssignOp::kAdd:
      return BinaryOp::kAdd;
    case AssignOp::kSub:
      return BinaryOp::kSub;
    case AssignOp::kMul:
      return BinaryOp::kMul;
    case AssignOp::kDiv:
      return BinaryOp::kDiv;
    case AssignOp::kSet:
    case AssignOp::kMax:
    case AssignOp::kMin:
      break;
  }
  return std::nullopt;
}

std::string_view CompoundBuiltin(AssignOp op) {
  if (op == AssignOp::kMax) return "max";
  if (op == AssignOp::kMin) return "min";
  return {};
}

bool HasAtomicForm(AssignOp op) {
  return op == AssignOp::kAdd || op == AssignOp::kMax || op == AssignOp::kMin;
}

Expr CompoundValue(AssignOp op, Expr current, Expr value) {
  const Loc loc = value.loc;
  if (std::optional<BinaryOp> b = CompoundBinaryOp(op)) {
    return Expr::Binary(*b, std::move(current), std::move(value), loc);
  }
  return Expr::Call(std::string(CompoundBuiltin(op)),
                    {std::move(current), std::move(value)}, loc);
}

}  // namespace kiln::compiler
