// Hopper's tensor maps (TMA), shared by the planners that decide them
// (plan_tma.cc) and the emitter that prints the loads and stores through
// them (tma_loop.cc, gpu/tile_ops.cc): one function per map kind, so that
// the plan and the printed code cannot disagree on a box or a swizzle.
#ifndef KILN_COMPILER_CODEGEN_CUDA_HOPPER_TMA_MAPS_H_
#define KILN_COMPILER_CODEGEN_CUDA_HOPPER_TMA_MAPS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/codegen/gpu/kernel_plan.h"
#include "compiler/codegen/metadata_writer.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler::gpu {

// How a TMA load fills a rank-2 wgmma operand tile: swizzled panels of
// `span` bytes per row (128, 64 or 32: the widest dividing a row), each
// `panel_elems` columns and `panel_bytes` bytes, `panels` of them.
struct TmaPanels {
  int64_t span = 0, panel_elems = 0, panel_bytes = 0, panels = 0;
  int64_t bytes() const { return panels * panel_bytes; }
};
TmaPanels TmaPanelsOf(const std::vector<int64_t>& dims, DType dtype);

// The map of `c`, a copy of a tensor region into a tile of `dims` and
// `dtype`, loading `half_rows` rows per block of a cluster pair (0: all).
TensorMapSpec TmaLoadSpec(const CopyStmt& c, const std::vector<int64_t>& dims,
                          DType dtype, int64_t half_rows);

// The map of a TMA store of accumulator `acc` (whole) to `tensor` (dtype
// `out`, rank `rank`) along its dim `row_dim` (the tile's rows): a
// warpgroup accumulator of a warp-specialised kernel held by every
// consumer warpgroup, in 64-column chunks, to a 16-bit tensor of rank 2 to
// 5 (64 x 64 boxes, 128-byte swizzle). nullopt: not TMA-storable.
std::optional<TensorMapSpec> TmaStoreSpec(const KernelPlan& plan,
                                          const RegisterFragment& acc,
                                          DType out, const std::string& tensor,
                                          size_t rank, size_t row_dim);

// The index of `spec` in the plan's maps, or -1.
int TmaMapIndex(const TmaPlan& tma, const TensorMapSpec& spec);

}  // namespace kiln::compiler::gpu

#endif  // KILN_COMPILER_CODEGEN_CUDA_HOPPER_TMA_MAPS_H_
