// PlanRings: the multi-stage rings of `pipelined` loops (any vendor).
// 1. Every pipelined loop outside `parallel` bodies with a constant stage
//    count of 2 to 8 (1: the loop runs as written).
// 2. Its ring: the copies at the top level of its body from a tensor into
//    a whole shared tile that
//    - no statement outside the loop uses and no other copy in the body
//      writes,
//    - whose source region depends on no name the body declares but the
//      loop variable and lets that can be evaluated ahead (the copy is
//      issued stages - 1 iterations ahead): top-level lets before it over
//      the loop variable, names from outside the loop, earlier such lets
//      and elements of tensors the kernel never writes (a page index from
//      a block table). Each issue evaluates them again for its iteration,
//    - that moves in 16-byte chunks (ChunkedRows: an unpadded tile of the
//      tensor's dtype whose rows are whole chunks; TensorTileRegion: the
//      region's two free dims the tile's, the innermost contiguous; a
//      rank-1 tile is one such row, its region's one free dim the
//      innermost: a row of per-row statistics such as attention's Lse).
// 3. `tma`: the loop is the warp-specialised one, every copy from a
//    tensor in its body is in the ring and the producer evaluates the lets
//    the ring's copies need (the producer's TMA ring takes it; this ring
//    stays its fallback).
// 4. The whole-tile version (targets with dialect.whole_tile_loops): not a
//    TMA ring's fallback, a body of ring copies and gemms only (in a fused
//    loop the interleaved straight-line copies lengthen live ranges across
//    the softmax and spill), each ring copy's starts affine in the loop
//    variable (whole at the first and last iteration means whole at every
//    one).
#include <algorithm>
#include <functional>

#include "compiler/codegen/gpu/kernel_source_internal.h"
#include "compiler/codegen/gpu/planners.h"
#include "compiler/codegen/gpu/stmt_access.h"
#include "compiler/ir/const_fold.h"
#include "compiler/ir/pipeline_stages.h"

namespace kiln::compiler::gpu {
namespace {

struct RingPlanner {
  const Kernel& k;
  const GpuDialect& dialect;
  KernelPlan* plan;
  std::map<std::string, const Param*> tensors;
  std::set<std::string> written;  // tensors the kernel stores or copies into

  // Whether an expression loads an element of a tile (only tensor elements
  // and scalars can be evaluated ahead).
  bool TileLoad(const Expr& e) const {
    if (e.kind == ExprKind::kLoad && !tensors.count(e.name)) return true;
    for (const Expr& a : e.args) {
      if (TileLoad(a)) return true;
    }
    return false;
  }

  void Loop(const Stmt& self, const ForStmt& f) {
    auto stages = PipelineStages(f);
    if (!stages || *stages < 2) return;
    const FragmentPlan& frag = plan->fragments;
    std::set<std::string> used, declared, outside;
    internal::CollectUses(f.body, &used, &declared);
    declared.insert(f.var);
    internal::UsesOutside(k.body, &self, &outside);
    std::map<std::string, int> writes;
    for (const Stmt& s : f.body) {
      if (auto* c = std::get_if<CopyStmt>(&s.node)) writes[c->dst.name]++;
    }
    // Lets that can be evaluated ahead, by the iteration they are for (in
    // body order, and by name).
    std::vector<const LetStmt*> ahead_lets;
    std::set<std::string> ahead;
    for (const Stmt& s : f.body) {
      auto* l = std::get_if<LetStmt>(&s.node);
      if (!l) continue;
      std::set<std::string> u;
      internal::ExprUses(l->value, &u);
      bool ok = !TileLoad(l->value);
      for (const std::string& n : u) {
        if (n == f.var || ahead.count(n)) continue;
        if (declared.count(n) || written.count(n)) ok = false;
      }
      if (ok) {
        ahead_lets.push_back(l);
        ahead.insert(l->name);
      }
    }
    RingPlan ring;
    ring.loop = &f;
    ring.stages = *stages;
    std::set<std::string> needed;
    int tensor_copies = 0;
    bool gemm_loop = true;
    bool has_row_tile = false;  // a rank-1 tile in the ring (no TMA box)
    for (const Stmt& s : f.body) {
      auto* c = std::get_if<CopyStmt>(&s.node);
      auto p = c ? tensors.find(c->src.name) : tensors.end();
      if (p != tensors.end()) ++tensor_copies;
      const bool in_ring = [&] {
        if (p == tensors.end() || !InSharedMemory(frag, c->dst.name) ||
            !Whole(c->dst) || outside.count(c->dst.name) ||
            writes[c->dst.name] != 1) {
          return false;
        }
        std::set<std::string> u;
        internal::RegionUses(c->src, &u);
        for (const std::string& n : u) {
          if (n != f.var && declared.count(n) && !ahead.count(n)) return false;
        }
        const TileInfo& t = frag.tiles.at(c->dst.name);
        const int64_t pad =
            t.layout.kind == Layout::Kind::kPadded ? t.layout.param : 0;
        if (t.dims.size() == 1) {
          has_row_tile = true;
          return internal::ChunkedRows(t.dtype, {1, t.dims[0]}, pad,
                                       p->second->dtype) &&
                 internal::ParamRowRegion(*p->second, c->src, t.dims[0]);
        }
        return internal::ChunkedRows(t.dtype, t.dims, pad, p->second->dtype) &&
               internal::ParamTileRegion(*p->second, c->src, t.dims)
                   .has_value();
      }();
      if (in_ring) {
        ring.copies.push_back(c);
        ring.tiles.push_back(c->dst.name);
        internal::RegionUses(c->src, &needed);
      } else if (!std::holds_alternative<GemmStmt>(s.node)) {
        gemm_loop = false;
      }
    }
    if (ring.copies.empty()) return;
    // The lets the ring's copies need, with the earlier lets those use.
    ring.lets = internal::LetsNeeded(ahead_lets, &needed);
    // (The TMA producer evaluates the lets it planned: ws.loop_lets.)
    bool producer_lets = true;
    for (const LetStmt* l : ring.lets) {
      const std::vector<const LetStmt*>& own = plan->ws.loop_lets;
      producer_lets &= std::find(own.begin(), own.end(), l) != own.end();
    }
    ring.tma = &f == plan->ws.loop && producer_lets && !has_row_tile &&
               static_cast<int>(ring.copies.size()) == tensor_copies;
    bool affine = true;
    for (const CopyStmt* c : ring.copies) {
      for (const Slice& sl : c->src.slices) {
        if (sl.kind != Slice::Kind::kFull &&
            !internal::AffineIn(sl.start, f.var)) {
          affine = false;
        }
      }
    }
    ring.whole_tile_version =
        dialect.whole_tile_loops && !ring.tma && gemm_loop && affine;
    plan->rings.push_back(std::move(ring));
  }

  void Block(const kiln::compiler::Block& b) {
    for (const Stmt& s : b) {
      if (auto* f = std::get_if<ForStmt>(&s.node)) {
        if (f->loop == LoopKind::kPipelined) Loop(s, *f);
        Block(f->body);
      } else if (auto* i = std::get_if<IfStmt>(&s.node)) {
        Block(i->then_body);
        Block(i->else_body);
      }
    }
  }
};

}  // namespace

void PlanRings(const Kernel& k, const GpuDialect& dialect, KernelPlan* plan) {
  RingPlanner p{k, dialect, plan, {}, {}};
  for (const Param& param : k.params) {
    if (param.is_tensor) p.tensors[param.name] = &param;
  }
  std::set<std::string> read;
  for (const Stmt& s : k.body) {
    StmtAccesses(
        s, plan->fragments,
        [&](const std::string& n) { return p.tensors.count(n) > 0; }, &read,
        &p.written);
  }
  p.Block(k.body);
}

}  // namespace kiln::compiler::gpu
