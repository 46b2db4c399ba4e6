// Metadata writer: the launch-metadata text of a kernel handle (format v1,
// compiler/docs/kernel-handle.md), from a kernel in the lowered form. The
// reader is runtime/kernel_metadata.h; both change together.
#ifndef KILN_COMPILER_CODEGEN_METADATA_WRITER_H_
#define KILN_COMPILER_CODEGEN_METADATA_WRITER_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler {

// A TMA tensor map a CUDA kernel takes (a `tensormap` record): built by
// the runtime at launch for tensor parameter `param`, with this box
// (innermost dim first) and swizzle span in bytes (0, 32, 64 or 128).
struct TensorMapSpec {
  std::string param;
  int swizzle = 0;
  std::vector<int64_t> box;
  bool operator==(const TensorMapSpec&) const = default;
};

// What the metadata says beyond the kernel itself.
struct MetadataOptions {
  std::string target;  // "cpu", "sm_80", ...
  std::string entry;   // the symbol to call or launch
  int64_t shared_bytes = 0;
  // The block launched when it is not the kernel's threads(...) (a
  // producer warpgroup added by the compiler); 0: threads(...).
  int64_t block_threads = 0;
  std::vector<TensorMapSpec> tensor_maps;
  // The kernel walks its grid itself (a `persistent` record): the runtime
  // launches min(grid blocks, multiprocessors) blocks along x.
  bool persistent = false;
  // The cluster the kernel is written for, when the back end decides it
  // (instead of the program's cluster(...)).
  std::optional<std::array<int64_t, 3>> cluster;
};

// The prefix S-expression of an integer expression (kernel-handle.md,
// "Expressions"): `ceildiv(N, 128)` -> `(ceildiv N 128)`, `-x` -> `(neg x)`,
// `true` -> `1`, `abs(x)` -> `(max x (neg x))`, and the bit operations that
// are powers of two: `x << 3` -> `(* x 8)`, `x >> 3` -> `(/ x 8)`,
// `x & 7` -> `(% x 8)` (exact for negative x too: `/` and `%` floor).
// nullopt for anything else the format cannot say: floats, loads, casts,
// other bit operations, select and the float builtins. Names are written as
// they are; the caller decides which names are allowed.
std::optional<std::string> ToSExpr(const Expr& e);

// The dynamic symbols of `kernel`: the names among its tensor parameters'
// dims, in order of first appearance over the parameters (the ABI order of
// the entry's `symbols` array).
std::vector<std::string> DynamicSymbols(const Kernel& kernel);

// The whole metadata document for `lowered`. Grid extents are padded to 3
// with 1; `block` is `threads 1 1`; `cluster` is 1 1 1 when absent. Each
// assumption carries its canonical source text (compiler::Print).
// Returns InvalidArgument for an assumption over floats (a float literal,
// scalar, cast or builtin: the verifier rejects those, assumptions being
// integer facts), and when an expression of the launch (grid, threads,
// cluster, strides, integer assumptions) cannot be written as an
// S-expression (e.g. `x ^ 1`, `select`), or uses a name the
// runtime cannot bind (only dynamic symbols and integer or bool scalar
// parameters are bound at launch), or a dim is neither an integer nor a name.
absl::StatusOr<std::string> WriteKernelMetadata(const Kernel& lowered,
                                                const MetadataOptions& options);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_CODEGEN_METADATA_WRITER_H_
