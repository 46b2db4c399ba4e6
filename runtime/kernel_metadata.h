// The launch metadata of a kernel handle (format v1, compiler/docs/
// kernel-handle.md), as the runtime reads it. The writer is
// compiler/codegen/metadata_writer.h; both change together.
#ifndef KILN_RUNTIME_KERNEL_METADATA_H_
#define KILN_RUNTIME_KERNEL_METADATA_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/expr_eval.h"

namespace kiln::runtime {

// Element types, as spelled in the tile IR and the metadata.
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
  kU4,
};
std::string_view DTypeName(DType t);  // "f16", ...
std::optional<DType> ParseDType(std::string_view name);
int DTypeBits(DType t);         // 4 for i4/u4, 8 for bool
bool IsIntegerOrBool(DType t);  // bool, i*, u*

// One dim of a tensor parameter: a constant, or a dynamic symbol.
struct MetadataDim {
  int64_t value = 0;
  std::string symbol;  // empty: constant `value`
  bool is_symbol() const { return !symbol.empty(); }
};

struct MetadataParam {
  std::string name;
  bool is_tensor = false;
  DType dtype = DType::kF32;
  std::vector<MetadataDim> shape;  // tensors
  std::vector<IntExpr> strides;    // empty: row-major
  bool written = false;  // the kernel may write it (a `writes` record)
};

struct MetadataAssumption {
  IntExpr expr;
  std::string text;  // the source spelling, for error messages
};

// What ptxas reported for a GPU binary (the `ptxas` record; CUDA targets).
struct PtxasReport {
  int64_t registers = -1;  // per thread; -1: no report
  int64_t spill_stores = 0;
  int64_t spill_loads = 0;
  int64_t stack_bytes = 0;
  int64_t static_shared_bytes = 0;
};

// A TMA tensor map the kernel takes after its symbols (a `tensormap`
// record; CUDA sm_90a): built at launch for tensor parameter `param` with
// this box (innermost dim first, one per tensor dim) and swizzle span in
// bytes (0, 32, 64, 128).
struct MetadataTensorMap {
  std::string param;
  int swizzle = 0;
  std::vector<int64_t> box;
};

struct KernelMetadata {
  int version = 1;
  std::string name;
  std::string target;
  std::string entry;
  std::vector<std::string> symbols;   // dynamic symbols, in ABI order
  std::vector<MetadataParam> params;  // in launch argument order
  std::array<IntExpr, 3> grid;
  std::array<IntExpr, 3> block;
  std::array<IntExpr, 3> cluster = {IntExpr::Constant(1), IntExpr::Constant(1),
                                    IntExpr::Constant(1)};
  int64_t shared_bytes = 0;
  std::vector<MetadataAssumption> assumptions;
  std::vector<MetadataTensorMap> tensor_maps;  // kernel parameters, in order
  // The kernel walks `grid` itself (a `persistent` record): launch
  // min(grid blocks, blocks resident at once on the device) blocks along x
  // (CUDA).
  bool persistent = false;
  PtxasReport ptxas;
};

// Parses and validates a metadata document. Errors are InvalidArgument
// starting with "line N: " and saying what is wrong: a first line that is not
// `kiln-kernel 1` (another version is named as such), an unknown record, a
// wrong field count, a bad dtype, integer or expression, a duplicate record,
// parameter or symbol, strides for an unknown or scalar parameter or of the
// wrong count, an expression using a name that is neither a dynamic symbol
// nor an integer scalar parameter, a listed symbol no tensor dim binds, a
// tensor map of an unknown or scalar parameter, with a box of the wrong
// rank or an unknown swizzle, a `writes` record naming a parameter not
// declared before it or a scalar, a missing required record (name, target,
// entry, symbols, grid, block).
absl::StatusOr<KernelMetadata> ParseKernelMetadata(std::string_view text);

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_KERNEL_METADATA_H_
