// Hopper's TMA planning: which accumulator stores go through TMA, and the
// tensor maps a warp-specialised kernel takes.
//
// PlanTmaStores: in a warp-specialised kernel on a target that pairs
// accumulator stores, a copy of a whole warpgroup accumulator (held by
// every consumer warpgroup) to a 16-bit tensor region that a tile of the
// accumulator's shape fills (two free dims, the innermost contiguous;
// rank 2 to 5) in 64-column multiples is a TMA store candidate: each
// consumer warpgroup writes 64 x 64 chunks into shared staging and one
// thread stores them with cp.async.bulk.tensor. A staged pair (plan.
// epilogue) counts with its first copy. PlanSharedLayout then decides
// whether the staging chunks fit; where they do not, no store uses TMA.
//
// PlanTensorMaps: the maps in the order the kernel first uses them,
// walking the body as it runs (the bodies of `for`s and `if`s in order):
// a per-tile load (ws.preloads) at its copy, the ring's copies at the
// warp-specialised loop when its ring is the TMA ring (a cluster pair's
// multicast tile: half its rows), a TMA store at its copy. Equal maps are
// passed once.
#include <functional>

#include "compiler/codegen/cuda/hopper/tma_maps.h"
#include "compiler/codegen/gpu/kernel_source_internal.h"
#include "compiler/codegen/gpu/planners.h"

namespace kiln::compiler::gpu {

TmaPanels TmaPanelsOf(const std::vector<int64_t>& dims, DType dtype) {
  const int64_t eb = DTypeBits(dtype) / 8;
  const int64_t row_bytes = dims[1] * eb;
  TmaPanels p;
  p.span = SwizzleSpanBytes(row_bytes);
  p.panel_elems = p.span / eb;
  p.panel_bytes = dims[0] * p.span;
  p.panels = dims[1] / p.panel_elems;
  return p;
}

TensorMapSpec TmaLoadSpec(const CopyStmt& c, const std::vector<int64_t>& dims,
                          DType dtype, int64_t half_rows) {
  const TmaPanels p = TmaPanelsOf(dims, dtype);
  TensorMapSpec spec;
  spec.param = c.src.name;
  spec.swizzle = static_cast<int>(p.span);
  const std::vector<Slice>& sl = c.src.slices;
  for (size_t i = sl.size(); i-- > 0;) {
    const bool inner = i + 1 == sl.size();
    const int64_t rows = half_rows > 0 ? half_rows : dims[0];
    spec.box.push_back(inner                               ? p.panel_elems
                       : sl[i].kind != Slice::Kind::kIndex ? rows
                                                           : 1);
  }
  return spec;
}

std::optional<TensorMapSpec> TmaStoreSpec(const KernelPlan& plan,
                                          const RegisterFragment& acc,
                                          DType out, const std::string& tensor,
                                          size_t rank, size_t row_dim) {
  if (!plan.WarpSpecialised() || !acc.warpgroup ||
      acc.warps_m * acc.warps_n * 128 != plan.launch.threads ||
      (acc.n / acc.warps_n) % 64 != 0 || rank < 2 || rank > 5 ||
      (out != DType::kF16 && out != DType::kBF16)) {
    return std::nullopt;
  }
  TensorMapSpec spec;
  spec.param = tensor;
  spec.swizzle = 128;
  spec.box.assign(rank, 1);  // innermost first
  spec.box[0] = 64;
  spec.box[rank - 1 - row_dim] = 64;
  return spec;
}

int TmaMapIndex(const TmaPlan& tma, const TensorMapSpec& spec) {
  auto it = std::find(tma.maps.begin(), tma.maps.end(), spec);
  return it == tma.maps.end() ? -1 : static_cast<int>(it - tma.maps.begin());
}

void PlanTmaStores(const Kernel& k, const GpuDialect& dialect,
                   KernelPlan* plan) {
  if (!plan->WarpSpecialised() || !dialect.acc_pair_stores) return;
  const FragmentPlan& frag = plan->fragments;
  std::map<std::string, const Param*> tensors;
  for (const Param& p : k.params) {
    if (p.is_tensor) tensors[p.name] = &p;
  }
  // The store's map, when `src` (an accumulator) goes to `out` by TMA.
  auto spec = [&](const Region& src,
                  const Region& out) -> std::optional<TensorMapSpec> {
    auto p = tensors.find(out.name);
    auto acc = frag.registers.find(src.name);
    auto tile = frag.tiles.find(src.name);
    if (p == tensors.end() || acc == frag.registers.end() ||
        tile == frag.tiles.end() ||
        tile->second.dims !=
            std::vector<int64_t>{acc->second.m, acc->second.n}) {
      return std::nullopt;
    }
    for (const Slice& sl : src.slices) {
      if (src.has_slices && sl.kind == Slice::Kind::kIndex) return std::nullopt;
    }
    auto rows = internal::ParamTileRegion(*p->second, out, tile->second.dims);
    if (!rows) return std::nullopt;
    return TmaStoreSpec(*plan, acc->second, p->second->dtype, out.name,
                        p->second->shape.size(), (*rows)[0]);
  };
  std::function<void(const Block&)> walk = [&](const Block& b) {
    for (size_t i = 0; i < b.size(); ++i) {
      const Stmt& s = b[i];
      if (auto* f = std::get_if<ForStmt>(&s.node)) {
        walk(f->body);
      } else if (auto* x = std::get_if<IfStmt>(&s.node)) {
        walk(x->then_body);
        walk(x->else_body);
      } else if (auto* c = std::get_if<CopyStmt>(&s.node)) {
        const Region* out = &c->dst;
        if (plan->epilogue.staged_stores.count(&s) && i + 1 < b.size()) {
          out = &std::get<CopyStmt>(b[++i].node).dst;
        }
        if (auto m = spec(c->src, *out)) plan->tma.stores[&s] = *m;
      }
    }
  };
  walk(k.body);
}

void PlanTensorMaps(const Kernel& k, KernelPlan* plan) {
  if (!plan->WarpSpecialised()) return;
  TmaPlan& tma = plan->tma;
  if (plan->shared.tma_staging < 0) tma.stores.clear();
  const FragmentPlan& frag = plan->fragments;
  auto add = [&](const TensorMapSpec& spec) {
    if (TmaMapIndex(tma, spec) < 0) tma.maps.push_back(spec);
  };
  auto load = [&](const CopyStmt& c, int64_t half_rows) {
    const TileInfo& t = frag.tiles.at(c.dst.name);
    add(TmaLoadSpec(c, t.dims, t.dtype, half_rows));
  };
  std::function<void(const Block&)> walk = [&](const Block& b) {
    for (const Stmt& s : b) {
      if (auto* f = std::get_if<ForStmt>(&s.node)) {
        const RingPlan* ring = plan->RingOf(f);
        if (f == plan->ws.loop && ring != nullptr && ring->tma) {
          for (const CopyStmt* c : ring->copies) {
            const bool pair = plan->launch.cluster_x > 1 &&
                              c->dst.name == plan->launch.multicast_tile;
            load(*c, pair ? frag.tiles.at(c->dst.name).dims[0] / 2 : 0);
          }
        }
        walk(f->body);
      } else if (auto* x = std::get_if<IfStmt>(&s.node)) {
        walk(x->then_body);
        walk(x->else_body);
      } else if (plan->ws.preloads.count(&s)) {
        load(std::get<CopyStmt>(s.node), 0);
      } else if (auto it = tma.stores.find(&s); it != tma.stores.end()) {
        add(it->second);
      }
    }
  };
  walk(k.body);
}

}  // namespace kiln::compiler::gpu
