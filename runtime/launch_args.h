// Launch arguments and their binding against a kernel's metadata: checks
// every argument (kind, dtype, rank, constant dims, strides), binds the
// dynamic symbols from tensor shapes, checks the assumptions and evaluates
// the grid. Target-independent: the CPU runtime uses it, GPU runtimes can.
#ifndef KILN_RUNTIME_LAUNCH_ARGS_H_
#define KILN_RUNTIME_LAUNCH_ARGS_H_

#include <array>
#include <cstdint>
#include <cstring>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/kernel_metadata.h"

namespace kiln::runtime {

// One launch argument: a tensor (data pointer, dtype, shape in elements,
// optional element strides) or a scalar (its value's bytes).
struct ArgValue {
  bool is_tensor = false;
  DType dtype = DType::kF32;
  void* data = nullptr;          // tensor: the first element
  std::vector<int64_t> shape;    // tensor: elements per dim
  std::vector<int64_t> strides;  // tensor: element strides; empty: row-major
  alignas(8) unsigned char scalar[8] = {};  // scalar: the value's bytes

  // i4/u4 tensors are packed two per byte, low nibble first; `shape` counts
  // elements (nibbles).
  static ArgValue Tensor(void* data, DType dtype, std::vector<int64_t> shape,
                         std::vector<int64_t> strides = {});
  // A scalar from the bytes of `value` (sizeof(T) <= 8): f16/bf16 as their
  // 16-bit patterns (uint16_t), bool as one byte, f8 as uint8_t.
  template <typename T>
  static ArgValue Scalar(DType dtype, T value) {
    static_assert(sizeof(T) <= 8, "a scalar argument holds at most 8 bytes");
    ArgValue a;
    a.dtype = dtype;
    std::memcpy(a.scalar, &value, sizeof(T));
    return a;
  }
  static ArgValue F32(float v) { return Scalar(DType::kF32, v); }
  static ArgValue F64(double v) { return Scalar(DType::kF64, v); }
  static ArgValue I32(int32_t v) { return Scalar(DType::kI32, v); }
  static ArgValue I64(int64_t v) { return Scalar(DType::kI64, v); }
  static ArgValue U32(uint32_t v) { return Scalar(DType::kU32, v); }
  static ArgValue Bool(bool v) { return Scalar(DType::kBool, uint8_t{v}); }

  // The address the kernel ABI takes for this argument (args[i]).
  void* address() const {
    return is_tensor ? data : const_cast<unsigned char*>(scalar);
  }
  // An integer or bool scalar's value (sign- or zero-extended).
  std::optional<int64_t> IntegerValue() const;
};

// Everything a launch needs once the arguments are checked.
struct LaunchPlan {
  std::vector<void*> args;       // args[i] of the ABI
  std::vector<int64_t> symbols;  // dynamic symbols, in ABI order
  std::array<int64_t, 3> grid = {1, 1, 1};
  NameValues values;  // symbols and integer scalars, by name
  int64_t num_blocks() const { return grid[0] * grid[1] * grid[2]; }
};

// Checks `args` against `metadata` and binds the launch. InvalidArgument
// naming the parameter, the dim and the values, e.g.
//   parameter 'A' dim 1 is 100 but symbol K is 64 from 'B'
//   parameter 'A' dim 0 is 100 but the kernel was compiled for 64
//   parameter 'A' is f32 but the kernel takes f16
//   assumption 'K % 64 == 0' does not hold: K = 100
// and for a wrong argument count, tensor/scalar mismatch, rank, negative
// dims, a null tensor with elements, an odd last dim of an i4/u4 tensor,
// strides that differ from the kernel's, a negative or overflowing grid.
absl::StatusOr<LaunchPlan> BindLaunch(const KernelMetadata& metadata,
                                      absl::Span<const ArgValue> args);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_LAUNCH_ARGS_H_
