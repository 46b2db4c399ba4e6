#include "compiler/ir/dtype.h"

#include <array>
#include <utility>

namespace kiln::compiler {
namespace {

struct DTypeInfo {
  DType type;
  std::string_view name;
  int bits;
};

constexpr std::array<DTypeInfo, 15> kDTypes = {{
    {DType::kBool, "bool", 8},
    {DType::kI8, "i8", 8},
    {DType::kU8, "u8", 8},
    {DType::kI16, "i16", 16},
    {DType::kI32, "i32", 32},
    {DType::kI64, "i64", 64},
    {DType::kU32, "u32", 32},
    {DType::kF16, "f16", 16},
    {DType::kBF16, "bf16", 16},
    {DType::kF32, "f32", 32},
    {DType::kF64, "f64", 64},
    {DType::kF8E4M3, "f8e4m3", 8},
    {DType::kF8E5M2, "f8e5m2", 8},
    {DType::kI4, "i4", 4},
    {DType::kU4, "u4", 4},
}};

const DTypeInfo& Info(DType t) { return kDTypes[static_cast<int>(t)]; }

}  // namespace

std::string_view DTypeName(DType t) { return Info(t).name; }

std::optional<DType> ParseDType(std::string_view name) {
  for (const DTypeInfo& info : kDTypes) {
    if (info.name == name) return info.type;
  }
  return std::nullopt;
}

int DTypeBits(DType t) { return Info(t).bits; }

bool IsFloat(DType t) {
  switch (t) {
    case DType::kF16:
    case DType::kBF16:
    case DType::kF32:
    case DType::kF64:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return true;
    default:
      return false;
  }
}

bool IsInteger(DType t) { return t != DType::kBool && !IsFloat(t); }

bool IsSigned(DType t) {
  switch (t) {
    case DType::kI8:
    case DType::kI16:
    case DType::kI32:
    case DType::kI64:
    case DType::kI4:
      return true;
    default:
      return IsFloat(t);
  }
}

}  // namespace kiln::compiler
