#include "compiler/codegen/gpu/plan_kernel.h"

#include "compiler/codegen/gpu/planners.h"
#include "compiler/ir/const_fold.h"
#include "compiler/ir/diagnostic.h"
#include "compiler/ir/format.h"

namespace kiln::compiler::gpu {

absl::StatusOr<KernelPlan> PlanKernel(const Kernel& k,
                                      const GpuDialect& dialect) {
  auto threads = FoldInt(k.threads);
  if (!threads || *threads < 1 || *threads > 1024) {
    return LocatedError(k.loc,
                        "threads(...) must be a constant in 1..1024 after "
                        "specialisation");
  }
  KernelPlan plan;
  plan.launch.threads = *threads;
  // 1. Where each tile lives and how fragments map to threads.
  plan.fragments = PlanFragments(k, *threads, dialect);
  // 2. Facts about the top-level loops (bounds resolved, trends proven).
  PlanLoops(k, &plan);
  // 3. The warp-specialised TMA ring (Hopper), which 4-7 build on.
  if (dialect.tma) PlanWarpSpecialised(k, dialect, &plan);
  // 4. Launch: persistence and the walk order.
  PlanLaunch(k, dialect, &plan);
  // 5-7. The producer's per-tile loads, cluster pairs and the overlap of a
  // fused loop (Hopper).
  if (plan.WarpSpecialised()) {
    PlanPreloads(k, &plan);
    PlanCluster(k, &plan);
    PlanOverlap(k, &plan);
  }
  // 8. The rings of pipelined loops.
  PlanRings(k, dialect, &plan);
  // 8b. Serial loops split at their whole tiles.
  PlanFullTiles(k, &plan);
  // 8c. Row reductions fused with the parallel writing their source.
  PlanFusedReductions(k, &plan);
  // 9. The epilogue path.
  PlanEpilogue(k, dialect, &plan);
  // 10. Shared tiles' lives and sharing.
  PlanSharedLives(k, &plan);
  // 11-13. The accumulator stores through TMA (Hopper), the shared-memory
  // layout, and the tensor maps (Hopper).
  if (dialect.tma) PlanTmaStores(k, dialect, &plan);
  PlanSharedLayout(k, dialect, &plan);
  if (dialect.tma) PlanTensorMaps(k, &plan);
  return plan;
}

}  // namespace kiln::compiler::gpu
