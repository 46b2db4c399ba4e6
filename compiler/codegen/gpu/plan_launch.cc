// PlanLaunch: the block, persistence and the order blocks walk the grid in.
// 1. A warp-specialised kernel launches one more warpgroup (the producer).
//    It is persistent (one walk of the tiles per resident block) when its
//    loop only accumulates gemms (GEMM), or is fused over two or more
//    consumer warpgroups, whose blocks fill an SM alone (with one
//    warpgroup, several blocks per SM already overlap one another's
//    prologue and epilogue).
// 2. Blocks differ in work along x when every top-level loop starts at a
//    value constant in x and its trip count is proven to move one way with
//    x (causal attention: rising), in a kernel that does not rasterise. A
//    persistent kernel then walks x in mirrored pairs (x = g - 1 - p, then
//    x = p: every pair costs the same, so a static walk is balanced); a
//    launched one takes rising x in decreasing order (blocks start roughly
//    in index order: the longest go first, the last wave is the shortest).
// 3. Tensor-core kernels of 8+ warps whose register fragments leave room
//    (at most 64 accumulator registers per thread) ask for two blocks per
//    SM, so that each scheduler has four warps issuing mma.sync.
#include "compiler/codegen/gpu/planners.h"

namespace kiln::compiler::gpu {

namespace {

// The one way every top-level loop's trip count moves along x (kConstant:
// none moves; kUnknown: a start moves, a bound is not proven, the loops
// disagree, or the kernel rasterises).
Trend WorkAlongX(const Kernel& k, const KernelPlan& plan) {
  for (const Stmt& s : k.body) {
    if (std::holds_alternative<RasterizeStmt>(s.node)) return Trend::kUnknown;
  }
  Trend work = Trend::kConstant;
  for (const LoopFacts& l : plan.loops) {
    if (l.start_along_x != Trend::kConstant ||
        l.stop_along_x == Trend::kUnknown) {
      return Trend::kUnknown;
    }
    if (l.stop_along_x == Trend::kConstant) continue;
    if (work != Trend::kConstant && work != l.stop_along_x) {
      return Trend::kUnknown;
    }
    work = l.stop_along_x;
  }
  return work;
}

}  // namespace

void PlanLaunch(const Kernel& k, const GpuDialect& dialect, KernelPlan* plan) {
  LaunchPlan& l = plan->launch;
  const bool ws = plan->WarpSpecialised();
  l.launch_threads = l.threads + (ws ? 128 : 0);
  l.persistent = ws && (!plan->ws.fused || l.threads >= 256);

  bool rasterised = false;
  for (const Stmt& s : k.body) {
    rasterised |= std::holds_alternative<RasterizeStmt>(s.node);
  }
  const Trend work = WorkAlongX(k, *plan);
  if (rasterised) {
    l.walk = Walk::kRasterised;
  } else if (l.persistent &&
             (work == Trend::kRising || work == Trend::kFalling)) {
    l.walk = Walk::kMirroredPairsX;
  } else if (!l.persistent && work == Trend::kRising) {
    l.walk = Walk::kLongestFirstX;
  }

  int64_t fragment_regs = 0;
  for (const auto& [name, r] : plan->fragments.registers) {
    fragment_regs += r.regs();
  }
  l.min_blocks = !ws && dialect.launch_bounds_min_blocks && l.threads >= 256 &&
                         fragment_regs > 0 && fragment_regs <= 64
                     ? 2
                     : 1;
  // Without tensor-core work (no accumulators, no mma operands, no wgmma
  // tiles) a kernel is memory-bound: occupancy keeps bytes in flight, so
  // ptxas is not told that one block per multiprocessor will do (it would
  // spend registers on that: softmax f16 16k x 4k on the H200, 64 registers
  // and 0.33x copy bandwidth with a minimum of 1, 40 and 0.37x without).
  bool accumulator_rows = false;
  for (const auto& [name, r] : plan->fragments.rows) {
    accumulator_rows |= !r.owned();
  }
  if (dialect.launch_bounds_min_blocks && plan->fragments.registers.empty() &&
      !accumulator_rows && plan->fragments.packed.empty() &&
      plan->fragments.wgmma_tiles.empty()) {
    l.min_blocks = 0;
  }
}

}  // namespace kiln::compiler::gpu
