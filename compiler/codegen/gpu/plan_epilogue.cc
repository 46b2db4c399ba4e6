// PlanEpilogue: a program's own staging tile for a warpgroup accumulator
// (`copy Acc -> X` then `copy X -> T[...]`, X used by nothing else, 16-bit,
// the accumulator's shape, stored to a region a TMA box fills) is skipped
// in a warp-specialised kernel: the accumulator is stored straight to T
// (through TMA where the emitter can build the map, else register stores)
// and X is not allocated.
#include "compiler/codegen/gpu/kernel_source_internal.h"
#include "compiler/codegen/gpu/planners.h"
#include "compiler/codegen/gpu/stmt_access.h"

namespace kiln::compiler::gpu {

void PlanEpilogue(const Kernel& k, const GpuDialect& dialect,
                  KernelPlan* plan) {
  if (!plan->WarpSpecialised() || !dialect.tma) return;
  const FragmentPlan& frag = plan->fragments;
  std::map<std::string, const Param*> tensors;
  for (const Param& p : k.params) {
    if (p.is_tensor) tensors[p.name] = &p;
  }
  const std::map<std::string, int> users = TopLevelUsers(k, frag);
  auto count = [&](const std::string& n) {
    auto it = users.find(n);
    return it == users.end() ? 0 : it->second;
  };
  for (size_t i = 0; i + 1 < k.body.size(); ++i) {
    auto* c1 = std::get_if<CopyStmt>(&k.body[i].node);
    auto* c2 = std::get_if<CopyStmt>(&k.body[i + 1].node);
    if (!c1 || !c2 || !Whole(c1->src) || !Whole(c1->dst) || !Whole(c2->src) ||
        c2->src.name != c1->dst.name || count(c1->dst.name) != 2) {
      continue;
    }
    const std::string& x = c1->dst.name;
    auto acc = frag.registers.find(c1->src.name);
    auto tile = frag.tiles.find(x);
    auto out = tensors.find(c2->dst.name);
    if (acc == frag.registers.end() || !acc->second.warpgroup ||
        tile == frag.tiles.end() || out == tensors.end() ||
        !InSharedMemory(frag, x) || frag.wgmma_tiles.count(x) ||
        (tile->second.dtype != DType::kF16 &&
         tile->second.dtype != DType::kBF16) ||
        out->second->dtype != tile->second.dtype ||
        tile->second.dims !=
            std::vector<int64_t>{acc->second.m, acc->second.n} ||
        !internal::IsTileRegion(*out->second, c2->dst, tile->second.dims)) {
      continue;
    }
    plan->epilogue.staged_stores.insert(&k.body[i]);
    plan->epilogue.elided_tiles.insert(x);
    plan->epilogue.descriptions.push_back(
        StrCat(c1->src.name, " -> ", c2->dst.name, " (", x, " not allocated)"));
  }
}

}  // namespace kiln::compiler::gpu
