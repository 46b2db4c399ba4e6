// Each format is described by its width, mantissa bits, exponent bias and
// whether it is IEEE-like (an all-ones exponent means inf/NaN) or "FN"
// (f8e4m3: only the all-ones pattern is NaN, no infinities).
//
// f32 -> narrow, on the f32 bits `a` of |x|:
// 1. normal: round the mantissa at bit `shift` to nearest even by adding
//    half-ulp-minus-one plus the kept LSB, shift, rebias the exponent;
// 2. subnormal (|x| below the target's smallest normal): scale |x| so that
//    one target ulp is 1.0, round to an integer with the 2^23 trick (exact:
//    the product is below 2^m), and use the integer as the encoding (a
//    carry into the exponent field gives the smallest normal, as it should);
// 3. overflow: infinity, or the largest finite value for FN;
// 4. NaN: the target's quiet NaN; then OR in the sign.
// narrow -> f32 is exact: rebias normals, scale subnormals, map specials.
#include "compiler/codegen/cpu/narrow_float.h"

#include <cmath>

#include "llvm/IR/Attributes.h"
#include "llvm/IR/Function.h"
#include "llvm/IR/Intrinsics.h"

namespace kiln::compiler::cpu {
namespace {

struct Format {
  int bits;   // 16 or 8
  int mbits;  // mantissa bits
  int bias;   // exponent bias
  bool ieee;  // all-ones exponent = inf/NaN (else FN: only all-ones NaN)
  const char* name;
};

Format FormatOf(DType t) {
  switch (t) {
    case DType::kF16:
      return {16, 10, 15, true, "f16"};
    case DType::kBF16:
      return {16, 7, 127, true, "bf16"};
    case DType::kF8E5M2:
      return {8, 2, 15, true, "f8e5m2"};
    default:  // kF8E4M3
      return {8, 3, 7, false, "f8e4m3"};
  }
}

}  // namespace

bool NarrowFloats::IsNarrow(DType t) {
  return t == DType::kF16 || t == DType::kBF16 || t == DType::kF8E4M3 ||
         t == DType::kF8E5M2;
}

llvm::IntegerType* NarrowFloats::BitsType(DType t) const {
  return llvm::IntegerType::get(module_->getContext(), FormatOf(t).bits);
}

llvm::Function* NarrowFloats::Helper(const std::string& name, llvm::Type* ret,
                                     llvm::Type* arg) {
  auto* type = llvm::FunctionType::get(ret, {arg}, false);
  auto* fn = llvm::Function::Create(type, llvm::Function::InternalLinkage, name,
                                    module_);
  fn->addFnAttr(llvm::Attribute::AlwaysInline);
  fn->addFnAttr(llvm::Attribute::NoUnwind);
  fn->addFnAttr(llvm::Attribute::ReadNone);
  fn->addFnAttr(llvm::Attribute::WillReturn);
  cache_[name] = fn;
  return fn;
}

llvm::Function* NarrowFloats::FromF32Fn(DType t) {
  const Format f = FormatOf(t);
  const std::string name = std::string("kiln.f32_to_") + f.name;
  if (auto it = cache_.find(name); it != cache_.end()) return it->second;
  llvm::LLVMContext& ctx = module_->getContext();
  llvm::Type* i32 = llvm::Type::getInt32Ty(ctx);
  llvm::Type* f32 = llvm::Type::getFloatTy(ctx);
  llvm::Function* fn = Helper(name, BitsType(t), f32);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  auto c = [&](int64_t v) { return llvm::ConstantInt::get(i32, v); };

  llvm::Value* u = b.CreateBitCast(fn->getArg(0), i32);
  llvm::Value* sign =
      b.CreateAnd(b.CreateLShr(u, 32 - f.bits), c(int64_t{1} << (f.bits - 1)));
  llvm::Value* a = b.CreateAnd(u, c(0x7fffffff));
  const int ebits = f.bits - 1 - f.mbits;
  const int shift = 23 - f.mbits;
  // 1. Normal numbers.
  llvm::Value* lsb = b.CreateAnd(b.CreateLShr(a, shift), c(1));
  llvm::Value* rounded =
      b.CreateAdd(b.CreateAdd(a, c((int64_t{1} << (shift - 1)) - 1)), lsb);
  llvm::Value* r = b.CreateSub(b.CreateLShr(rounded, shift),
                               c(int64_t{127 - f.bias} << f.mbits));
  // 3. Overflow (after rounding).
  if (f.ieee) {
    const int64_t inf = ((int64_t{1} << ebits) - 1) << f.mbits;
    r = b.CreateSelect(b.CreateICmpSGE(r, c(inf)), c(inf), r);
  } else {
    const int64_t max_finite = (int64_t{1} << (f.bits - 1)) - 2;
    r = b.CreateSelect(b.CreateICmpSGT(r, c(max_finite)), c(max_finite), r);
  }
  // 2. Subnormals (bf16 shares f32's exponent range: the normal path is
  // right for every f32 input).
  if (f.bias != 127) {
    const int64_t min_normal = int64_t{128 - f.bias} << 23;
    llvm::Value* scaled = b.CreateFMul(
        b.CreateBitCast(a, f32),
        llvm::ConstantFP::get(f32, std::ldexp(1.0, f.mbits + f.bias - 1)));
    llvm::Value* magic = llvm::ConstantFP::get(f32, 8388608.0);
    llvm::Value* integral = b.CreateFSub(b.CreateFAdd(scaled, magic), magic);
    llvm::Value* n = b.CreateFPToUI(integral, i32);
    r = b.CreateSelect(b.CreateICmpULT(a, c(min_normal)), n, r);
  }
  // 4. NaN.
  const int64_t nan = f.ieee ? ((((int64_t{1} << ebits) - 1) << f.mbits) |
                                (int64_t{1} << (f.mbits - 1)))
                             : (int64_t{1} << (f.bits - 1)) - 1;
  r = b.CreateSelect(b.CreateICmpUGT(a, c(0x7f800000)), c(nan), r);
  b.CreateRet(b.CreateTrunc(b.CreateOr(r, sign), BitsType(t)));
  return fn;
}

llvm::Function* NarrowFloats::ToF32Fn(DType t) {
  const Format f = FormatOf(t);
  const std::string name = std::string("kiln.") + f.name + "_to_f32";
  if (auto it = cache_.find(name); it != cache_.end()) return it->second;
  llvm::LLVMContext& ctx = module_->getContext();
  llvm::Type* i32 = llvm::Type::getInt32Ty(ctx);
  llvm::Type* f32 = llvm::Type::getFloatTy(ctx);
  llvm::Function* fn = Helper(name, f32, BitsType(t));
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  auto c = [&](int64_t v) { return llvm::ConstantInt::get(i32, v); };

  llvm::Value* x = b.CreateZExt(fn->getArg(0), i32);
  if (t == DType::kBF16) {
    b.CreateRet(b.CreateBitCast(b.CreateShl(x, 16), f32));
    return fn;
  }
  const int ebits = f.bits - 1 - f.mbits;
  const int64_t emask = (int64_t{1} << ebits) - 1;
  const int64_t mmask = (int64_t{1} << f.mbits) - 1;
  llvm::Value* sign =
      b.CreateShl(b.CreateAnd(x, c(int64_t{1} << (f.bits - 1))), 32 - f.bits);
  llvm::Value* e = b.CreateAnd(b.CreateLShr(x, f.mbits), c(emask));
  llvm::Value* m = b.CreateAnd(x, c(mmask));
  llvm::Value* normal =
      b.CreateOr(b.CreateShl(b.CreateAdd(e, c(127 - f.bias)), 23),
                 b.CreateShl(m, 23 - f.mbits));
  llvm::Value* sub = b.CreateBitCast(
      b.CreateFMul(
          b.CreateUIToFP(m, f32),
          llvm::ConstantFP::get(f32, std::ldexp(1.0, 1 - f.bias - f.mbits))),
      i32);
  llvm::Value* special;
  llvm::Value* is_special;
  if (f.ieee) {
    special = b.CreateOr(c(0x7f800000), b.CreateShl(m, 23 - f.mbits));
    is_special = b.CreateICmpEQ(e, c(emask));
  } else {
    special = c(0x7fc00000);
    is_special = b.CreateICmpEQ(b.CreateAnd(x, c(0x7f)), c(0x7f));
  }
  llvm::Value* mag =
      b.CreateSelect(b.CreateICmpEQ(e, c(0)), sub,
                     b.CreateSelect(is_special, special, normal));
  b.CreateRet(b.CreateBitCast(b.CreateOr(mag, sign), f32));
  return fn;
}

llvm::Function* NarrowFloats::RoundToOddFn() {
  const std::string name = "kiln.f64_to_f32_odd";
  if (auto it = cache_.find(name); it != cache_.end()) return it->second;
  llvm::LLVMContext& ctx = module_->getContext();
  llvm::Type* i32 = llvm::Type::getInt32Ty(ctx);
  llvm::Type* f32 = llvm::Type::getFloatTy(ctx);
  llvm::Type* f64 = llvm::Type::getDoubleTy(ctx);
  llvm::Function* fn = Helper(name, f32, f64);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(ctx, "entry", fn));
  llvm::Value* d = fn->getArg(0);
  llvm::Value* f = b.CreateFPTrunc(d, f32);
  llvm::Value* back = b.CreateFPExt(f, f64);
  // Exact, or NaN (unordered): keep the RNE result.
  llvm::Value* keep = b.CreateFCmpUEQ(back, d);
  llvm::Value* bits = b.CreateBitCast(f, i32);
  // RNE rounded away from zero: step back one ulp towards zero (this also
  // turns an overflow to infinity into the largest finite f32).
  llvm::Value* away =
      b.CreateFCmpOGT(b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, back),
                      b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, d));
  bits = b.CreateSelect(away, b.CreateSub(bits, llvm::ConstantInt::get(i32, 1)),
                        bits);
  bits = b.CreateOr(bits, llvm::ConstantInt::get(i32, 1));
  b.CreateRet(b.CreateSelect(keep, f, b.CreateBitCast(bits, f32)));
  return fn;
}

llvm::Value* NarrowFloats::F64ToF32RoundToOdd(llvm::IRBuilder<>& b,
                                              llvm::Value* x) {
  return b.CreateCall(RoundToOddFn(), {x});
}

llvm::Value* NarrowFloats::FromF32(llvm::IRBuilder<>& b, llvm::Value* x,
                                   DType t) {
  if (t == DType::kF16 && use_f16c_) {
    return b.CreateBitCast(b.CreateFPTrunc(x, b.getHalfTy()), b.getInt16Ty());
  }
  return b.CreateCall(FromF32Fn(t), {x});
}

llvm::Value* NarrowFloats::FromF64(llvm::IRBuilder<>& b, llvm::Value* x,
                                   DType t) {
  return FromF32(b, F64ToF32RoundToOdd(b, x), t);
}

llvm::Value* NarrowFloats::ToF32(llvm::IRBuilder<>& b, llvm::Value* bits,
                                 DType t) {
  if (t == DType::kF16 && use_f16c_) {
    return b.CreateFPExt(b.CreateBitCast(bits, b.getHalfTy()), b.getFloatTy());
  }
  return b.CreateCall(ToF32Fn(t), {bits});
}

}  // namespace kiln::compiler::cpu
