// PlanWarpSpecialised and PlanPreloads (Hopper: TMA, mbarriers,
// setmaxnreg). The emitter's side is tma_loop.cc beside this file.
// 1. Names the producer can evaluate at the top of a tile: parameters,
//    symbols, block indices (the loop's bounds are taken with their lets
//    resolved, PlanLoops), and the top-level lets before the loop whose
//    values name only those and load only elements of tensors the kernel
//    never writes (a grouped GEMM's expert and first row, read from its
//    tile map) and come after any rasterize: the producer evaluates the
//    ones its copies need again at the top of each tile, after its own
//    rasterize.
// 2. The first top-level pipelined loop with 2 to 8 stages whose copies
//    from tensors are whole tiles into wgmma operand tiles written by that
//    copy alone (TMA boxes of at most 256 rows, starts the producer can
//    evaluate, each copied before the body reads it) and whose gemms
//    accumulate into warpgroup registers becomes the ring. The starts may
//    name the loop variable and the body's lets before the copy over it
//    and the producer's names (a page index read from a block table the
//    kernel never writes): the producer evaluates those lets for each
//    iteration it loads (`loop_lets`). `fused`: the body does more than
//    accumulate gemms; its other statements may write shared memory (the
//    operand of a second gemm, a row reduction's scratch across column
//    slices): the consumers then synchronise on their own named barrier.
// 3. Preloads (persistent kernels): top-level copies before the loop, of
//    the same kind, into tiles that no other top-level statement than the
//    loop touches.
#include <functional>

#include "compiler/codegen/gpu/kernel_source_internal.h"
#include "compiler/codegen/gpu/planners.h"
#include "compiler/codegen/gpu/stmt_access.h"
#include "compiler/codegen/metadata_writer.h"
#include "compiler/ir/pipeline_stages.h"

namespace kiln::compiler::gpu {

namespace {

bool UsesOnly(const Expr& e, const std::set<std::string>& allowed) {
  std::set<std::string> used;
  internal::ExprUses(e, &used);
  for (const std::string& u : used) {
    if (!allowed.count(u)) return false;
  }
  return true;
}

// Names the producer can evaluate at the top of the kernel.
std::set<std::string> ProducerNames(const Kernel& k) {
  std::set<std::string> allowed(k.block_vars.begin(), k.block_vars.end());
  for (const Param& p : k.params) allowed.insert(p.name);
  for (const std::string& s : DynamicSymbols(k)) allowed.insert(s);
  return allowed;
}

// The tensors the kernel writes.
std::set<std::string> WrittenTensors(const Kernel& k,
                                     const FragmentPlan& frag) {
  std::set<std::string> tensors, read, written;
  for (const Param& p : k.params) {
    if (p.is_tensor) tensors.insert(p.name);
  }
  const BufferPred is_tensor = [&](const std::string& n) {
    return tensors.count(n) > 0;
  };
  for (const Stmt& s : k.body)
    StmtAccesses(s, frag, is_tensor, &read, &written);
  return written;
}

// The top-level lets before `loop` the producer can evaluate (step 1), in
// body order; their names are added to `allowed`.
std::vector<const LetStmt*> ProducerLets(const Kernel& k,
                                         const FragmentPlan& frag,
                                         const Stmt* loop,
                                         std::set<std::string>* allowed) {
  const std::set<std::string> written = WrittenTensors(k, frag);
  std::vector<const LetStmt*> lets;
  for (const Stmt& s : k.body) {
    if (&s == loop) break;
    if (std::holds_alternative<RasterizeStmt>(s.node)) {
      // (The lets before it read the block indices it then permutes; the
      // producer walks the permuted order.)
      for (const LetStmt* l : lets) allowed->erase(l->name);
      lets.clear();
      continue;
    }
    auto* l = std::get_if<LetStmt>(&s.node);
    if (!l) continue;
    std::set<std::string> used;
    internal::ExprUses(l->value, &used);
    bool ok = true;
    for (const std::string& u : used) {
      if (!allowed->count(u) || written.count(u)) ok = false;
    }
    if (!ok) continue;
    lets.push_back(l);
    allowed->insert(l->name);
  }
  return lets;
}

// Of `lets`, those the starts of the copies in `b` (and its loops) name,
// directly or through a later let, or through one of `more`.
std::vector<const LetStmt*> NeededLets(
    const std::vector<const LetStmt*>& lets, const Block& b,
    const std::vector<const LetStmt*>& more) {
  std::set<std::string> need;
  for (const LetStmt* l : more) internal::ExprUses(l->value, &need);
  std::function<void(const Block&)> walk = [&](const Block& body) {
    for (const Stmt& s : body) {
      if (auto* c = std::get_if<CopyStmt>(&s.node)) {
        internal::RegionUses(c->src, &need);
      }
      if (auto* f = std::get_if<ForStmt>(&s.node)) walk(f->body);
    }
  };
  walk(b);
  return internal::LetsNeeded(lets, &need);
}

// A copy the producer can issue as TMA loads: a whole tile of a tensor into
// a wgmma operand tile written by it alone, its starts computed from
// `names`.
class TmaCopies {
 public:
  TmaCopies(const Kernel& k, const FragmentPlan& f) : f_(f) {
    for (const Param& p : k.params) {
      if (p.is_tensor) tensors_[p.name] = &p;
    }
    std::function<void(const Block&)> count = [&](const Block& b) {
      for (const Stmt& s : b) {
        if (auto* c = std::get_if<CopyStmt>(&s.node)) written_[c->dst.name]++;
        if (auto* fs = std::get_if<ForStmt>(&s.node)) count(fs->body);
        if (auto* i = std::get_if<IfStmt>(&s.node)) {
          count(i->then_body);
          count(i->else_body);
        }
      }
    };
    count(k.body);
  }
  bool FromTensor(const CopyStmt& c) const {
    return tensors_.count(c.src.name) > 0;
  }
  bool Eligible(const CopyStmt& c, const std::set<std::string>& names) const {
    auto t = f_.tiles.find(c.dst.name);
    auto p = tensors_.find(c.src.name);
    auto w = written_.find(c.dst.name);
    if (p == tensors_.end() || !f_.wgmma_tiles.count(c.dst.name) ||
        t == f_.tiles.end() || !Whole(c.dst) || w == written_.end() ||
        w->second != 1 || p->second->dtype != t->second.dtype ||
        !internal::IsTileRegion(*p->second, c.src, t->second.dims) ||
        t->second.dims[0] > 256) {
      return false;
    }
    for (const Slice& sl : c.src.slices) {
      if (sl.kind != Slice::Kind::kFull && !UsesOnly(sl.start, names)) {
        return false;
      }
    }
    return true;
  }

 private:
  const FragmentPlan& f_;
  std::map<std::string, const Param*> tensors_;
  std::map<std::string, int64_t> written_;
};

}  // namespace

void PlanWarpSpecialised(const Kernel& k, const GpuDialect& dialect,
                         KernelPlan* plan) {
  const int64_t threads = plan->launch.threads;
  if (!dialect.tma || threads % 128 != 0 || threads + 128 > 1024) return;
  const FragmentPlan& frag = plan->fragments;
  std::set<std::string> allowed = ProducerNames(k);
  const TmaCopies tma(k, frag);
  const BufferPred in_smem = [&](const std::string& n) {
    return InSharedMemory(frag, n);
  };
  const std::set<std::string> written_tensors = WrittenTensors(k, frag);

  auto eligible = [&](const LoopFacts& l, bool* fused,
                      std::vector<std::string>* ring,
                      std::vector<const LetStmt*>* loop_lets) {
    const ForStmt& f = *l.loop;
    auto stages = PipelineStages(f);
    if (!stages || *stages < 2) return false;
    if (!UsesOnly(l.start, allowed) || !UsesOnly(l.stop, allowed)) {
      return false;
    }
    std::set<std::string> names = allowed;
    names.insert(f.var);
    int copies = 0, gemms = 0, others = 0;
    std::set<std::string> read;        // shared tiles read so far in the body
    std::vector<const LetStmt*> lets;  // the body's lets over `names`
    std::set<std::string> need;        // names the ring copies' starts use
    for (const Stmt& s : f.body) {
      std::set<std::string> r, w;
      StmtAccesses(s, frag, in_smem, &r, &w);
      if (auto* let = std::get_if<LetStmt>(&s.node)) {
        std::set<std::string> used;
        internal::ExprUses(let->value, &used);
        bool ok = true;
        for (const std::string& u : used) {
          ok &= names.count(u) > 0 && !written_tensors.count(u);
        }
        if (ok) {
          lets.push_back(let);
          names.insert(let->name);
        }
      }
      auto* c = std::get_if<CopyStmt>(&s.node);
      if (c && tma.FromTensor(*c)) {
        // (The stage's loads land before the body runs: a tile read
        // earlier in the body than its copy would see the new data.)
        if (read.count(c->dst.name) || !tma.Eligible(*c, names)) return false;
        ring->push_back(c->dst.name);
        internal::RegionUses(c->src, &need);
        ++copies;
        continue;
      }
      read.insert(r.begin(), r.end());
      if (auto* g = std::get_if<GemmStmt>(&s.node)) {
        auto rf = frag.registers.find(g->c.name);
        if (rf == frag.registers.end() || !rf->second.warpgroup) return false;
        ++gemms;
        if (g->clear_accum) ++others;
        continue;
      }
      ++others;
    }
    // The lets the copies need, with the earlier ones those use.
    *loop_lets = internal::LetsNeeded(lets, &need);
    *fused = others > 0;
    return copies > 0 && gemms > 0;
  };

  WarpSpecialisedPlan& ws = plan->ws;
  std::vector<const RasterizeStmt*> rasters;
  size_t loop = 0;
  for (const Stmt& s : k.body) {
    if (auto* r = std::get_if<RasterizeStmt>(&s.node)) {
      rasters.push_back(r);
      continue;
    }
    auto* f = std::get_if<ForStmt>(&s.node);
    if (!f) continue;
    const LoopFacts& l = plan->loops[loop++];
    if (f->loop != LoopKind::kPipelined) continue;
    std::set<std::string> names = ProducerNames(k);
    const std::vector<const LetStmt*> lets = ProducerLets(k, frag, &s, &names);
    allowed = names;
    bool fused = false;
    std::vector<std::string> ring;
    std::vector<const LetStmt*> loop_lets;
    if (!eligible(l, &fused, &ring, &loop_lets)) continue;
    ws.loop = f;
    ws.stages = *PipelineStages(*f);
    ws.fused = fused;
    ws.consumer_warpgroups = static_cast<int>(threads / 128);
    ws.start = l.start;
    ws.stop = l.stop;
    ws.ring_tiles = std::move(ring);
    ws.rasterize = rasters;
    ws.loop_lets = std::move(loop_lets);
    ws.producer_lets = NeededLets(lets, k.body, ws.loop_lets);
    return;
  }
}

void PlanPreloads(const Kernel& k, KernelPlan* plan) {
  WarpSpecialisedPlan& ws = plan->ws;
  if (!ws.loop || !plan->launch.persistent) return;
  std::set<std::string> allowed = ProducerNames(k);
  for (const LetStmt* l : ws.producer_lets) allowed.insert(l->name);
  const TmaCopies tma(k, plan->fragments);
  const std::map<std::string, int> users = TopLevelUsers(k, plan->fragments);
  for (const Stmt& s : k.body) {
    if (std::get_if<ForStmt>(&s.node) == ws.loop) break;
    auto* c = std::get_if<CopyStmt>(&s.node);
    auto u = c ? users.find(c->dst.name) : users.end();
    if (c && u != users.end() && u->second == 2 && tma.Eligible(*c, allowed)) {
      ws.preloads.insert(&s);
      ws.preload_tiles.push_back(c->dst.name);
    }
  }
}

}  // namespace kiln::compiler::gpu
