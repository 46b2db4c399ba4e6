#include "compiler/ir/type_check.h"

#include <array>
#include <utility>

#include "compiler/ir/const_fold.h"
#include "compiler/ir/format.h"

namespace kiln::compiler {
namespace {

// Float dtypes ranked for unification: f64 > f32 > every narrow float.
int FloatRank(DType t) {
  if (t == DType::kF64) return 2;
  if (t == DType::kF32) return 1;
  return 0;
}

std::string Pair(Type a, Type b) {
  return StrCat(a.ToString(), " and ", b.ToString());
}

bool IsComparison(BinaryOp op) {
  switch (op) {
    case BinaryOp::kEq:
    case BinaryOp::kNe:
    case BinaryOp::kLt:
    case BinaryOp::kLe:
    case BinaryOp::kGt:
    case BinaryOp::kGe:
      return true;
    default:
      return false;
  }
}

constexpr std::array<std::string_view, 13> kMathFunctions = {
    "exp",     "exp2", "log",   "log2", "sqrt",  "rsqrt", "tanh",
    "sigmoid", "erf",  "floor", "ceil", "round", "trunc"};

bool IsMathFunction(std::string_view name) {
  for (std::string_view f : kMathFunctions) {
    if (f == name) return true;
  }
  return false;
}

}  // namespace

std::optional<DType> FromBitsDType(std::string_view name) {
  constexpr std::string_view kPrefix = "from_bits_";
  if (name.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::optional<DType> d = ParseDType(name.substr(kPrefix.size()));
  if (!d || !IsFloat(*d)) return std::nullopt;
  return d;
}

namespace {

// Number of arguments of a builtin, or -1 for an unknown name.
int BuiltinArity(std::string_view name) {
  if (name == "abs" || name == "isnan" || name == "isinf" || name == "bits" ||
      FromBitsDType(name) || IsMathFunction(name)) {
    return 1;
  }
  if (name == "ceildiv" || name == "min" || name == "max") return 2;
  if (name == "fma" || name == "select" || name == "if_then_else") return 3;
  return -1;
}

std::string ArgList(std::span<const Type> args) {
  std::string out;
  for (size_t i = 0; i < args.size(); ++i) {
    if (i > 0) StrAppend(&out, i + 1 == args.size() ? " and " : ", ");
    StrAppend(&out, args[i].ToString());
  }
  return out;
}

}  // namespace

bool Type::IsInteger() const {
  return kind == Kind::kInt ||
         (kind == Kind::kDType && kiln::compiler::IsInteger(dtype));
}

bool Type::IsFloat() const {
  return kind == Kind::kFloat ||
         (kind == Kind::kDType && kiln::compiler::IsFloat(dtype));
}

std::string Type::ToString() const {
  switch (kind) {
    case Kind::kError:
      return "<error>";
    case Kind::kInt:
      return "int";
    case Kind::kFloat:
      return "float";
    case Kind::kDType:
      return std::string(DTypeName(dtype));
  }
  return "?";
}

Type UnifyNumbers(Type a, Type b) {
  if (!a.IsNumber() || !b.IsNumber()) return Type::Error();
  if (a.kind == Type::Kind::kInt) return b;
  if (b.kind == Type::Kind::kInt) return a;
  if (a.kind == Type::Kind::kFloat) return b.IsFloat() ? b : a;
  if (b.kind == Type::Kind::kFloat) return a.IsFloat() ? a : b;
  // Two dtypes.
  if (a.dtype == b.dtype) return a;
  if (a.IsFloat() && b.IsFloat()) {
    int ra = FloatRank(a.dtype), rb = FloatRank(b.dtype);
    if (ra == 0 && rb == 0) return Type::Of(DType::kF32);
    return ra >= rb ? a : b;
  }
  if (a.IsFloat()) return a;
  if (b.IsFloat()) return b;
  int bits_a = DTypeBits(a.dtype), bits_b = DTypeBits(b.dtype);
  if (bits_a != bits_b) return bits_a > bits_b ? a : b;
  return IsSigned(a.dtype) ? b : a;
}

Type UnaryResultType(UnaryOp op, Type a, std::string* error) {
  if (a.IsError()) return a;
  std::string_view spelling = UnaryOpSpelling(op);
  switch (op) {
    case UnaryOp::kNeg:
      if (a.IsNumber()) return a;
      *error = StrCat("'-' needs a number; found ", a.ToString());
      break;
    case UnaryOp::kNot:
      if (a.IsBool()) return a;
      *error = StrCat("'!' takes a bool; found ", a.ToString());
      break;
    case UnaryOp::kBitNot:
      if (a.IsInteger()) return a;
      *error =
          StrCat("'", spelling, "' takes an integer; found ", a.ToString());
      break;
  }
  return Type::Error();
}

Type BinaryResultType(BinaryOp op, Type a, Type b, std::string* error) {
  if (a.IsError() || b.IsError()) return Type::Error();
  std::string_view sp = BinaryOpSpelling(op);
  switch (op) {
    case BinaryOp::kAdd:
    case BinaryOp::kSub:
    case BinaryOp::kMul:
    case BinaryOp::kDiv:
      if (a.IsNumber() && b.IsNumber()) return UnifyNumbers(a, b);
      *error = StrCat("'", sp, "' needs numbers; found ", Pair(a, b));
      return Type::Error();
    case BinaryOp::kMod:
    case BinaryOp::kShl:
    case BinaryOp::kShr:
    case BinaryOp::kBitAnd:
    case BinaryOp::kBitOr:
    case BinaryOp::kBitXor:
      if (a.IsInteger() && b.IsInteger()) return UnifyNumbers(a, b);
      *error = StrCat("'", sp, "' takes integers; found ", Pair(a, b));
      return Type::Error();
    case BinaryOp::kAnd:
    case BinaryOp::kOr:
      if (a.IsBool() && b.IsBool()) return a;
      *error = StrCat("'", sp, "' takes bool operands; found ", Pair(a, b));
      return Type::Error();
    default:
      break;
  }
  if (!IsComparison(op)) return Type::Error();
  if (a.IsNumber() && b.IsNumber()) return Type::Of(DType::kBool);
  bool equality = op == BinaryOp::kEq || op == BinaryOp::kNe;
  if (equality && a.IsBool() && b.IsBool()) return Type::Of(DType::kBool);
  *error = equality ? StrCat("'", sp,
                             "' compares two numbers or two bools; "
                             "found ",
                             Pair(a, b))
                    : StrCat("'", sp, "' compares numbers; found ", Pair(a, b),
                             a.IsBool() ? " (comparisons do not chain)" : "");
  return Type::Error();
}

bool IsBuiltin(std::string_view name) { return BuiltinArity(name) >= 0; }

Type CallResultType(std::string_view name, std::span<const Type> args,
                    std::string* error) {
  int arity = BuiltinArity(name);
  if (arity < 0) {
    *error = StrCat("unknown function '", name, "'");
    return Type::Error();
  }
  if (static_cast<size_t>(arity) != args.size()) {
    *error = StrCat("'", name, "' takes ", arity,
                    arity == 1 ? " argument" : " arguments", "; found ",
                    args.size());
    return Type::Error();
  }
  for (const Type& t : args) {
    if (t.IsError()) return Type::Error();
  }
  if (name == "select" || name == "if_then_else") {
    if (!args[0].IsBool()) {
      *error =
          StrCat("select condition must be bool; found ", args[0].ToString());
      return Type::Error();
    }
    if (args[1].IsBool() && args[2].IsBool()) return args[1];
    if (args[1].IsNumber() && args[2].IsNumber()) {
      return UnifyNumbers(args[1], args[2]);
    }
    *error = StrCat("select branches must be two numbers or two bools; found ",
                    Pair(args[1], args[2]));
    return Type::Error();
  }
  if (name == "ceildiv") {
    if (args[0].IsInteger() && args[1].IsInteger()) {
      return UnifyNumbers(args[0], args[1]);
    }
    *error = StrCat("'ceildiv' takes integers; found ", ArgList(args));
    return Type::Error();
  }
  if (name == "bits") {
    // A float's bit pattern: u32 (zero-extended below 32 bits), i64 for f64.
    if (args[0].kind == Type::Kind::kDType && IsFloat(args[0].dtype)) {
      return Type::Of(args[0].dtype == DType::kF64 ? DType::kI64 : DType::kU32);
    }
    *error = StrCat(
        "'bits' takes a float of a dtype (f16, bf16, f32, f64, "
        "f8e4m3, f8e5m2; cast a literal first); found ",
        ArgList(args));
    return Type::Error();
  }
  if (std::optional<DType> d = FromBitsDType(name)) {
    // The low bits of an integer read as the float's pattern.
    if (args[0].IsInteger()) return Type::Of(*d);
    *error = StrCat("'", name, "' takes an integer; found ", ArgList(args));
    return Type::Error();
  }
  for (const Type& t : args) {
    if (!t.IsNumber()) {
      *error =
          StrCat("'", name, "' takes ", arity == 1 ? "a number" : "numbers",
                 "; found ", ArgList(args));
      return Type::Error();
    }
  }
  if (name == "abs") return args[0];
  if (name == "isnan" || name == "isinf") return Type::Of(DType::kBool);
  if (name == "min" || name == "max") return UnifyNumbers(args[0], args[1]);
  // Float functions: an integer argument converts to f32.
  Type t = args[0];
  for (size_t i = 1; i < args.size(); ++i) t = UnifyNumbers(t, args[i]);
  return t.IsFloat() ? t : Type::Of(DType::kF32);
}

std::string_view NameKindName(NameKind k) {
  switch (k) {
    case NameKind::kSymbol:
      return "symbol";
    case NameKind::kScalarParam:
      return "scalar parameter";
    case NameKind::kTensor:
      return "tensor";
    case NameKind::kTunable:
      return "tunable";
    case NameKind::kBlockIndex:
      return "block index";
    case NameKind::kTile:
      return "tile";
    case NameKind::kLoopVar:
      return "loop variable";
    case NameKind::kParallelVar:
      return "parallel variable";
    case NameKind::kLet:
      return "let";
  }
  return "name";
}

// ------------------------------------------------------------ ExprChecker

void ExprChecker::Report(const Loc& loc, std::string message) {
  if (diags_ != nullptr) diags_->push_back({loc, std::move(message)});
}

void ExprChecker::ReportUnknown(std::string_view name, const Loc& loc) {
  if (reported_unknown_.contains(name)) return;
  reported_unknown_.insert(std::string(name));
  std::optional<Loc> elsewhere =
      names_ ? names_->DeclaredElsewhere(name) : std::nullopt;
  if (elsewhere) {
    Report(loc, StrCat("'", name, "' is not in scope here (declared at ",
                       elsewhere->line, ":", elsewhere->col,
                       "; a name is visible after its declaration, to "
                       "the end of its block)"));
  } else {
    Report(loc, StrCat("unknown name '", name, "'"));
  }
}

const NameInfo* ExprChecker::LookupBuffer(std::string_view name,
                                          const Loc& loc) {
  const NameInfo* info = names_ ? names_->Lookup(name) : nullptr;
  if (info == nullptr) {
    ReportUnknown(name, loc);
    return nullptr;
  }
  if (!info->IsBuffer()) {
    Report(loc, StrCat("'", name, "' is a ", NameKindName(info->kind),
                       "; expected a tile or tensor"));
    return nullptr;
  }
  return info;
}

Type ExprChecker::Check(const Expr& e, const ExprRules& rules) {
  depth_reported_ = false;
  return CheckRec(e, rules, 1);
}

bool ExprChecker::KindAllowed(std::string_view name, const NameInfo& info,
                              const ExprRules& rules, const Loc& loc) {
  if (rules.allowed.Contains(info.kind)) return true;
  Report(loc, StrCat("'", name, "' is a ", NameKindName(info.kind), "; ",
                     rules.context, " may use only ", rules.allowed_text));
  return false;
}

Type ExprChecker::CheckRec(const Expr& e, const ExprRules& rules, int depth) {
  if (depth > kMaxDepth) {
    if (depth_reported_) return Type::Error();
    depth_reported_ = true;
    Report(e.loc, StrCat("expression nests deeper than the limit of ",
                         kMaxDepth, " levels"));
    return Type::Error();
  }
  switch (e.kind) {
    case ExprKind::kInt:
      return Type::Int();
    case ExprKind::kFloat:
      return Type::Float();
    case ExprKind::kBool:
      return Type::Of(DType::kBool);
    case ExprKind::kVar:
      return CheckVar(e, rules);
    case ExprKind::kLoad:
      return CheckLoad(e, rules, depth);
    case ExprKind::kBinary:
      return CheckBinary(e, rules, depth);
    case ExprKind::kCall:
      return CheckCall(e, rules, depth);
    case ExprKind::kUnary:
    case ExprKind::kCast: {
      if (e.args.size() != 1) {
        Report(e.loc, "malformed expression: expected one operand");
        return Type::Error();
      }
      Type a = CheckRec(e.args[0], rules, depth + 1);
      if (e.kind == ExprKind::kCast) {
        return a.IsError() ? a : Type::Of(e.dtype);
      }
      std::string error;
      Type t = UnaryResultType(e.unary_op, a, &error);
      if (!error.empty()) Report(e.loc, std::move(error));
      return t;
    }
  }
  return Type::Error();
}

Type ExprChecker::CheckVar(const Expr& e, const ExprRules& rules) {
  const NameInfo* info = names_ ? names_->Lookup(e.name) : nullptr;
  if (info == nullptr) {
    ReportUnknown(e.name, e.loc);
    return Type::Error();
  }
  if (!KindAllowed(e.name, *info, rules, e.loc)) return Type::Error();
  if (info->IsBuffer()) {
    Report(e.loc, StrCat("'", e.name, "' is a ",
                         info->kind == NameKind::kTile
                             ? StrCat(ScopeName(info->scope), " tile")
                             : std::string("tensor"),
                         ", not a scalar; read one element with ", e.name,
                         "[...] or move it with a tile op"));
    return Type::Error();
  }
  return info->valid ? info->type : Type::Error();
}

Type ExprChecker::CheckLoad(const Expr& e, const ExprRules& rules, int depth) {
  const NameInfo* info = names_ ? names_->Lookup(e.name) : nullptr;
  bool ok = true;
  if (info == nullptr) {
    ReportUnknown(e.name, e.loc);
    ok = false;
  } else if (!KindAllowed(e.name, *info, rules, e.loc)) {
    ok = false;
  } else if (!info->IsBuffer()) {
    Report(e.loc, StrCat("'", e.name, "' is a ", NameKindName(info->kind),
                         ", not a tile or tensor; it cannot be indexed"));
    ok = false;
  }
  if (!CheckIndicesRec(e.name, ok ? info : nullptr, e.args, e.loc, rules,
                       depth)) {
    ok = false;
  }
  if (!ok || !info->valid) return Type::Error();
  return Type::Of(info->type.dtype);
}

bool ExprChecker::CheckIndices(std::string_view name, const NameInfo& info,
                               std::span<const Expr> indices, const Loc& loc,
                               const ExprRules& rules) {
  return CheckIndicesRec(name, &info, indices, loc, rules, 1);
}

// `info` is nullptr when the buffer is unknown: the indices are still
// checked for their own errors.
bool ExprChecker::CheckIndicesRec(std::string_view name, const NameInfo* info,
                                  std::span<const Expr> indices, const Loc& loc,
                                  const ExprRules& rules, int depth) {
  bool ok = true;
  bool check_dims = info != nullptr && info->valid;
  if (check_dims && indices.size() != info->shape.size()) {
    Report(loc,
           StrCat("'", name, "' has ", info->shape.size(),
                  info->shape.size() == 1 ? " dim" : " dims", "; found ",
                  indices.size(), indices.size() == 1 ? " index" : " indices"));
    ok = false;
    check_dims = false;
  }
  for (size_t i = 0; i < indices.size(); ++i) {
    const Expr& index = indices[i];
    Type t = CheckRec(index, rules, depth + 1);
    if (t.IsError()) {
      ok = false;
      continue;
    }
    if (!t.IsInteger()) {
      Report(index.loc, StrCat("index ", i, " of '", name,
                               "' must be an integer; found ", t.ToString()));
      ok = false;
      continue;
    }
    if (!check_dims) continue;
    std::optional<int64_t> v = FoldInt(index);
    std::optional<int64_t> dim = FoldInt(info->shape[i]);
    if (v && dim && (*v < 0 || *v >= *dim)) {
      Report(index.loc, StrCat("index ", *v, " is out of range for dim ", i,
                               " of '", name, "' (size ", *dim, ")"));
      ok = false;
    }
  }
  return ok;
}

Type ExprChecker::CheckBinary(const Expr& e, const ExprRules& rules,
                              int depth) {
  if (e.args.size() != 2) {
    Report(e.loc, "malformed expression: expected two operands");
    return Type::Error();
  }
  Type a = CheckRec(e.args[0], rules, depth + 1);
  Type b = CheckRec(e.args[1], rules, depth + 1);
  std::string error;
  Type t = BinaryResultType(e.binary_op, a, b, &error);
  if (!error.empty()) {
    Report(e.loc, std::move(error));
    return t;
  }
  if ((e.binary_op == BinaryOp::kDiv || e.binary_op == BinaryOp::kMod) &&
      a.IsInteger() && b.IsInteger()) {
    std::optional<int64_t> divisor = FoldInt(e.args[1]);
    if (divisor && *divisor == 0) {
      Report(e.loc,
             StrCat(e.binary_op == BinaryOp::kDiv ? "division" : "modulo",
                    " by zero"));
      return Type::Error();
    }
  }
  // Both operands constant but no constant result: the operation overflows
  // 64 bits or shifts out of range. Report it instead of silently treating
  // the expression as non-constant (which would skip every range check).
  const bool int_valued =
      e.binary_op == BinaryOp::kAdd || e.binary_op == BinaryOp::kSub ||
      e.binary_op == BinaryOp::kMul || e.binary_op == BinaryOp::kDiv ||
      e.binary_op == BinaryOp::kMod || e.binary_op == BinaryOp::kShl ||
      e.binary_op == BinaryOp::kShr;
  if (int_valued && a.IsInteger() && b.IsInteger()) {
    std::optional<int64_t> x = FoldInt(e.args[0]);
    std::optional<int64_t> y = FoldInt(e.args[1]);
    if (x && y && !FoldIntBinary(e.binary_op, *x, *y)) {
      bool bad_shift =
          (e.binary_op == BinaryOp::kShl || e.binary_op == BinaryOp::kShr) &&
          (*y < 0 || *y > 63);
      Report(e.loc, bad_shift
                        ? StrCat("shift by ", *y, " is out of range 0..63")
                        : StrCat("constant expression ", *x, " ",
                                 BinaryOpSpelling(e.binary_op), " ", *y,
                                 " overflows 64-bit integers"));
      return Type::Error();
    }
  }
  return t;
}

Type ExprChecker::CheckCall(const Expr& e, const ExprRules& rules, int depth) {
  std::vector<Type> args;
  args.reserve(e.args.size());
  for (const Expr& arg : e.args)
    args.push_back(CheckRec(arg, rules, depth + 1));
  std::string error;
  Type t = CallResultType(e.name, args, &error);
  if (!error.empty()) {
    Report(e.loc, std::move(error));
    return t;
  }
  if (e.name == "ceildiv" && e.args.size() == 2 && !t.IsError()) {
    std::optional<int64_t> divisor = FoldInt(e.args[1]);
    if (divisor && *divisor == 0) {
      Report(e.loc, "ceildiv by zero");
      return Type::Error();
    }
  }
  return t;
}

Type InferType(const Expr& e, const NameTable& names) {
  ExprChecker checker(&names, nullptr);
  ExprRules rules;
  rules.in_parallel = true;
  return checker.Check(e, rules);
}

}  // namespace kiln::compiler
