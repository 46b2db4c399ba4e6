#include "compiler/codegen/gpu/kernel_plan.h"

#include <algorithm>

#include "absl/strings/str_join.h"
#include "compiler/ir/format.h"

namespace kiln::compiler::gpu {

std::string_view WalkName(Walk w) {
  switch (w) {
    case Walk::kGrid:
      return "grid";
    case Walk::kRasterised:
      return "rasterised";
    case Walk::kLongestFirstX:
      return "longest-first-x";
    case Walk::kMirroredPairsX:
      return "mirrored-pairs-x";
  }
  return "grid";
}

namespace {

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const std::string& x : v) s += (s.empty() ? "" : ", ") + x;
  return s.empty() ? "none" : s;
}

}  // namespace

std::string PrintPlan(const KernelPlan& p) {
  std::string s;
  const LaunchPlan& l = p.launch;
  StrAppend(&s, "launch\n");
  StrAppend(&s, "  threads         ", l.threads, " (launched ",
            l.launch_threads, ")\n");
  StrAppend(&s, "  persistent      ", l.persistent ? "yes" : "no", "\n");
  StrAppend(&s, "  walk            ", WalkName(l.walk), "\n");
  StrAppend(&s, "  cluster         ", l.cluster_x, " x 1 x 1");
  if (!l.multicast_tile.empty()) {
    StrAppend(&s, " (multicast ", l.multicast_tile, ")");
  }
  StrAppend(&s, "\n  min blocks/SM   ",
            l.min_blocks > 0 ? StrCat(l.min_blocks)
                             : std::string("none (memory-bound: occupancy)"),
            "\n");
  for (const LoopFacts& f : p.loops) {
    // (Bounds are facts, not text: two spellings of one bound print the
    // same.)
    StrAppend(&s, "loop ", f.var, " (", LoopName(f.loop->loop),
              ")\n  along x         start ", TrendName(f.start_along_x),
              ", stop ", TrendName(f.stop_along_x), "\n");
  }
  const WarpSpecialisedPlan& ws = p.ws;
  if (ws.loop) {
    StrAppend(&s, "pipeline          warp-specialised TMA ring over loop ",
              ws.loop->var, "\n");
    StrAppend(&s, "  stages          ", ws.stages, "\n");
    StrAppend(&s, "  body            ", ws.fused ? "fused" : "gemms only",
              "\n");
    StrAppend(&s, "  warpgroups      ", ws.consumer_warpgroups,
              " consumer + 1 producer\n");
    StrAppend(&s, "  ring tiles      ", Join(ws.ring_tiles), "\n");
    StrAppend(&s, "  per-tile loads  ", Join(ws.preload_tiles), "\n");
    if (!ws.producer_lets.empty()) {
      std::vector<std::string> names;
      for (const LetStmt* l : ws.producer_lets) names.push_back(l->name);
      StrAppend(&s, "  producer lets   ", Join(names), "\n");
    }
    if (l.producer_regs > 0) {
      StrAppend(&s, "  producer regs   ", l.producer_regs,
                " (ptxas spilled at the default)\n");
    }
    if (!ws.loop_lets.empty()) {
      std::vector<std::string> names;
      for (const LetStmt* l : ws.loop_lets) names.push_back(l->name);
      StrAppend(&s, "  per iteration   ", Join(names), "\n");
    }
    if (ws.overlap) {
      // (No statement indices: they are spelling, not plan.)
      StrAppend(&s, "  overlap         the gemm into ", ws.overlap->g1_acc,
                " of k - 1 runs under k, after the gemm into ",
                ws.overlap->g0_acc, "\n");
    } else if (ws.fused) {
      StrAppend(&s, "  overlap         none\n");
    }
  } else {
    StrAppend(&s, "pipeline          as written (no warp specialisation)\n");
  }
  for (const RingPlan& r : p.rings) {
    StrAppend(&s, "ring over loop ", r.loop->var, "\n  stages          ",
              r.stages, "\n  tiles           ", Join(r.tiles), "\n");
    if (!r.lets.empty()) {
      std::vector<std::string> names;
      for (const LetStmt* l : r.lets) names.push_back(l->name);
      StrAppend(&s, "  loaded ahead    ", Join(names), "\n");
    }
    if (r.tma) StrAppend(&s, "  fallback of     the TMA ring\n");
    if (r.whole_tile_version) {
      StrAppend(&s, "  second version  straight-line copies of whole tiles\n");
    }
  }
  for (const FullTilesPlan& f : p.full_tiles) {
    // (Copies as tile pairs, not the bounds' text: spellings agree.)
    std::vector<std::string> pairs;
    for (const Stmt* c : f.copies) {
      const auto& copy = std::get<CopyStmt>(c->node);
      pairs.push_back(copy.src.name + " -> " + copy.dst.name);
    }
    StrAppend(&s, "whole tiles first over loop ", f.loop->var,
              "\n  unchecked       ", Join(pairs), "\n");
  }
  for (const auto& [r, pa] : p.fused_reductions) {
    const auto& red = std::get<ReduceStmt>(r->node);
    StrAppend(&s, "reduction fused   ", red.src.name, " -> ", red.dst.name,
              " with the parallel writing ", red.src.name, "\n");
  }
  StrAppend(&s, "epilogue          ",
            p.epilogue.descriptions.empty() ? "as written"
                                            : Join(p.epilogue.descriptions),
            "\n");
  StrAppend(&s, "shared memory     ",
            p.shared.alias ? "tiles with disjoint lives share bytes"
                           : "one region per tile",
            "\n");
  const SharedPlan& sh = p.shared;
  if (sh.scratch_bytes > 0) {
    StrAppend(&s, "  reduction       [0, ", sh.scratch_bytes, ")\n");
  }
  std::set<std::string> placed;
  for (const SharedRegion& r : sh.regions) {
    std::string what = r.name;
    if (r.name == "kiln_tma_staging") {
      what = "TMA store staging";
    } else if (r.name.rfind("kiln_qoff", 0) == 0) {
      const size_t i = std::stoul(r.name.substr(9));
      what = StrCat(i < p.ws.preload_tiles.size() ? p.ws.preload_tiles[i] : "?",
                    " (second slot)");
    } else if (!placed.insert(r.name).second) {
      int64_t stages = 0;
      for (const RingPlan& ring : p.rings) {
        if (std::count(ring.tiles.begin(), ring.tiles.end(), r.name)) {
          stages = ring.stages;
        }
      }
      what += StrCat(" stages 1..", stages - 1);
    }
    StrAppend(
        &s, "  ", what,
        std::string(std::max<size_t>(16 - std::min<size_t>(what.size(), 15), 1),
                    ' '),
        "[", r.lo, ", ", r.hi, ")\n");
  }
  StrAppend(&s, "  launched        ", sh.dynamic_bytes, " bytes\n");
  if (!p.tma.maps.empty()) {
    StrAppend(&s, "tensor maps\n");
    for (size_t i = 0; i < p.tma.maps.size(); ++i) {
      const TensorMapSpec& m = p.tma.maps[i];
      std::vector<std::string> box;
      for (int64_t b : m.box) box.push_back(StrCat(b));
      StrAppend(&s, "  ", i, ": ", m.param, ", box ", absl::StrJoin(box, " x "),
                " (innermost first), ", m.swizzle, "-byte swizzle\n");
    }
    std::vector<std::string> stores;
    for (const auto& [stmt, spec] : p.tma.stores) {
      stores.push_back(
          StrCat(std::get<CopyStmt>(stmt->node).src.name, " -> ", spec.param));
    }
    std::sort(stores.begin(), stores.end());
    StrAppend(&s, "  TMA stores      ", Join(stores), "\n");
  }
  StrAppend(&s, "fragments\n");
  for (const auto& [tile, layout] : p.fragments.Describe()) {
    StrAppend(&s, "  ", tile, ": ", layout, "\n");
  }
  return s;
}

}  // namespace kiln::compiler::gpu
