// Result types come from type_check.h (BinaryResultType, CallResultType...),
// so the back end types every expression exactly as the verifier does; each
// operand is then converted to the result type and the operation emitted on
// the register representation (scalar_emitter.h).
#include "compiler/codegen/cpu/scalar_emitter.h"

#include <cmath>
#include <limits>
#include <vector>

#include "compiler/ir/format.h"
#include "llvm/IR/Intrinsics.h"

namespace kiln::compiler::cpu {
namespace {

bool IsNarrowType(Type t) {
  return t.kind == Type::Kind::kDType && NarrowFloats::IsNarrow(t.dtype);
}

absl::Status TypeError(std::string_view what, const std::string& error) {
  return absl::InvalidArgumentError(StrCat(
      "cpu codegen: ", what, ": ", error.empty() ? "type error" : error));
}

}  // namespace

bool IsSignedType(Type t) {
  return t.kind == Type::Kind::kInt ||
         (t.kind == Type::Kind::kDType && IsSigned(t.dtype));
}

int IntegerBits(Type t) {
  return t.kind == Type::Kind::kInt ? 64 : DTypeBits(t.dtype);
}

bool IsDoubleReg(Type t) {
  return t.kind == Type::Kind::kFloat ||
         (t.kind == Type::Kind::kDType && t.dtype == DType::kF64);
}

llvm::Type* ScalarEmitter::RegType(Type t) const {
  llvm::LLVMContext& ctx = module_->getContext();
  switch (t.kind) {
    case Type::Kind::kError:
      return nullptr;
    case Type::Kind::kInt:
      return llvm::Type::getInt64Ty(ctx);
    case Type::Kind::kFloat:
      return llvm::Type::getDoubleTy(ctx);
    case Type::Kind::kDType:
      break;
  }
  if (t.dtype == DType::kBool) return llvm::Type::getInt1Ty(ctx);
  if (t.dtype == DType::kF64) return llvm::Type::getDoubleTy(ctx);
  if (IsFloat(t.dtype)) return llvm::Type::getFloatTy(ctx);
  return llvm::IntegerType::get(ctx, DTypeBits(t.dtype));
}

llvm::Type* ScalarEmitter::StorageType(DType t) const {
  llvm::LLVMContext& ctx = module_->getContext();
  switch (t) {
    case DType::kBool:
    case DType::kI4:
    case DType::kU4:
      return llvm::Type::getInt8Ty(ctx);
    default:
      if (NarrowFloats::IsNarrow(t)) return narrow_.BitsType(t);
      return RegType(Type::Of(t));
  }
}

llvm::Value* ScalarEmitter::ToStorage(llvm::Value* reg, DType t) {
  if (t == DType::kBool) return b_.CreateZExt(reg, b_.getInt8Ty());
  if (NarrowFloats::IsNarrow(t)) return narrow_.FromF32(b_, reg, t);
  return reg;
}

llvm::Value* ScalarEmitter::FromStorage(llvm::Value* bits, DType t) {
  if (t == DType::kBool) return b_.CreateICmpNE(bits, b_.getInt8(0));
  if (NarrowFloats::IsNarrow(t)) return narrow_.ToF32(b_, bits, t);
  return bits;
}

TypedValue ScalarEmitter::Int(int64_t v) {
  return {Type::Int(), b_.getInt64(static_cast<uint64_t>(v))};
}

TypedValue ScalarEmitter::Float(double v) {
  return {Type::Float(), llvm::ConstantFP::get(b_.getDoubleTy(), v)};
}

TypedValue ScalarEmitter::Bool(bool v) {
  return {Type::Of(DType::kBool), b_.getInt1(v)};
}

llvm::Value* ScalarEmitter::Round(llvm::Value* v, Type t) {
  if (!IsNarrowType(t)) return v;
  return narrow_.ToF32(b_, narrow_.FromF32(b_, v, t.dtype), t.dtype);
}

absl::StatusOr<TypedValue> ScalarEmitter::Convert(TypedValue v, Type to) {
  const Type from = v.type;
  if (from == to) return v;
  llvm::Type* dst = RegType(to);
  if (dst == nullptr || from.IsError()) {
    return TypeError("conversion", "from or to an erroneous type");
  }
  llvm::Value* x = v.value;
  TypedValue out{to, nullptr};
  if (to.IsBool()) {
    if (from.IsInteger()) {
      out.value = b_.CreateICmpNE(x, llvm::ConstantInt::get(x->getType(), 0));
    } else if (from.IsFloat()) {
      out.value = b_.CreateFCmpUNE(x, llvm::ConstantFP::get(x->getType(), 0));
    } else {
      return TypeError("conversion", "to bool from " + from.ToString());
    }
    return out;
  }
  if (to.IsInteger()) {
    if (from.IsBool()) {
      out.value = b_.CreateZExt(x, dst);
    } else if (from.IsInteger()) {
      out.value = b_.CreateIntCast(x, dst, IsSignedType(from));
    } else if (from.IsFloat()) {
      auto id = IsSignedType(to) ? llvm::Intrinsic::fptosi_sat
                                 : llvm::Intrinsic::fptoui_sat;
      out.value = b_.CreateIntrinsic(id, {dst, x->getType()}, {x});
    } else {
      return TypeError("conversion", "to an integer from " + from.ToString());
    }
    return out;
  }
  if (!to.IsFloat()) {
    return TypeError("conversion", "to " + to.ToString());
  }
  const bool narrow = IsNarrowType(to);
  if (from.IsBool()) {
    out.value = b_.CreateUIToFP(x, dst);  // 0 and 1 are exact everywhere
    return out;
  }
  if (from.IsInteger()) {
    const bool is_signed = IsSignedType(from);
    if (!narrow) {
      out.value = is_signed ? b_.CreateSIToFP(x, dst) : b_.CreateUIToFP(x, dst);
    } else if (IntegerBits(from) <= 16) {  // exact in f32
      llvm::Value* f = is_signed ? b_.CreateSIToFP(x, b_.getFloatTy())
                                 : b_.CreateUIToFP(x, b_.getFloatTy());
      out.value = Round(f, to);
    } else {  // exact in f64 up to 53 bits; then one rounding to the dtype
      llvm::Value* d = is_signed ? b_.CreateSIToFP(x, b_.getDoubleTy())
                                 : b_.CreateUIToFP(x, b_.getDoubleTy());
      out.value = narrow_.ToF32(b_, narrow_.FromF64(b_, d, to.dtype), to.dtype);
    }
    return out;
  }
  if (!from.IsFloat()) {
    return TypeError("conversion", "from " + from.ToString());
  }
  if (IsDoubleReg(from)) {
    if (IsDoubleReg(to)) {
      out.value = x;
    } else if (!narrow) {
      out.value = b_.CreateFPTrunc(x, dst);
    } else {
      out.value = narrow_.ToF32(b_, narrow_.FromF64(b_, x, to.dtype), to.dtype);
    }
    return out;
  }
  // From an f32 register (f32 or a narrow float).
  if (IsDoubleReg(to)) {
    out.value = b_.CreateFPExt(x, dst);
  } else {
    out.value = Round(x, to);  // identity for f32
  }
  return out;
}

absl::StatusOr<llvm::Value*> ScalarEmitter::ToIndex(TypedValue v) {
  if (!v.type.IsInteger()) {
    return TypeError("index",
                     "an index must be an integer; found " + v.type.ToString());
  }
  return b_.CreateIntCast(v.value, b_.getInt64Ty(), IsSignedType(v.type));
}

absl::StatusOr<TypedValue> ScalarEmitter::Unary(UnaryOp op, TypedValue a) {
  std::string error;
  Type t = UnaryResultType(op, a.type, &error);
  if (t.IsError()) return TypeError(UnaryOpSpelling(op), error);
  switch (op) {
    case UnaryOp::kNeg:
      if (t.IsFloat()) return TypedValue{t, b_.CreateFNeg(a.value)};
      return TypedValue{t, b_.CreateNeg(a.value)};
    case UnaryOp::kNot:
    case UnaryOp::kBitNot:
      return TypedValue{t, b_.CreateNot(a.value)};
  }
  return TypeError("unary", "unknown operator");
}

llvm::Value* ScalarEmitter::DivMod(bool mod, bool is_signed, llvm::Value* a,
                                   llvm::Value* b) {
  llvm::Type* ty = a->getType();
  auto* zero = llvm::ConstantInt::get(ty, 0);
  auto* one = llvm::ConstantInt::get(ty, 1);
  if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(b)) {
    const llvm::APInt& v = c->getValue();
    if (v.isZero()) return mod ? a : zero;
    if (!is_signed) return mod ? b_.CreateURem(a, b) : b_.CreateUDiv(a, b);
    if (v.isStrictlyPositive() && v.isPowerOf2()) {
      return mod ? b_.CreateAnd(a, llvm::ConstantInt::get(ty, v - 1))
                 : b_.CreateAShr(a, v.logBase2());
    }
    if (v.isAllOnes()) return mod ? zero : b_.CreateNeg(a);
    llvm::Value* q = b_.CreateSDiv(a, b);
    llvm::Value* r = b_.CreateSRem(a, b);
    llvm::Value* adjust =
        v.isNegative() ? b_.CreateICmpSGT(r, zero) : b_.CreateICmpSLT(r, zero);
    return mod ? b_.CreateSelect(adjust, b_.CreateAdd(r, b), r)
               : b_.CreateSub(q, b_.CreateZExt(adjust, ty));
  }
  llvm::Value* is_zero = b_.CreateICmpEQ(b, zero);
  if (!is_signed) {
    llvm::Value* safe = b_.CreateSelect(is_zero, one, b);
    return mod ? b_.CreateSelect(is_zero, a, b_.CreateURem(a, safe))
               : b_.CreateSelect(is_zero, zero, b_.CreateUDiv(a, safe));
  }
  llvm::Value* is_m1 = b_.CreateICmpEQ(b, llvm::ConstantInt::get(ty, -1));
  llvm::Value* safe = b_.CreateSelect(b_.CreateOr(is_zero, is_m1), one, b);
  llvm::Value* q = b_.CreateSDiv(a, safe);
  llvm::Value* r = b_.CreateSRem(a, safe);
  // A remainder whose sign differs from the divisor's moves the quotient
  // one down (floor) and the remainder into the divisor's sign.
  llvm::Value* adjust = b_.CreateAnd(
      b_.CreateICmpNE(r, zero), b_.CreateICmpSLT(b_.CreateXor(r, b), zero));
  if (mod) {
    llvm::Value* fm = b_.CreateSelect(adjust, b_.CreateAdd(r, b), r);
    return b_.CreateSelect(is_zero, a, fm);
  }
  llvm::Value* fq = b_.CreateSub(q, b_.CreateZExt(adjust, ty));
  return b_.CreateSelect(is_m1, b_.CreateNeg(a),
                         b_.CreateSelect(is_zero, zero, fq));
}

llvm::Value* ScalarEmitter::CeilDiv(bool is_signed, llvm::Value* a,
                                    llvm::Value* b) {
  llvm::Type* ty = a->getType();
  auto* zero = llvm::ConstantInt::get(ty, 0);
  auto* one = llvm::ConstantInt::get(ty, 1);
  llvm::Value* is_zero = b_.CreateICmpEQ(b, zero);
  if (!is_signed) {
    llvm::Value* safe = b_.CreateSelect(is_zero, one, b);
    llvm::Value* q = b_.CreateUDiv(a, safe);
    llvm::Value* up = b_.CreateICmpNE(b_.CreateURem(a, safe), zero);
    return b_.CreateSelect(is_zero, zero,
                           b_.CreateAdd(q, b_.CreateZExt(up, ty)));
  }
  llvm::Value* is_m1 = b_.CreateICmpEQ(b, llvm::ConstantInt::get(ty, -1));
  llvm::Value* safe = b_.CreateSelect(b_.CreateOr(is_zero, is_m1), one, b);
  llvm::Value* q = b_.CreateSDiv(a, safe);
  llvm::Value* r = b_.CreateSRem(a, safe);
  // Truncation rounded down when the exact quotient is positive.
  llvm::Value* up = b_.CreateAnd(b_.CreateICmpNE(r, zero),
                                 b_.CreateICmpSGE(b_.CreateXor(r, b), zero));
  llvm::Value* cq = b_.CreateAdd(q, b_.CreateZExt(up, ty));
  return b_.CreateSelect(is_m1, b_.CreateNeg(a),
                         b_.CreateSelect(is_zero, zero, cq));
}

llvm::Value* ScalarEmitter::Shift(BinaryOp op, bool is_signed, llvm::Value* a,
                                  llvm::Value* b) {
  llvm::Type* ty = a->getType();
  const unsigned width = ty->getIntegerBitWidth();
  auto* zero = llvm::ConstantInt::get(ty, 0);
  if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(b);
      c != nullptr && c->getValue().ult(width)) {
    if (op == BinaryOp::kShl) return b_.CreateShl(a, b);
    return is_signed ? b_.CreateAShr(a, b) : b_.CreateLShr(a, b);
  }
  // Counts outside [0, width) (negative ones are huge unsigned).
  llvm::Value* out_of_range =
      b_.CreateICmpUGE(b, llvm::ConstantInt::get(ty, width));
  if (op == BinaryOp::kShl) {
    return b_.CreateSelect(out_of_range, zero, b_.CreateShl(a, b));
  }
  if (is_signed) {
    llvm::Value* count =
        b_.CreateSelect(out_of_range, llvm::ConstantInt::get(ty, width - 1), b);
    return b_.CreateAShr(a, count);
  }
  return b_.CreateSelect(out_of_range, zero, b_.CreateLShr(a, b));
}

absl::StatusOr<TypedValue> ScalarEmitter::Compare(BinaryOp op, TypedValue a,
                                                  TypedValue b) {
  Type t = (a.type.IsBool() && b.type.IsBool()) ? a.type
                                                : UnifyNumbers(a.type, b.type);
  if (t.IsError()) {
    return TypeError(
        BinaryOpSpelling(op),
        "cannot compare " + a.type.ToString() + " and " + b.type.ToString());
  }
  KILN_CG_ASSIGN_OR_RETURN(TypedValue x, Convert(a, t));
  KILN_CG_ASSIGN_OR_RETURN(TypedValue y, Convert(b, t));
  llvm::Value* r;
  if (t.IsFloat()) {
    llvm::CmpInst::Predicate p = llvm::CmpInst::FCMP_OEQ;
    switch (op) {
      case BinaryOp::kEq:
        p = llvm::CmpInst::FCMP_OEQ;
        break;
      case BinaryOp::kNe:
        p = llvm::CmpInst::FCMP_UNE;
        break;
      case BinaryOp::kLt:
        p = llvm::CmpInst::FCMP_OLT;
        break;
      case BinaryOp::kLe:
        p = llvm::CmpInst::FCMP_OLE;
        break;
      case BinaryOp::kGt:
        p = llvm::CmpInst::FCMP_OGT;
        break;
      default:
        p = llvm::CmpInst::FCMP_OGE;
        break;
    }
    r = b_.CreateFCmp(p, x.value, y.value);
  } else {
    const bool s = IsSignedType(t);
    llvm::CmpInst::Predicate p = llvm::CmpInst::ICMP_EQ;
    switch (op) {
      case BinaryOp::kEq:
        p = llvm::CmpInst::ICMP_EQ;
        break;
      case BinaryOp::kNe:
        p = llvm::CmpInst::ICMP_NE;
        break;
      case BinaryOp::kLt:
        p = s ? llvm::CmpInst::ICMP_SLT : llvm::CmpInst::ICMP_ULT;
        break;
      case BinaryOp::kLe:
        p = s ? llvm::CmpInst::ICMP_SLE : llvm::CmpInst::ICMP_ULE;
        break;
      case BinaryOp::kGt:
        p = s ? llvm::CmpInst::ICMP_SGT : llvm::CmpInst::ICMP_UGT;
        break;
      default:
        p = s ? llvm::CmpInst::ICMP_SGE : llvm::CmpInst::ICMP_UGE;
        break;
    }
    r = b_.CreateICmp(p, x.value, y.value);
  }
  return TypedValue{Type::Of(DType::kBool), r};
}

absl::StatusOr<TypedValue> ScalarEmitter::Binary(BinaryOp op, TypedValue a,
                                                 TypedValue b) {
  std::string error;
  Type t = BinaryResultType(op, a.type, b.type, &error);
  if (t.IsError()) return TypeError(BinaryOpSpelling(op), error);
  switch (op) {
    case BinaryOp::kEq:
    case BinaryOp::kNe:
    case BinaryOp::kLt:
    case BinaryOp::kLe:
    case BinaryOp::kGt:
    case BinaryOp::kGe:
      return Compare(op, a, b);
    case BinaryOp::kAnd:
      return TypedValue{t, b_.CreateAnd(a.value, b.value)};
    case BinaryOp::kOr:
      return TypedValue{t, b_.CreateOr(a.value, b.value)};
    default:
      break;
  }
  KILN_CG_ASSIGN_OR_RETURN(TypedValue x, Convert(a, t));
  KILN_CG_ASSIGN_OR_RETURN(TypedValue y, Convert(b, t));
  if (t.IsFloat()) {
    llvm::Value* r;
    switch (op) {
      case BinaryOp::kAdd:
        r = b_.CreateFAdd(x.value, y.value);
        break;
      case BinaryOp::kSub:
        r = b_.CreateFSub(x.value, y.value);
        break;
      case BinaryOp::kMul:
        r = b_.CreateFMul(x.value, y.value);
        break;
      case BinaryOp::kDiv:
        r = b_.CreateFDiv(x.value, y.value);
        break;
      default:
        return TypeError(BinaryOpSpelling(op), "not defined on floats");
    }
    return TypedValue{t, Round(r, t)};
  }
  const bool s = IsSignedType(t);
  llvm::Value* r = nullptr;
  switch (op) {
    case BinaryOp::kAdd:
      r = b_.CreateAdd(x.value, y.value);
      break;
    case BinaryOp::kSub:
      r = b_.CreateSub(x.value, y.value);
      break;
    case BinaryOp::kMul:
      r = b_.CreateMul(x.value, y.value);
      break;
    case BinaryOp::kDiv:
      r = DivMod(false, s, x.value, y.value);
      break;
    case BinaryOp::kMod:
      r = DivMod(true, s, x.value, y.value);
      break;
    case BinaryOp::kShl:
    case BinaryOp::kShr:
      r = Shift(op, s, x.value, y.value);
      break;
    case BinaryOp::kBitAnd:
      r = b_.CreateAnd(x.value, y.value);
      break;
    case BinaryOp::kBitOr:
      r = b_.CreateOr(x.value, y.value);
      break;
    case BinaryOp::kBitXor:
      r = b_.CreateXor(x.value, y.value);
      break;
    default:
      return TypeError(BinaryOpSpelling(op), "unexpected operator");
  }
  return TypedValue{t, r};
}

llvm::Value* ScalarEmitter::LibmCall(const char* name, llvm::Value* x) {
  llvm::Type* ty = x->getType();
  const std::string fname = std::string(name) + (ty->isFloatTy() ? "f" : "");
  llvm::FunctionCallee callee = module_->getOrInsertFunction(
      fname, llvm::FunctionType::get(ty, {ty}, false));
  if (auto* fn = llvm::dyn_cast<llvm::Function>(callee.getCallee())) {
    // Pure, like -fno-math-errno: lets LICM and CSE treat the call as math.
    fn->setDoesNotThrow();
    fn->setDoesNotAccessMemory();
    fn->addFnAttr(llvm::Attribute::WillReturn);
  }
  llvm::CallInst* call = b_.CreateCall(callee, {x});
  call->setDoesNotThrow();
  call->setDoesNotAccessMemory();
  return call;
}

absl::StatusOr<TypedValue> ScalarEmitter::MathFunction(std::string_view name,
                                                       TypedValue x) {
  llvm::Value* v = x.value;
  llvm::Type* ty = v->getType();
  auto one = llvm::ConstantFP::get(ty, 1.0);
  llvm::Value* r = nullptr;
  if (name == "exp") {
    r = b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp, v);
  } else if (name == "exp2") {
    r = b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp2, v);
  } else if (name == "log") {
    r = b_.CreateUnaryIntrinsic(llvm::Intrinsic::log, v);
  } else if (name == "log2") {
    r = b_.CreateUnaryIntrinsic(llvm::Intrinsic::log2, v);
  } else if (name == "floor") {
    r = b_.CreateUnaryIntrinsic(llvm::Intrinsic::floor, v);
  } else if (name == "ceil") {
    r = b_.CreateUnaryIntrinsic(llvm::Intrinsic::ceil, v);
  } else if (name == "round") {
    // Ties to even (the default rounding mode), as torch.round and NumPy.
    r = b_.CreateUnaryIntrinsic(llvm::Intrinsic::rint, v);
  } else if (name == "trunc") {
    r = b_.CreateUnaryIntrinsic(llvm::Intrinsic::trunc, v);
  } else if (name == "sqrt") {
    r = b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, v);
  } else if (name == "rsqrt") {
    r = b_.CreateFDiv(one, b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, v));
  } else if (name == "tanh") {
    r = LibmCall("tanh", v);
  } else if (name == "erf") {
    r = LibmCall("erf", v);
  } else if (name == "sigmoid") {
    llvm::Value* e =
        b_.CreateUnaryIntrinsic(llvm::Intrinsic::exp, b_.CreateFNeg(v));
    r = b_.CreateFDiv(one, b_.CreateFAdd(one, e));
  } else {
    return TypeError(name, "unknown function");
  }
  return TypedValue{x.type, Round(r, x.type)};
}

absl::StatusOr<TypedValue> ScalarEmitter::Call(
    std::string_view name, std::span<const TypedValue> args) {
  std::vector<Type> types;
  for (const TypedValue& a : args) types.push_back(a.type);
  std::string error;
  Type t = CallResultType(name, types, &error);
  if (t.IsError()) return TypeError(name, error);
  if (name == "select" || name == "if_then_else") {
    KILN_CG_ASSIGN_OR_RETURN(TypedValue x, Convert(args[1], t));
    KILN_CG_ASSIGN_OR_RETURN(TypedValue y, Convert(args[2], t));
    return TypedValue{t, b_.CreateSelect(args[0].value, x.value, y.value)};
  }
  if (name == "bits") {
    // The pattern in storage (a narrow float's i16 / i8), then widened.
    const DType d = args[0].type.dtype;
    llvm::Value* v = ToStorage(args[0].value, d);
    if (!v->getType()->isIntegerTy()) {
      v = b_.CreateBitCast(v,
                           b_.getIntNTy(static_cast<unsigned>(DTypeBits(d))));
    }
    return TypedValue{t, b_.CreateZExtOrTrunc(v, RegType(t))};
  }
  if (std::optional<DType> d = FromBitsDType(name)) {
    // The argument's low bits, two's complement, as the float's pattern.
    const unsigned width = static_cast<unsigned>(DTypeBits(*d));
    KILN_CG_ASSIGN_OR_RETURN(
        TypedValue wide,
        Convert(args[0], Type::Of(width == 64 ? DType::kI64 : DType::kU32)));
    llvm::Value* pattern = b_.CreateTrunc(wide.value, b_.getIntNTy(width));
    llvm::Type* storage = StorageType(*d);
    if (!storage->isIntegerTy()) pattern = b_.CreateBitCast(pattern, storage);
    return TypedValue{t, FromStorage(pattern, *d)};
  }
  if (name == "isnan" || name == "isinf") {
    llvm::Value* x = args[0].value;
    if (!args[0].type.IsFloat()) return TypedValue{t, b_.getFalse()};
    if (name == "isnan") return TypedValue{t, b_.CreateFCmpUNO(x, x)};
    llvm::Value* a = b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
    return TypedValue{
        t, b_.CreateFCmpOEQ(a, llvm::ConstantFP::getInfinity(x->getType()))};
  }
  std::vector<llvm::Value*> v;
  for (const TypedValue& a : args) {
    KILN_CG_ASSIGN_OR_RETURN(TypedValue c, Convert(a, t));
    v.push_back(c.value);
  }
  const bool is_float = t.IsFloat();
  const bool s = IsSignedType(t);
  if (name == "ceildiv") return TypedValue{t, CeilDiv(s, v[0], v[1])};
  if (name == "min" || name == "max") {
    llvm::Intrinsic::ID id;
    if (is_float) {
      id = name == "min" ? llvm::Intrinsic::minnum : llvm::Intrinsic::maxnum;
    } else if (s) {
      id = name == "min" ? llvm::Intrinsic::smin : llvm::Intrinsic::smax;
    } else {
      id = name == "min" ? llvm::Intrinsic::umin : llvm::Intrinsic::umax;
    }
    llvm::Value* r = b_.CreateBinaryIntrinsic(id, v[0], v[1]);
    if (is_float) {
      // A NaN operand wins (minnum / maxnum let it lose): a + b is NaN.
      r = b_.CreateSelect(b_.CreateFCmpUNO(v[0], v[1]),
                          b_.CreateFAdd(v[0], v[1]), r);
    }
    return TypedValue{t, r};
  }
  if (name == "abs") {
    if (is_float) {
      return TypedValue{t,
                        b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, v[0])};
    }
    if (!s) return TypedValue{t, v[0]};
    return TypedValue{
        t, b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, v[0], b_.getFalse())};
  }
  if (name == "fma") {
    llvm::Value* r = b_.CreateIntrinsic(llvm::Intrinsic::fma, {v[0]->getType()},
                                        {v[0], v[1], v[2]});
    return TypedValue{t, Round(r, t)};
  }
  return MathFunction(name, TypedValue{t, v[0]});
}

}  // namespace kiln::compiler::cpu
