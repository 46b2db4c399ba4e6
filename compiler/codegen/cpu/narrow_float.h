// Conversions between f32/f64 and the narrow float formats (f16, bf16,
// f8e4m3, f8e5m2), emitted as small internal LLVM functions made of integer
// and f32 operations only, so the shared object needs no compiler-rt or
// libgcc helper. Internal to the CPU back end (includes LLVM headers).
//
// Rounding is to nearest, ties to even, everywhere. Overflow gives infinity
// for f16, bf16 and f8e5m2 and saturates to the largest finite value (448)
// for f8e4m3 (OCP FP8, "FN": no infinities), infinities included. NaN stays
// NaN (a quiet NaN of the target, sign kept). f64 sources are first narrowed
// to f32 with round-to-odd, which makes the second rounding exact.
#ifndef KILN_COMPILER_CODEGEN_CPU_NARROW_FLOAT_H_
#define KILN_COMPILER_CODEGEN_CPU_NARROW_FLOAT_H_

#include <map>
#include <string>

#include "compiler/ir/dtype.h"
#include "llvm/IR/IRBuilder.h"
#include "llvm/IR/Module.h"

namespace kiln::compiler::cpu {

class NarrowFloats {
 public:
  // `use_f16c`: the target has F16C, so f16 uses the native `half`
  // conversions (vcvtps2ph / vcvtph2ps) instead of the integer sequence.
  NarrowFloats(llvm::Module* module, bool use_f16c)
      : module_(module), use_f16c_(use_f16c) {}

  // Is `t` one of the formats handled here?
  static bool IsNarrow(DType t);
  // The integer type holding one element of `t` (i16 or i8).
  llvm::IntegerType* BitsType(DType t) const;

  // The bits of f32 `x` rounded to `t`.
  llvm::Value* FromF32(llvm::IRBuilder<>& b, llvm::Value* x, DType t);
  // The bits of f64 `x` rounded (once) to `t`.
  llvm::Value* FromF64(llvm::IRBuilder<>& b, llvm::Value* x, DType t);
  // The f32 value (exact) of the bits `bits` of `t`.
  llvm::Value* ToF32(llvm::IRBuilder<>& b, llvm::Value* bits, DType t);
  // f64 `x` narrowed to f32 rounding to odd (exact values stay exact).
  llvm::Value* F64ToF32RoundToOdd(llvm::IRBuilder<>& b, llvm::Value* x);

 private:
  llvm::Function* Helper(const std::string& name, llvm::Type* ret,
                         llvm::Type* arg);
  llvm::Function* FromF32Fn(DType t);
  llvm::Function* ToF32Fn(DType t);
  llvm::Function* RoundToOddFn();

  llvm::Module* module_;
  bool use_f16c_;
  std::map<std::string, llvm::Function*> cache_;
};

}  // namespace kiln::compiler::cpu

#endif  // KILN_COMPILER_CODEGEN_CPU_NARROW_FLOAT_H_
