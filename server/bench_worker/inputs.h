// Benchmark inputs made from a kernel's parameter ABI (its launch
// metadata) at a given shape: one buffer per tensor parameter, filled with
// seeded random values that are never zero, and a value per scalar. The
// same seed and shape give the same bytes, so every candidate of a tuning
// run sees the same inputs.
#ifndef KILN_SERVER_BENCH_WORKER_INPUTS_H_
#define KILN_SERVER_BENCH_WORKER_INPUTS_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/kernel_metadata.h"
#include "runtime/launch_args.h"

namespace kiln::bench {

struct Inputs {
  // One per tensor parameter (empty for scalars), in parameter order.
  std::vector<std::vector<unsigned char>> buffers;
  // The launch arguments; tensors point into `buffers`.
  std::vector<runtime::ArgValue> args;
};

// Values of the symbols and integer scalars by name.
using ShapeValues = std::map<std::string, int64_t>;

// Random inputs for `metadata` at `shape`:
// - a tensor dim that is a symbol takes shape[symbol]; strides are
//   evaluated over the shape;
// - floats are uniform in +-[1/32, 1] (f16, bf16, f8 drawn as bit patterns
//   in that range), signed integers in +-[1, 8], unsigned in [1, 15],
//   bools 0 or 1;
// - an integer scalar takes shape[name] when given, else 1; a float scalar
//   a value in [0.5, 1.5].
// InvalidArgument naming the symbol when shape lacks one, or for a
// negative dim or a buffer over `max_bytes`.
absl::StatusOr<Inputs> MakeInputs(const runtime::KernelMetadata& metadata,
                                  const ShapeValues& shape, uint64_t seed,
                                  uint64_t max_bytes = uint64_t{8} << 30);

// Bytes of `elements` elements of `dtype` (i4/u4 packed two per byte).
uint64_t TensorBytes(runtime::DType dtype, int64_t elements);

}  // namespace kiln::bench

#endif  // KILN_SERVER_BENCH_WORKER_INPUTS_H_
