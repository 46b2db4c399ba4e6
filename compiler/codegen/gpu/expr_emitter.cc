#include "compiler/codegen/gpu/expr_emitter.h"

#include <cmath>
#include <cstdio>
#include <set>

#include "compiler/ir/dtype.h"
#include "compiler/ir/format.h"

namespace kiln::compiler::gpu {
namespace {

bool IsNarrow(DType t) {
  return t == DType::kF16 || t == DType::kBF16 || t == DType::kF8E4M3 ||
         t == DType::kF8E5M2;
}
bool IsNarrowType(Type t) {
  return t.kind == Type::Kind::kDType && IsNarrow(t.dtype);
}
bool IsDoubleType(Type t) {
  return t.kind == Type::Kind::kFloat ||
         (t.kind == Type::Kind::kDType && t.dtype == DType::kF64);
}
bool IsF32Reg(Type t) {
  return t.kind == Type::Kind::kDType &&
         (t.dtype == DType::kF32 || IsNarrow(t.dtype));
}

std::string P(const std::string& s) { return "(" + s + ")"; }

std::string FloatLiteral(double v, bool as_f32) {
  if (std::isinf(v)) {
    std::string inf = as_f32 ? "__int_as_float(0x7f800000)"
                             : "__longlong_as_double(0x7ff0000000000000LL)";
    return v < 0 ? "(-" + inf + ")" : inf;
  }
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return as_f32 ? "((float)" + s + ")" : "(" + s + ")";
}

// Range of an integer dtype for saturating casts.
std::pair<std::string, std::string> IntRange(DType t) {
  switch (t) {
    case DType::kI8:
      return {"-128.0", "127.0"};
    case DType::kU8:
      return {"0.0", "255.0"};
    case DType::kI16:
      return {"-32768.0", "32767.0"};
    case DType::kI32:
      return {"-2147483648.0", "2147483647.0"};
    case DType::kU32:
      return {"0.0", "4294967295.0"};
    case DType::kI4:
      return {"-8.0", "7.0"};
    case DType::kU4:
      return {"0.0", "15.0"};
    default:
      return {"0.0", "0.0"};
  }
}

}  // namespace

std::string RegType(Type t) {
  switch (t.kind) {
    case Type::Kind::kInt:
      return "long long";
    case Type::Kind::kFloat:
      return "double";
    case Type::Kind::kError:
      return "void";
    case Type::Kind::kDType:
      break;
  }
  switch (t.dtype) {
    case DType::kBool:
      return "bool";
    case DType::kI8:
    case DType::kI4:
      return "signed char";
    case DType::kU8:
    case DType::kU4:
      return "unsigned char";
    case DType::kI16:
      return "short";
    case DType::kI32:
      return "int";
    case DType::kI64:
      return "long long";
    case DType::kU32:
      return "unsigned";
    case DType::kF64:
      return "double";
    default:
      return "float";
  }
}

std::string StorageType(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
    case DType::kI4:
    case DType::kU4:
    case DType::kU8:
      return "unsigned char";
    case DType::kF16:
    case DType::kBF16:
      return "unsigned short";
    default:
      return RegType(Type::Of(t));
  }
}

std::string NarrowTag(DType t) {
  switch (t) {
    case DType::kF16:
      return "kiln::f16_t";
    case DType::kBF16:
      return "kiln::bf16_t";
    case DType::kF8E4M3:
      return "kiln::e4m3_t";
    case DType::kF8E5M2:
      return "kiln::e5m2_t";
    default:
      return "";
  }
}

std::string Mangle(const std::string& name) {
  static const std::set<std::string> kReserved = {
      "auto",      "bool",      "break",      "case",     "char",
      "class",     "const",     "continue",   "default",  "delete",
      "do",        "double",    "else",       "enum",     "extern",
      "float",     "for",       "goto",       "if",       "int",
      "long",      "new",       "return",     "short",    "signed",
      "sizeof",    "static",    "struct",     "switch",   "template",
      "this",      "typedef",   "union",      "unsigned", "void",
      "volatile",  "while",     "namespace",  "using",    "operator",
      "private",   "public",    "protected",  "virtual",  "friend",
      "inline",    "register",  "true",       "false",    "nullptr",
      "threadIdx", "blockIdx",  "blockDim",   "gridDim",  "warpSize",
      "min",       "max",       "abs",        "exp",      "exp2",
      "log",       "log2",      "sqrt",       "rsqrt",    "tanh",
      "erf",       "fma",       "signbit",    "isnan",    "isinf",
      "floor",     "ceil",      "rint",       "trunc",    "round",
      "asm",       "constexpr", "decltype",   "mutable",  "catch",
      "try",       "throw",     "typename",   "explicit", "export",
      "kiln",      "uint2",     "int2",       "float2",   "float4",
      "dim3",      "half",      "this_thread"};
  if (kReserved.count(name) || name.rfind("kiln_", 0) == 0 ||
      name.rfind("__", 0) == 0 || name.rfind("_", 0) == 0) {
    return name + "_v";
  }
  return name;
}

CExpr Convert(const CExpr& v, Type to) {
  if (v.type == to) return v;
  const std::string& x = v.code;
  CExpr out;
  out.type = to;
  if (to.kind == Type::Kind::kFloat) {
    out.code = "((double)" + P(x) + ")";
    return out;
  }
  if (to.kind == Type::Kind::kInt ||
      (to.kind == Type::Kind::kDType && to.dtype == DType::kI64)) {
    out.code = v.type.IsFloat() ? "kiln::f_to_i64((double)" + P(x) + ")"
                                : "((long long)" + P(x) + ")";
    return out;
  }
  const DType t = to.dtype;
  if (t == DType::kBool) {
    out.code = v.type.IsBool() ? x : "(" + P(x) + " != 0)";
    return out;
  }
  if (IsInteger(t)) {
    if (v.type.IsFloat()) {
      auto [lo, hi] = IntRange(t);
      out.code = "kiln::sat_cast<" + RegType(to) + ">((double)" + P(x) + ", " +
                 lo + ", " + hi + ")";
    } else if (t == DType::kI4) {
      out.code = "kiln::wrap_i4((long long)" + P(x) + ")";
    } else if (t == DType::kU4) {
      out.code = "kiln::wrap_u4((long long)" + P(x) + ")";
    } else {
      out.code = "((" + RegType(to) + ")" + P(x) + ")";
    }
    return out;
  }
  if (t == DType::kF32) {
    out.code = "((float)" + P(x) + ")";
    return out;
  }
  if (t == DType::kF64) {
    out.code = "((double)" + P(x) + ")";
    return out;
  }
  // Narrow floats: round once from f32 or (round-to-odd) f64.
  const bool from_f32 = IsF32Reg(v.type);
  out.code = "kiln::round_to<" + NarrowTag(t) + ">(" +
             (from_f32 ? "(float)" : "(double)") + P(x) + ")";
  return out;
}

absl::StatusOr<std::string> ExprEmitter::Index(const Expr& e) {
  auto v = Emit(e);
  if (!v.ok()) return v.status();
  return Convert(*v, Type::Int()).code;
}

absl::StatusOr<CExpr> ExprEmitter::Emit(const Expr& e) {
  switch (e.kind) {
    case ExprKind::kInt:
      if (e.int_value == INT64_MIN) {
        return CExpr{"(-9223372036854775807LL - 1)", Type::Int()};
      }
      return CExpr{StrCat("(", e.int_value, "LL)"), Type::Int()};
    case ExprKind::kFloat:
      return CExpr{FloatLiteral(e.float_value, false), Type::Float()};
    case ExprKind::kBool:
      return CExpr{e.bool_value ? "true" : "false", Type::Of(DType::kBool)};
    case ExprKind::kVar:
      return var_(e.name);
    case ExprKind::kLoad:
      return load_(e.name, e.args);
    case ExprKind::kCast: {
      auto a = Emit(e.args[0]);
      if (!a.ok()) return a.status();
      return Convert(*a, Type::Of(e.dtype));
    }
    case ExprKind::kUnary: {
      auto a = Emit(e.args[0]);
      if (!a.ok()) return a.status();
      std::string err;
      Type t = UnaryResultType(e.unary_op, a->type, &err);
      if (t.IsError()) {
        return absl::InvalidArgumentError("type error in unary op: " + err);
      }
      CExpr x = Convert(*a, t);
      switch (e.unary_op) {
        case UnaryOp::kNot:
          return CExpr{"(!" + P(x.code) + ")", t};
        case UnaryOp::kBitNot:
          return CExpr{"((" + RegType(t) + ")(~" + P(x.code) + "))", t};
        case UnaryOp::kNeg:
          if (t.IsFloat()) return CExpr{"(-" + P(x.code) + ")", t};
          if (t.kind == Type::Kind::kDType && t.dtype == DType::kI4) {
            return CExpr{"kiln::wrap_i4(-(long long)" + P(x.code) + ")", t};
          }
          if (t.kind == Type::Kind::kDType && t.dtype == DType::kU4) {
            return CExpr{"kiln::wrap_u4(-(long long)" + P(x.code) + ")", t};
          }
          return CExpr{"((" + RegType(t) + ")(0 - " + P(x.code) + "))", t};
      }
      break;
    }
    case ExprKind::kBinary: {
      auto a = Emit(e.args[0]);
      if (!a.ok()) return a.status();
      auto b = Emit(e.args[1]);
      if (!b.ok()) return b.status();
      const bool invariant =
          e.binary_op == BinaryOp::kDiv && invariant_ && invariant_(e.args[1]);
      return Binary(e.binary_op, std::move(*a), std::move(*b), invariant);
    }
    case ExprKind::kCall: {
      std::vector<CExpr> args;
      for (const Expr& x : e.args) {
        auto a = Emit(x);
        if (!a.ok()) return a.status();
        args.push_back(std::move(*a));
      }
      return Call(e.name, std::move(args));
    }
  }
  return absl::InternalError("unknown expression kind");
}

absl::StatusOr<CExpr> ExprEmitter::Binary(BinaryOp op, CExpr a, CExpr b,
                                          bool invariant_divisor) {
  std::string err;
  Type t = BinaryResultType(op, a.type, b.type, &err);
  if (t.IsError()) {
    return absl::InvalidArgumentError("type error in binary op: " + err);
  }
  switch (op) {
    case BinaryOp::kAnd:
      return CExpr{"(" + a.code + " && " + b.code + ")", t};
    case BinaryOp::kOr:
      return CExpr{"(" + a.code + " || " + b.code + ")", t};
    case BinaryOp::kEq:
    case BinaryOp::kNe:
    case BinaryOp::kLt:
    case BinaryOp::kLe:
    case BinaryOp::kGt:
    case BinaryOp::kGe: {
      std::string sym(BinaryOpSpelling(op));
      if (!(a.type.IsBool() && b.type.IsBool())) {
        Type u = UnifyNumbers(a.type, b.type);
        a = Convert(a, u);
        b = Convert(b, u);
      }
      return CExpr{"(" + a.code + " " + sym + " " + b.code + ")", t};
    }
    case BinaryOp::kShl:
    case BinaryOp::kShr: {
      CExpr x = Convert(a, t);
      std::string n = Convert(b, Type::Int()).code;
      std::string fn = op == BinaryOp::kShl ? "kiln::shl" : "kiln::shr";
      std::string r = fn + "<" + RegType(t) + ">(" + x.code + ", " + n + ")";
      if (t.kind == Type::Kind::kDType && t.dtype == DType::kI4) {
        r = "kiln::wrap_i4(" + r + ")";
      } else if (t.kind == Type::Kind::kDType && t.dtype == DType::kU4) {
        r = "kiln::wrap_u4(" + r + ")";
      }
      return CExpr{r, t};
    }
    default:
      break;
  }
  CExpr x = Convert(a, t), y = Convert(b, t);
  const std::string ct = RegType(t);
  if (t.IsFloat()) {
    std::string r;
    if (op == BinaryOp::kDiv && invariant_divisor &&
        t.kind == Type::Kind::kDType && t.dtype == DType::kF32) {
      // (Within 1 ulp of the quotient; one reciprocal per row where the
      // quotient would cost a division sequence per element.)
      r = "(" + x.code + " * kiln::rcp_rn(" + y.code + "))";
    } else if (op == BinaryOp::kDiv) {
      r = "(" + x.code + " / " + y.code + ")";
    } else {
      r = "(" + x.code + " " + std::string(BinaryOpSpelling(op)) + " " +
          y.code + ")";
    }
    if (IsNarrowType(t)) {
      r = "kiln::round_to<" + NarrowTag(t.dtype) + ">((float)" + r + ")";
    }
    return CExpr{r, t};
  }
  std::string r;
  if (op == BinaryOp::kDiv) {
    r = "kiln::floordiv<" + ct + ">(" + x.code + ", " + y.code + ")";
  } else if (op == BinaryOp::kMod) {
    r = "kiln::floormod<" + ct + ">(" + x.code + ", " + y.code + ")";
  } else {
    r = "((" + ct + ")(" + x.code + " " + std::string(BinaryOpSpelling(op)) +
        " " + y.code + "))";
  }
  if (t.kind == Type::Kind::kDType && t.dtype == DType::kI4) {
    r = "kiln::wrap_i4(" + r + ")";
  } else if (t.kind == Type::Kind::kDType && t.dtype == DType::kU4) {
    r = "kiln::wrap_u4(" + r + ")";
  }
  return CExpr{r, t};
}

absl::StatusOr<CExpr> ExprEmitter::Call(const std::string& raw_name,
                                        std::vector<CExpr> args) {
  const std::string name = raw_name == "if_then_else" ? "select" : raw_name;
  std::vector<Type> types;
  for (const CExpr& a : args) types.push_back(a.type);
  std::string err;
  Type t = CallResultType(name, types, &err);
  if (t.IsError()) {
    return absl::InvalidArgumentError("type error in " + name + ": " + err);
  }
  if (name == "isnan" || name == "isinf") {
    // (An integer is neither.)
    if (!args[0].type.IsFloat()) return CExpr{"false", t};
    CExpr x = Convert(
        args[0],
        Type::Of(IsDoubleType(args[0].type) ? DType::kF64 : DType::kF32));
    return CExpr{"kiln::" + name + "_(" + x.code + ")", t};
  }
  if (name == "bits") {
    // A float's pattern: narrow floats live in registers as f32 (already
    // rounded), so their storage bits are exact.
    const DType d = args[0].type.dtype;
    if (d == DType::kF64) {
      return CExpr{"((long long)__double_as_longlong(" + args[0].code + "))",
                   t};
    }
    if (d == DType::kF32) {
      return CExpr{"((unsigned)__float_as_uint(" + args[0].code + "))", t};
    }
    return CExpr{"((unsigned)kiln::to_bits<" + NarrowTag(d) + ">((float)(" +
                     args[0].code + ")))",
                 t};
  }
  if (std::optional<DType> d = FromBitsDType(name)) {
    if (*d == DType::kF64) {
      CExpr x = Convert(args[0], Type::Of(DType::kI64));
      return CExpr{"__longlong_as_double((long long)(" + x.code + "))", t};
    }
    CExpr x = Convert(args[0], Type::Of(DType::kU32));
    if (*d == DType::kF32) {
      return CExpr{"__uint_as_float((unsigned)(" + x.code + "))", t};
    }
    const std::string mask = DTypeBits(*d) == 16 ? "0xffffu" : "0xffu";
    return CExpr{"kiln::from_bits<" + NarrowTag(*d) + ">((unsigned)(" + x.code +
                     ") & " + mask + ")",
                 t};
  }
  const std::string ct = RegType(t);
  if (name == "select") {
    CExpr x = Convert(args[1], t), y = Convert(args[2], t);
    return CExpr{"(" + args[0].code + " ? " + x.code + " : " + y.code + ")", t};
  }
  if (name == "ceildiv") {
    CExpr x = Convert(args[0], t), y = Convert(args[1], t);
    return CExpr{"kiln::ceildiv<" + ct + ">(" + x.code + ", " + y.code + ")",
                 t};
  }
  if (name == "min" || name == "max") {
    CExpr x = Convert(args[0], t), y = Convert(args[1], t);
    std::string fn = name == "min" ? "kiln::min_" : "kiln::max_";
    return CExpr{
        fn + "((" + ct + ")" + x.code + ", (" + ct + ")" + y.code + ")", t};
  }
  if (name == "abs") {
    CExpr x = Convert(args[0], t);
    return CExpr{"kiln::abs_((" + ct + ")" + x.code + ")", t};
  }
  if (name == "fma") {
    CExpr x = Convert(args[0], t), y = Convert(args[1], t),
          z = Convert(args[2], t);
    if (IsDoubleType(t)) {
      return CExpr{"fma(" + x.code + ", " + y.code + ", " + z.code + ")", t};
    }
    std::string r = "fmaf(" + x.code + ", " + y.code + ", " + z.code + ")";
    if (IsNarrowType(t)) {
      r = "kiln::round_to<" + NarrowTag(t.dtype) + ">(" + r + ")";
    }
    return CExpr{r, t};
  }
  // Math functions of one float argument.
  static const std::map<std::string, std::pair<std::string, std::string>>
      kMath = {{"exp", {"expf", "exp"}},
               {"exp2", {"kiln::exp2_", "exp2"}},
               {"log", {"logf", "log"}},
               {"log2", {"log2f", "log2"}},
               {"sqrt", {"sqrtf", "sqrt"}},
               {"rsqrt", {"kiln::rsqrt_", "kiln::rsqrt_"}},
               {"tanh", {"tanhf", "tanh"}},
               {"sigmoid", {"kiln::sigmoid", "kiln::sigmoid"}},
               {"erf", {"erff", "erf"}},
               {"floor", {"floorf", "floor"}},
               {"ceil", {"ceilf", "ceil"}},
               {"round", {"rintf", "rint"}},  // ties to even
               {"trunc", {"truncf", "trunc"}}};
  auto it = kMath.find(name);
  if (it == kMath.end() || args.size() != 1) {
    return absl::UnimplementedError("builtin '" + name +
                                    "' has no GPU lowering");
  }
  CExpr x = Convert(args[0], t);
  if (IsDoubleType(t)) {
    return CExpr{it->second.second + "((double)" + x.code + ")", t};
  }
  std::string r = it->second.first + "((float)" + x.code + ")";
  if (IsNarrowType(t)) {
    r = "kiln::round_to<" + NarrowTag(t.dtype) + ">(" + r + ")";
  }
  return CExpr{r, t};
}

}  // namespace kiln::compiler::gpu
