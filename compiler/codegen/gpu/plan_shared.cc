// PlanSharedLives: shared tiles whose lives do not overlap may share bytes
// (a kernel's output staging tile over its input tiles, dead by then),
// where nothing reads shared memory asynchronously behind the block's
// barriers: no warp specialisation, no wgmma. A tile's life is the range of
// the kernel body's top-level statements that use it (an alloc is not a
// use; a tile allocated inside a nested block lives in that statement).
//
// PlanSharedLayout: where each byte range goes, in the order the kernel
// body runs (the bodies of its `for`s and `if`s in order):
// 1. The cross-warp reduction scratch at 0 (register rows over several
//    warps: 4 bytes per row and warp; thread-owned rows: 8 bytes per
//    chunk), rounded up to 128 bytes; tiles start above it.
// 2. Each shared tile at its alloc (fragments not planned into registers
//    included; an elided staging tile not), its bytes (padded rows)
//    rounded up to its alignment (1024 for wgmma operand tiles, else 128):
//    first fit among the placed ranges whose lives meet its own where
//    tiles share bytes, else after the last range.
// 3. A loop with a ring: before its body, each ring tile's S - 1 further
//    stages in one range (as long-lived as the tile).
// 4. At the first TMA store (plan.tma.stores): the staging chunks, two of
//    8 KiB per consumer warpgroup, 1024-aligned after the last range,
//    where the window then still fits the target with 2 KiB to spare (the
//    base's alignment slack and the mbarriers' static block); else none.
// 5. After the body, the second slot of each per-tile load (1024-aligned,
//    one after another) where all of them fit likewise; else one slot.
// 6. The window ends at the last range; 1 KiB more is launched where a
//    wgmma tile needs the base aligned to 1024 at run time.
#include <functional>

#include "compiler/codegen/cuda/hopper/tma_maps.h"
#include "compiler/codegen/gpu/kernel_source_internal.h"
#include "compiler/codegen/gpu/planners.h"
#include "compiler/codegen/gpu/stmt_access.h"

namespace kiln::compiler::gpu {

void PlanSharedLives(const Kernel& k, KernelPlan* plan) {
  SharedPlan& sp = plan->shared;
  sp.alias = !plan->WarpSpecialised() && plan->fragments.wgmma_tiles.empty();
  if (!sp.alias) return;
  std::set<std::string> shared;
  for (const Stmt& s : k.body) {
    ForEachNested(s, [&](const Stmt& n) {
      auto* a = std::get_if<AllocStmt>(&n.node);
      if (a && a->scope == Scope::kShared) shared.insert(a->name);
    });
  }
  const BufferPred is_shared = [&](const std::string& n) {
    return shared.count(n) > 0;
  };
  for (int i = 0; i < static_cast<int>(k.body.size()); ++i) {
    const Stmt& s = k.body[i];
    std::set<std::string> used;
    if (!std::holds_alternative<AllocStmt>(s.node)) {
      std::set<std::string> w;
      StmtAccesses(s, plan->fragments, is_shared, &used, &w);
      used.insert(w.begin(), w.end());
      ForEachNested(s, [&](const Stmt& n) {
        if (auto* a = std::get_if<AllocStmt>(&n.node)) used.insert(a->name);
      });
    }
    for (const std::string& n : used) {
      if (!shared.count(n)) continue;
      auto it = sp.lives.find(n);
      if (it == sp.lives.end()) {
        sp.lives[n] = {i, i};
      } else {
        it->second.second = i;
      }
    }
  }
}

namespace {

struct Placer {
  const Kernel& k;
  const GpuDialect& dialect;
  KernelPlan* plan;
  SharedPlan& sp = plan->shared;
  int64_t base = 0;  // above the scratch

  // First fit (1-2 of the algorithm): the lowest start clear of every
  // placed range whose tile's life meets this one's.
  int64_t Place(const std::string& name, int64_t bytes, int64_t align) {
    auto live = sp.lives.find(name);
    int64_t off = internal::RoundUp(sp.window_bytes, align);
    if (sp.alias && live != sp.lives.end()) {
      auto meets = [&](const SharedRegion& r) {
        auto o = sp.lives.find(r.name);
        return o == sp.lives.end() || (o->second.first <= live->second.second &&
                                       live->second.first <= o->second.second);
      };
      std::vector<int64_t> starts = {internal::RoundUp(base, align)};
      for (const SharedRegion& r : sp.regions) {
        starts.push_back(internal::RoundUp(r.hi, align));
      }
      std::sort(starts.begin(), starts.end());
      for (int64_t c : starts) {
        bool clear = true;
        for (const SharedRegion& r : sp.regions) {
          if (meets(r) && c < r.hi && r.lo < c + bytes) {
            clear = false;
            break;
          }
        }
        if (clear) {
          off = c;
          break;
        }
      }
    }
    sp.regions.push_back({name, off, off + bytes});
    sp.window_bytes = std::max(sp.window_bytes, off + bytes);
    return off;
  }

  // Whether `bytes` more, 1024-aligned after the window, leave it within
  // the target with 2 KiB to spare (4-5 of the algorithm).
  bool Room(int64_t bytes) const {
    return dialect.max_shared_bytes > 0 &&
           internal::RoundUp(sp.window_bytes, 1024) + bytes + 2048 <=
               dialect.max_shared_bytes;
  }

  int64_t Align(const std::string& tile) const {
    return plan->fragments.wgmma_tiles.count(tile) ? 1024
                                                   : internal::kSmemAlign;
  }

  void Alloc(const AllocStmt& a) {
    const FragmentPlan& frag = plan->fragments;
    auto t = frag.tiles.find(a.name);
    if (t == frag.tiles.end() || !InSharedMemory(frag, a.name) ||
        plan->epilogue.elided_tiles.count(a.name) || t->second.dims.empty()) {
      return;
    }
    const TileInfo& info = t->second;
    int64_t elems = 1;
    for (int64_t d : info.dims) elems *= d;
    const int64_t pad =
        info.layout.kind == Layout::Kind::kPadded ? info.layout.param : 0;
    if (pad) elems = elems / info.dims.back() * (info.dims.back() + pad);
    const int64_t align = Align(a.name);
    const int64_t slot =
        internal::RoundUp(internal::StorageBytes(info.dtype, elems), align);
    sp.offset[a.name] = Place(a.name, slot, align);
    sp.slot_bytes[a.name] = slot;
  }

  void TmaStaging() {
    if (sp.tma_staging >= 0) return;
    const int64_t bytes = plan->launch.threads / 128 * 2 * 8192;
    if (!Room(bytes)) return;
    sp.tma_staging = internal::RoundUp(sp.window_bytes, 1024);
    sp.regions.push_back(
        {"kiln_tma_staging", sp.tma_staging, sp.tma_staging + bytes});
    sp.window_bytes = sp.tma_staging + bytes;
  }

  void Walk(const Block& b) {
    for (const Stmt& s : b) {
      if (auto* a = std::get_if<AllocStmt>(&s.node)) {
        Alloc(*a);
      } else if (auto* f = std::get_if<ForStmt>(&s.node)) {
        if (const RingPlan* ring = plan->RingOf(f)) {
          for (const std::string& t : ring->tiles) {
            sp.ring_offset[t] =
                Place(t, sp.slot_bytes[t] * (ring->stages - 1), Align(t));
          }
        }
        Walk(f->body);
      } else if (auto* i = std::get_if<IfStmt>(&s.node)) {
        Walk(i->then_body);
        Walk(i->else_body);
      } else if (plan->tma.stores.count(&s)) {
        TmaStaging();
      }
    }
  }

  void PreloadSlots() {
    const FragmentPlan& frag = plan->fragments;
    std::vector<int64_t> bytes;
    int64_t all = 0;
    for (const std::string& t : plan->ws.preload_tiles) {
      const TileInfo& info = frag.tiles.at(t);
      bytes.push_back(TmaPanelsOf(info.dims, info.dtype).bytes());
      all += bytes.back();
    }
    if (bytes.empty() || !Room(all)) return;
    for (size_t i = 0; i < bytes.size(); ++i) {
      sp.preload_slots.push_back(Place(StrCat("kiln_qoff", i), bytes[i], 1024));
    }
  }
};

}  // namespace

void PlanSharedLayout(const Kernel& k, const GpuDialect& dialect,
                      KernelPlan* plan) {
  SharedPlan& sp = plan->shared;
  const FragmentPlan& frag = plan->fragments;
  // 1. The reduction scratch.
  int64_t scratch = 0;
  for (const Stmt& s : k.body) {
    ForEachNested(s, [&](const Stmt& n) {
      auto* r = std::get_if<ReduceStmt>(&n.node);
      if (!r) return;
      if (auto it = frag.registers.find(r->src.name);
          it != frag.registers.end() && it->second.warps_n > 1) {
        scratch = std::max(scratch, it->second.m * it->second.warps_n * 4);
      }
      if (auto it = frag.owned.find(r->src.name); it != frag.owned.end()) {
        const OwnedFragment& o = it->second;
        scratch = std::max(scratch, o.rows * o.cols / o.vec * 8);
      }
    });
  }
  sp.scratch_bytes = scratch;
  sp.window_bytes = internal::RoundUp(scratch, internal::kSmemAlign);
  Placer p{k, dialect, plan};
  p.base = sp.window_bytes;
  // 2-4. The body, as it runs.
  p.Walk(k.body);
  // 5. The per-tile loads' second slots.
  if (plan->WarpSpecialised()) p.PreloadSlots();
  // 6. The launch's bytes.
  sp.dynamic_bytes =
      sp.window_bytes + (frag.wgmma_tiles.empty() ? 0 : int64_t{1024});
}

}  // namespace kiln::compiler::gpu
