// The GPU planning passes, each deciding one part of the KernelPlan
// (kernel_plan.h) from the specialised kernel and the parts planned before
// it. PlanKernel (plan_kernel.h) runs them in order; tests call them one by
// one. Each reads the IR and the plan and writes only its own part.
#ifndef KILN_COMPILER_CODEGEN_GPU_PLANNERS_H_
#define KILN_COMPILER_CODEGEN_GPU_PLANNERS_H_

#include "compiler/codegen/gpu/gpu_dialect.h"
#include "compiler/codegen/gpu/kernel_plan.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler::gpu {

// plan.loops: every top-level loop with its bounds resolved and how they
// move along the x block index (plan_loops.cc).
void PlanLoops(const Kernel& k, KernelPlan* plan);

// plan.ws: the pipelined loop that becomes a warp-specialised TMA ring
// (needs dialect.tma; cuda/hopper/plan_warp_specialised.cc).
void PlanWarpSpecialised(const Kernel& k, const GpuDialect& dialect,
                         KernelPlan* plan);

// plan.launch: block size, persistence, walk order, minimum blocks per SM
// (plan_launch.cc).
void PlanLaunch(const Kernel& k, const GpuDialect& dialect, KernelPlan* plan);

// plan.ws.preloads: the per-tile copies the producer of a persistent
// warp-specialised kernel issues (cuda/hopper/plan_warp_specialised.cc).
void PlanPreloads(const Kernel& k, KernelPlan* plan);

// plan.ws.overlap: whether a fused ring loop is software-pipelined, and
// how (cuda/hopper/plan_overlap.cc).
void PlanOverlap(const Kernel& k, KernelPlan* plan);

// plan.launch.cluster_x / multicast_tile: cluster pairs sharing one ring
// tile's loads (cuda/hopper/plan_cluster.cc).
void PlanCluster(const Kernel& k, KernelPlan* plan);

// plan.epilogue: accumulators stored straight to global memory
// (plan_epilogue.cc).
void PlanEpilogue(const Kernel& k, const GpuDialect& dialect, KernelPlan* plan);

// plan.shared: tile lives and whether tiles share bytes (plan_shared.cc).
void PlanSharedLives(const Kernel& k, KernelPlan* plan);

// plan.tma.stores: the accumulator stores that may go through TMA
// (Hopper; cuda/hopper/plan_tma.cc).
void PlanTmaStores(const Kernel& k, const GpuDialect& dialect,
                   KernelPlan* plan);

// plan.shared placement: every shared-memory byte range's offset, the
// TMA staging chunks and the per-tile loads' second slots where they fit
// (plan_shared.cc).
void PlanSharedLayout(const Kernel& k, const GpuDialect& dialect,
                      KernelPlan* plan);

// plan.tma.maps: the tensor maps, in the order the kernel uses them
// (Hopper; cuda/hopper/plan_tma.cc).
void PlanTensorMaps(const Kernel& k, KernelPlan* plan);

// The rings of `pipelined` loops (plan_rings.cc): which copies go through
// each, whether the TMA ring takes them, and the whole-tile version.
void PlanRings(const Kernel& k, const GpuDialect& dialect, KernelPlan* plan);

// plan.full_tiles: serial loops run as the iterations whose copies move
// whole tiles, then the edge ones (plan_full_tiles.cc; after the rings).
void PlanFullTiles(const Kernel& k, KernelPlan* plan);

// plan.fused_reductions: row reductions of thread-owned fragments fused
// with the `parallel` just before them that writes their source
// (plan_fused_reductions.cc; after the fragment plan).
void PlanFusedReductions(const Kernel& k, KernelPlan* plan);

}  // namespace kiln::compiler::gpu

#endif  // KILN_COMPILER_CODEGEN_GPU_PLANNERS_H_
