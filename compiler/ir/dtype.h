// Scalar element types of the tile IR and their properties.
#ifndef KILN_COMPILER_IR_DTYPE_H_
#define KILN_COMPILER_IR_DTYPE_H_

#include <optional>
#include <string_view>

namespace kiln::compiler {

enum class DType {
  kBool,
  kI8,
  kU8,
  kI16,
  kI32,
  kI64,
  kU32,
  kF16,
  kBF16,
  kF32,
  kF64,
  kF8E4M3,
  kF8E5M2,
  kI4,
  kU4,  // packed two per byte, low nibble first along the last dim
};

// The spelling used in the textual IR ("f16", "f8e4m3", ...).
std::string_view DTypeName(DType t);
// Inverse of DTypeName; nullopt for an unknown name.
std::optional<DType> ParseDType(std::string_view name);

// Size in bits of one element (4 for i4/u4, 1 is never returned: bool is 8).
int DTypeBits(DType t);
bool IsFloat(DType t);    // f16 bf16 f32 f64 f8e4m3 f8e5m2
bool IsInteger(DType t);  // i8..u32, i4, u4 (not bool)
bool IsSigned(DType t);   // signed integers and every float

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_DTYPE_H_
