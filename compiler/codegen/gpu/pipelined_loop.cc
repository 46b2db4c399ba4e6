// `pipelined` loops on GPU targets: global-to-shared copies at the top of
// the body whose tiles live only in the loop become a multi-stage ring of
// shared-memory buffers (the copies for stage k + S - 1 are issued while
// stage k computes: cp.async in flight on CUDA; on targets without async
// copies the library's copies complete at issue and its commit/wait are
// no-ops, the barrier per iteration keeping the ring safe); the rest of the
// body runs as written. Also the shared-buffer access sets the lazy barrier
// placement uses.
#include <algorithm>

#include "compiler/codegen/gpu/kernel_source_internal.h"
#include "compiler/codegen/gpu/stmt_access.h"
#include "compiler/ir/pipeline_stages.h"

namespace kiln::compiler::gpu::internal {

void Emitter::Accesses(const Stmt& s, std::set<std::string>* r,
                       std::set<std::string>* w,
                       const SharedPred* shared) const {
  if (shared) {
    StmtAccesses(s, plan_, *shared, r, w);
  } else {
    StmtAccesses(
        s, plan_, [this](const std::string& n) { return Shared(n); }, r, w);
  }
}

// Names a statement or expression declares or uses.
void ExprUses(const Expr& e, std::set<std::string>* used) {
  if (e.kind == ExprKind::kVar || e.kind == ExprKind::kLoad) {
    used->insert(e.name);
  }
  for (const Expr& a : e.args) ExprUses(a, used);
}
std::vector<const LetStmt*> LetsNeeded(const std::vector<const LetStmt*>& lets,
                                       std::set<std::string>* need) {
  std::vector<const LetStmt*> kept;
  for (size_t i = lets.size(); i-- > 0;) {
    if (!need->count(lets[i]->name)) continue;
    ExprUses(lets[i]->value, need);
    kept.insert(kept.begin(), lets[i]);
  }
  return kept;
}
void RegionUses(const Region& r, std::set<std::string>* used) {
  used->insert(r.name);
  for (const Slice& s : r.slices) {
    if (s.kind != Slice::Kind::kFull) ExprUses(s.start, used);
    if (s.kind == Slice::Kind::kRange) ExprUses(s.extent, used);
  }
}
void CollectUses(const Block& b, std::set<std::string>* used,
                 std::set<std::string>* declared) {
  for (const Stmt& s : b) {
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, AllocStmt>) {
            declared->insert(n.name);
          } else if constexpr (std::is_same_v<T, CopyStmt>) {
            RegionUses(n.src, used);
            RegionUses(n.dst, used);
          } else if constexpr (std::is_same_v<T, FillStmt>) {
            RegionUses(n.dst, used);
            ExprUses(n.value, used);
          } else if constexpr (std::is_same_v<T, GemmStmt>) {
            RegionUses(n.a, used);
            RegionUses(n.b, used);
            RegionUses(n.c, used);
          } else if constexpr (std::is_same_v<T, ReduceStmt> ||
                               std::is_same_v<T, CumsumStmt>) {
            RegionUses(n.src, used);
            RegionUses(n.dst, used);
          } else if constexpr (std::is_same_v<T, AtomicAddStmt>) {
            RegionUses(n.src, used);
            RegionUses(n.dst, used);
          } else if constexpr (std::is_same_v<T, ParallelStmt>) {
            for (const std::string& v : n.vars) declared->insert(v);
            CollectUses(n.body, used, declared);
          } else if constexpr (std::is_same_v<T, ForStmt>) {
            declared->insert(n.var);
            if (n.start) ExprUses(*n.start, used);
            ExprUses(n.stop, used);
            CollectUses(n.body, used, declared);
          } else if constexpr (std::is_same_v<T, IfStmt>) {
            ExprUses(n.cond, used);
            CollectUses(n.then_body, used, declared);
            CollectUses(n.else_body, used, declared);
          } else if constexpr (std::is_same_v<T, LetStmt>) {
            declared->insert(n.name);
            ExprUses(n.value, used);
          } else if constexpr (std::is_same_v<T, StoreStmt>) {
            used->insert(n.name);
            for (const Expr& i : n.indices) ExprUses(i, used);
            ExprUses(n.value, used);
          } else if constexpr (std::is_same_v<T, RasterizeStmt>) {
            ExprUses(n.panel, used);
          }
        },
        s.node);
  }
}

// Uses of names in the kernel outside the statement `skip`.
void UsesOutside(const Block& b, const Stmt* skip,
                 std::set<std::string>* used) {
  std::set<std::string> declared;
  for (const Stmt& s : b) {
    if (&s == skip) continue;
    Block one{s};
    if (auto* f = std::get_if<ForStmt>(&s.node)) {
      ExprUses(f->stop, used);
      if (f->start) ExprUses(*f->start, used);
      UsesOutside(f->body, skip, used);
    } else if (auto* i = std::get_if<IfStmt>(&s.node)) {
      ExprUses(i->cond, used);
      UsesOutside(i->then_body, skip, used);
      UsesOutside(i->else_body, skip, used);
    } else {
      CollectUses(one, used, &declared);
    }
  }
}

std::string Emitter::RingSlot(const CopyStmt& c, const std::string& slot) {
  const Buf& b = bufs_.at(c.dst.name);
  const int64_t elems = kp_.shared.slot_bytes.at(c.dst.name) /
                        std::max<int64_t>(1, DTypeBits(b.dtype) / 8);
  return StrCat("(", slot, " == 0 ? ", b.code, "_stage0 : ", b.code,
                "_ring + (", slot, " - 1) * ", elems, ")");
}

void Emitter::PointRingAt(const std::vector<const CopyStmt*>& ring,
                          const std::string& slot) {
  for (const CopyStmt* c : ring) {
    Line(bufs_.at(c->dst.name).code + " = " + RingSlot(*c, slot) + ";");
  }
}

absl::Status Emitter::EmitPipelined(const ForStmt& f, const Loc& loc) {
  auto stages = PipelineStages(f);
  if (!stages) {
    return LocatedError(loc,
                        "pipelined loop with an unchecked stage count reached "
                        "the emitter (pipeline-loops checks them)",
                        absl::StatusCode::kInternal);
  }
  const int64_t S = *stages;
  // The ring is planned (PlanRings).
  const RingPlan* planned = kp_.RingOf(&f);
  if (!planned) return EmitFor(f, false);
  const std::vector<const CopyStmt*>& ring = planned->copies;

  auto range = BindLoop(f);
  if (!range.ok()) return range.status();
  const std::string& v = range->var;
  Flush();
  ++pipelined_;
  struct Leave {
    int* depth;
    ~Leave() { --*depth; }
  } leave{&pipelined_};
  Line(StrCat("// tile ", At(loc), ": pipelined loop, ", S, "-stage ",
              dialect_.ring_name, " ring"));
  Open("");
  // Extra stages of each ring tile (placed by PlanSharedLayout).
  for (const CopyStmt* c : ring) {
    const Buf& b = bufs_[c->dst.name];
    const std::string st = StorageType(b.dtype);
    auto ring_off = kp_.shared.ring_offset.find(c->dst.name);
    if (ring_off == kp_.shared.ring_offset.end()) {
      return LocatedError(
          loc, StrCat("ring tile '", c->dst.name, "' has no planned stages"),
          absl::StatusCode::kInternal);
    }
    Line(StrCat(st, "* const ", b.code, "_stage0 = ", b.code, ";"));
    Line(StrCat(st, "* const ", b.code, "_ring = reinterpret_cast<", st,
                "*>(kiln_smem + ", ring_off->second, ");"));
  }
  auto issue = [&](const std::string& slot) -> absl::Status {
    // The lets the copies' sources use, for the iteration they load (the
    // loop variable is bound to it here).
    for (const Stmt& s : f.body) {
      auto* l = std::get_if<LetStmt>(&s.node);
      if (l && std::find(planned->lets.begin(), planned->lets.end(), l) !=
                   planned->lets.end()) {
        KILN_GPU_RETURN_IF_ERROR(EmitStmt(s, true));
      }
    }
    for (const CopyStmt* c : ring) {
      auto src = MakeAccess(c->src);
      auto dst = MakeAccess(c->dst);
      if (!src.ok()) return src.status();
      if (!dst.ok()) return dst.status();
      absl::Status st;
      if (!TryFastCopy(*src, *dst, nullptr, RingSlot(*c, slot), false, &st)) {
        return LocatedError(
            loc,
            StrCat("the ring copy into ", c->dst.name,
                   " was planned but does not move in 16-byte chunks"),
            absl::StatusCode::kInternal);
      }
      KILN_GPU_RETURN_IF_ERROR(st);
    }
    return absl::OkStatus();
  };
  auto in_ring = [&](const Stmt& s) {
    auto* c = std::get_if<CopyStmt>(&s.node);
    return c && std::find(ring.begin(), ring.end(), c) != ring.end();
  };
  // The loop body past the ring's copies (issued S - 1 iterations ahead).
  auto emit_rest = [&]() -> absl::Status {
    ++wg_lazy_;  // wgmma waits deferred within the body (WgWaitFor)
    absl::Status st;
    for (const Stmt& s : f.body) {
      if (!in_ring(s)) st = EmitStmt(s, false);
      if (!st.ok()) break;
    }
    WgFlush();
    --wg_lazy_;
    return st;
  };
  // Hopper: the warp-specialised TMA ring (cuda/hopper/tma_loop.cc), when
  // planned; the cp.async ring below stays as its fallback.
  const bool ws = planned->tma;
  // Both branches start from the same pending barrier state; what they
  // leave pending is merged after them.
  std::set<std::string> ws_r, ws_w;
  if (ws) {
    // The TMA ring when the runtime built the tensor maps; else the
    // cp.async ring below.
    const std::set<std::string> r0 = pend_r_, w0 = pend_w_;
    Open("if (kiln_tma)");
    KILN_GPU_RETURN_IF_ERROR(EmitWsConsumer(f, *range, ring, S));
    Close();
    Open("else");
    ws_r.swap(pend_r_);
    ws_w.swap(pend_w_);
    pend_r_ = r0;
    pend_w_ = w0;
  }
  Line("const long long kiln_lo = " + range->start +
       ", kiln_hi = " + range->stop + ";");
  Open(StrCat("for (int kiln_s = 0; kiln_s < ", S - 1, "; ++kiln_s)"));
  Open("");
  Line("const long long " + v + " = kiln_lo + kiln_s;");
  Open("if (" + v + " < kiln_hi)");
  KILN_GPU_RETURN_IF_ERROR(issue("kiln_s"));
  Close();
  Close();
  Line("kiln::cp_async_commit();");
  Close();
  // The whole-tile version: where every ring copy is affine in the loop
  // variable, it is whole at every iteration when it is at the first and
  // the last (its start moves monotonically), and aligned at every one
  // when at the first two (its address moves by a constant step).
  // Only a GEMM main loop (ring copies and gemms) gets it: in a fused loop
  // (attention) the interleaved copies lengthen live ranges across the
  // softmax and the version spilled (148 bytes at head dim 128, BM 128).
  const bool version = planned->whole_tile_version;
  std::set<std::string> whole_r, whole_w;
  if (version) {
    Line("bool kiln_whole = kiln_hi > kiln_lo;");
    for (const char* at :
         {"kiln_lo", "kiln::min_(kiln_lo + 1, kiln_hi - 1)", "kiln_hi - 1"}) {
      Open("");
      Line(StrCat("const long long ", v, " = ", at, ";"));
      g2s_mode_ = G2sMode::kTestWhole;
      absl::Status st = issue("0");
      g2s_mode_ = G2sMode::kCopy;
      KILN_GPU_RETURN_IF_ERROR(st);
      Close();
    }
    const std::set<std::string> r0 = pend_r_, w0 = pend_w_;
    Open("if (kiln_whole)");
    // (The block has exactly threads_ threads: the gemm helpers' idle-warp
    // exits fold, so the body is one basic block. Not said for the whole
    // kernel: in attention that moved code across the exits and spilled.)
    Line(StrCat("__builtin_assume(threadIdx.x < ", threads_, "u);"));
    // The copies run S - 1 iterations ahead into the slot the previous
    // iteration read; the last S - 1 iterations copy the last tile again
    // (into that free slot, never read) instead of branching.
    Line("int kiln_slot = 0;");
    for (const CopyStmt* c : ring) {
      const std::string& code = bufs_.at(c->dst.name).code;
      Line(StrCat("const int ", code, "_delta = (int)(reinterpret_cast<",
                  "unsigned char*>(", code, "_ring) - reinterpret_cast<",
                  "unsigned char*>(", code, "_stage0));"));
    }
    Open(StrCat("for (long long ", v, " = kiln_lo; ", v, " < kiln_hi; ++", v,
                ")"));
    Line(StrCat("kiln::cp_async_wait<", S - 2, ">();"));
    Barrier();
    Open("");
    Line(StrCat("const long long kiln_next = kiln::min_(", v, " + ", S - 1,
                ", kiln_hi - 1);"));
    Line("const long long " + v + " = kiln_next;");
    Line(StrCat("const int kiln_ns = kiln_slot == 0 ? ", S - 1,
                " : kiln_slot - 1;"));
    g2s_mode_ = G2sMode::kCopyWhole;
    absl::Status st = issue("kiln_ns");
    g2s_mode_ = G2sMode::kCopy;
    KILN_GPU_RETURN_IF_ERROR(st);
    Close();
    Line("kiln::cp_async_commit();");
    // The stage's tiles by a byte offset chosen without a branch (a
    // select of two pointers became one).
    for (const CopyStmt* c : ring) {
      const Buf& b = bufs_.at(c->dst.name);
      const std::string st = StorageType(b.dtype);
      Line(StrCat(b.code, " = reinterpret_cast<", st,
                  "*>(reinterpret_cast<unsigned char*>(", b.code,
                  "_stage0) + (kiln_slot == 0 ? 0 : ", b.code,
                  "_delta + (kiln_slot - 1) * ",
                  kp_.shared.slot_bytes.at(c->dst.name), "));"));
    }
    KILN_GPU_RETURN_IF_ERROR(emit_rest());
    Line(StrCat("kiln_slot = kiln_slot == ", S - 1, " ? 0 : kiln_slot + 1;"));
    Close();
    Line("kiln::cp_async_wait<0>();");
    Barrier();
    Close();
    whole_r.swap(pend_r_);
    whole_w.swap(pend_w_);
    pend_r_ = r0;
    pend_w_ = w0;
    Open("else");
  }
  // One barrier per iteration: once every thread has waited for this
  // iteration's group and passed the barrier, the slot the previous
  // iteration read is free for the copies S - 1 iterations ahead.
  Open(StrCat("for (long long ", v, " = kiln_lo; ", v, " < kiln_hi; ++", v,
              ")"));
  Line(StrCat("kiln::cp_async_wait<", S - 2, ">();"));
  Barrier();
  Open("");
  Line(StrCat("const long long kiln_next = ", v, " + ", S - 1, ";"));
  Open("if (kiln_next < kiln_hi)");
  Line("const long long " + v + " = kiln_next;");
  Line(StrCat("const int kiln_ns = (int)(kiln_next - kiln_lo) % ", S, ";"));
  KILN_GPU_RETURN_IF_ERROR(issue("kiln_ns"));
  Close();
  Close();
  Line("kiln::cp_async_commit();");
  Line(StrCat("const int kiln_slot = (int)(", v, " - kiln_lo) % ", S, ";"));
  PointRingAt(ring, "kiln_slot");
  KILN_GPU_RETURN_IF_ERROR(emit_rest());
  Close();
  Line("kiln::cp_async_wait<0>();");
  Barrier();
  if (version) {
    Close();
    Touch(whole_r, whole_w);
  }
  if (ws) Close();
  Touch(ws_r, ws_w);
  Close();
  // A loop planned for the TMA ring but kept as a cp.async ring still frees
  // the tiles its producer loaded for this tile (EmitWsConsumer does on the
  // TMA ring).
  if (&f == kp_.ws.loop && !ws && !kp_.ws.preload_tiles.empty()) {
    ReleasePre("kiln_tma && ");
  }
  return absl::OkStatus();
}

}  // namespace kiln::compiler::gpu::internal
