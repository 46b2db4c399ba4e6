// PlanCluster (Hopper): a persistent warp-specialised kernel whose program
// asks for cluster(2, 1, 1) pairs its blocks along x when one ring copy
// does not depend on the x block index: both blocks of a pair (x = 2c,
// 2c + 1) need that tile, so each loads half its rows (whole 1024-byte
// swizzle atoms: 16-row multiples) and multicasts them to both.
#include "compiler/codegen/gpu/kernel_source_internal.h"
#include "compiler/codegen/gpu/planners.h"

namespace kiln::compiler::gpu {

void PlanCluster(const Kernel& k, KernelPlan* plan) {
  LaunchPlan& l = plan->launch;
  if (!l.persistent || k.cluster.empty() || k.block_vars.empty()) return;
  for (size_t d = 0; d < k.cluster.size(); ++d) {
    auto c = FoldInt(k.cluster[d]);
    if (!c || *c != (d == 0 ? 2 : 1)) return;
  }
  const std::string& bx = k.block_vars[0];
  const FragmentPlan& frag = plan->fragments;
  for (const Stmt& s : plan->ws.loop->body) {
    auto* c = std::get_if<CopyStmt>(&s.node);
    if (!c || !c->src.has_slices || c->src.slices.size() != 2) continue;
    bool uses_bx = false;
    for (const Slice& sl : c->src.slices) {
      std::set<std::string> used;
      if (sl.kind != Slice::Kind::kFull) internal::ExprUses(sl.start, &used);
      uses_bx |= used.count(bx) > 0;
    }
    auto t = frag.tiles.find(c->dst.name);
    if (uses_bx || t == frag.tiles.end() || t->second.dims.size() != 2 ||
        !frag.wgmma_tiles.count(c->dst.name) || t->second.dims[0] % 16 != 0) {
      continue;
    }
    l.cluster_x = 2;
    l.multicast_tile = c->dst.name;
    return;
  }
}

}  // namespace kiln::compiler::gpu
