// Scalar expressions of the tile IR as GPU (CUDA / HIP) C++ text, with the IR's
// typing and semantics (tile-ir.md §3; the CPU back end's scalar_emitter.h is
// the reference): the register C++ type of every IR type, implicit and explicit
// conversions, operators and builtins. The device library (kiln/scalar)
// supplies rounding, floor division, shifts and saturating casts.
//
// Register representation: int and i64 -> long long; i32 int; u32 unsigned;
// i16 short; i8 and i4 signed char; u8 and u4 unsigned char; bool bool;
// f32 float; f64 and untyped float double; f16, bf16, f8e4m3, f8e5m2 float
// holding a value exactly representable in the dtype (every operation
// rounds its result with kiln::round_to).
#ifndef KILN_COMPILER_CODEGEN_GPU_EXPR_EMITTER_H_
#define KILN_COMPILER_CODEGEN_GPU_EXPR_EMITTER_H_

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/ir.h"
#include "compiler/ir/type_check.h"

namespace kiln::compiler::gpu {

// A C++ expression with its IR type.
struct CExpr {
  std::string code;
  Type type;
};

// C++ register type of an IR type ("long long", "float", ...).
std::string RegType(Type t);
// C++ storage type of one element of `t` in memory ("unsigned short" for
// f16/bf16, "unsigned char" for bool, f8 and packed i4/u4).
std::string StorageType(DType t);
// The device library's tag for a narrow float ("kiln::f16_t"); empty for
// other types.
std::string NarrowTag(DType t);
// A C++ identifier for an IR name (IR names that are C++ keywords or GPU
// builtins get a suffix).
std::string Mangle(const std::string& name);

// `v` converted to `to`.
CExpr Convert(const CExpr& v, Type to);

class ExprEmitter {
 public:
  // Resolves a variable name to its C++ expression and type.
  using VarFn = std::function<absl::StatusOr<CExpr>(const std::string&)>;
  // Emits an element load `name[indices]` (indices already C++ of type
  // long long).
  using LoadFn = std::function<absl::StatusOr<CExpr>(
      const std::string& name, const std::vector<Expr>& indices)>;

  // Whether a divisor stays the same across the elements a statement runs
  // over together (a register row vector in a fragment loop): an f32
  // division by it is emitted as a multiplication by its correctly rounded
  // reciprocal, which the compiler computes once per value.
  using InvariantFn = std::function<bool(const Expr& divisor)>;

  ExprEmitter(VarFn var, LoadFn load, InvariantFn invariant = nullptr)
      : var_(std::move(var)),
        load_(std::move(load)),
        invariant_(std::move(invariant)) {}

  absl::StatusOr<CExpr> Emit(const Expr& e);
  // Emits `e` converted to a 64-bit index (long long).
  absl::StatusOr<std::string> Index(const Expr& e);

 private:
  absl::StatusOr<CExpr> Binary(BinaryOp op, CExpr a, CExpr b,
                               bool invariant_divisor = false);
  absl::StatusOr<CExpr> Call(const std::string& name, std::vector<CExpr> args);

  VarFn var_;
  LoadFn load_;
  InvariantFn invariant_;
};

}  // namespace kiln::compiler::gpu

#endif  // KILN_COMPILER_CODEGEN_GPU_EXPR_EMITTER_H_
