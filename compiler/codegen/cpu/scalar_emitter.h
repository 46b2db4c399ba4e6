// Scalar values of the tile IR as LLVM values: the register type of each IR
// type (tile-ir.md §3), conversions, operators and builtins with the IR's
// semantics. Internal to the CPU back end (includes LLVM headers).
//
// Register representation:
//   int (untyped integer), i64 -> i64;  i32/u32 -> i32;  i16 -> i16;
//   i8/u8 -> i8;  i4/u4 -> i4;  bool -> i1;  f32 -> float;  f64 -> double;
//   float (an untyped float expression) -> double, narrowed when it meets
//   a float dtype (or to f32 when it stands alone);
//   f16, bf16, f8e4m3, f8e5m2 -> float holding a value exactly
//   representable in the dtype: every operation on them computes in f32 and
//   rounds its result back to the dtype.
// Integer operations wrap; `/` and `%` are floor division and modulo, with
// x / 0 == 0, x % 0 == x and INT_MIN / -1 == INT_MIN (no trap); shifts by a
// count outside [0, width) give 0 (or the sign for an arithmetic `>>`).
// Float to integer conversions saturate (NaN gives 0).
#ifndef KILN_COMPILER_CODEGEN_CPU_SCALAR_EMITTER_H_
#define KILN_COMPILER_CODEGEN_CPU_SCALAR_EMITTER_H_

#include <span>
#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/codegen/cpu/narrow_float.h"
#include "compiler/ir/ir.h"
#include "compiler/ir/type_check.h"
#include "llvm/IR/IRBuilder.h"

namespace kiln::compiler::cpu {

// A value with its IR type.
struct TypedValue {
  Type type;
  llvm::Value* value = nullptr;
};

class ScalarEmitter {
 public:
  ScalarEmitter(llvm::IRBuilder<>* builder, llvm::Module* module,
                NarrowFloats* narrow)
      : b_(*builder), module_(module), narrow_(*narrow) {}

  // The register type of `t` (above). nullptr for Type::Error().
  llvm::Type* RegType(Type t) const;

  TypedValue Int(int64_t v);
  TypedValue Float(double v);
  TypedValue Bool(bool v);

  // `v` converted to `to` (a cast, or an implicit conversion of §3).
  absl::StatusOr<TypedValue> Convert(TypedValue v, Type to);
  // An integer index as i64 (sign- or zero-extended by its type).
  absl::StatusOr<llvm::Value*> ToIndex(TypedValue v);

  absl::StatusOr<TypedValue> Unary(UnaryOp op, TypedValue a);
  // Every binary operator; `&&` and `||` evaluate both sides (the caller
  // short-circuits when the right side may fault).
  absl::StatusOr<TypedValue> Binary(BinaryOp op, TypedValue a, TypedValue b);
  // Builtins, `select` included (both branches evaluated).
  absl::StatusOr<TypedValue> Call(std::string_view name,
                                  std::span<const TypedValue> args);

  // Element storage: the in-memory type of one element of `t` (i8 for bool,
  // f8 and the packed i4/u4 byte, i16 for f16/bf16).
  llvm::Type* StorageType(DType t) const;
  // A register value of Type::Of(t) as storage bits, and back. Not for
  // i4/u4 (the caller packs nibbles).
  llvm::Value* ToStorage(llvm::Value* reg, DType t);
  llvm::Value* FromStorage(llvm::Value* bits, DType t);

 private:
  // `v` (a float register holding a value of `t`'s range) rounded to the
  // narrow dtype of `t`; unchanged for other types.
  llvm::Value* Round(llvm::Value* v, Type t);
  llvm::Value* DivMod(bool mod, bool is_signed, llvm::Value* a, llvm::Value* b);
  llvm::Value* CeilDiv(bool is_signed, llvm::Value* a, llvm::Value* b);
  llvm::Value* Shift(BinaryOp op, bool is_signed, llvm::Value* a,
                     llvm::Value* b);
  absl::StatusOr<TypedValue> Compare(BinaryOp op, TypedValue a, TypedValue b);
  absl::StatusOr<TypedValue> MathFunction(std::string_view name, TypedValue x);
  llvm::Value* LibmCall(const char* name, llvm::Value* x);

  llvm::IRBuilder<>& b_;
  llvm::Module* module_;
  NarrowFloats& narrow_;
};

// Typing helpers shared with the statement emitter.
bool IsSignedType(Type t);  // int and signed integer dtypes
int IntegerBits(Type t);    // 64 for int
bool IsDoubleReg(Type t);   // f64 and untyped float

}  // namespace kiln::compiler::cpu

// Status plumbing for the back end's .cc files.
#define KILN_CG_CONCAT_INNER(a, b) a##b
#define KILN_CG_CONCAT(a, b) KILN_CG_CONCAT_INNER(a, b)
#define KILN_CG_RETURN_IF_ERROR(expr)                \
  do {                                               \
    absl::Status kiln_cg_status = (expr);            \
    if (!kiln_cg_status.ok()) return kiln_cg_status; \
  } while (0)
#define KILN_CG_ASSIGN_OR_RETURN(lhs, expr)                                 \
  KILN_CG_ASSIGN_OR_RETURN_IMPL(KILN_CG_CONCAT(kiln_cg_or_, __LINE__), lhs, \
                                expr)
#define KILN_CG_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                  \
  if (!tmp.ok()) return tmp.status();                 \
  lhs = std::move(*tmp)

#endif  // KILN_COMPILER_CODEGEN_CPU_SCALAR_EMITTER_H_
