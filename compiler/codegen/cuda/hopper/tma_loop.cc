// Warp-specialised TMA rings (CUDA sm_90a): a top-level `pipelined` loop
// whose copies from global memory are whole tiles into wgmma operand tiles
// and whose gemms are wgmma becomes a producer/consumer pipeline. Either
// the body only accumulates gemms (a GEMM main loop: each stage's wgmma
// stay in flight while the next stage is waited for), or it is `fused`:
// other statements read the gemms' results (attention's softmax), so each
// gemm is waited for at once; where those statements write shared memory
// (a second gemm's operand, a reduction's scratch) the consumers pass their
// own named barrier. A GEMM kernel, and
// a fused one over two or more consumer warpgroups, is also persistent (one
// walk of the tiles per resident block); the fused one's producer also
// loads, per tile, the tiles copied ahead of the loop that only the loop
// reads (attention's Q).
//
// The block gets one more warpgroup, the producer, after the program's
// threads (the consumers, which run everything else as written, with a
// named barrier over themselves instead of __syncthreads). One producer
// thread walks the loop issuing each stage's TMA loads (cp.async.bulk.tensor
// from runtime-built tensor maps, 128/64/32-byte swizzled panels: the wgmma
// operand layout; the body's lets the loads' starts name, such as a page
// index read from a block table, evaluated again for each iteration it
// loads) onto the stage's `full` mbarrier; the consumers wait for
// it, issue the stage's wgmma, and release the previous stage's slot on its
// `empty` mbarrier once those wgmma have completed. Nothing in the loop
// waits on a block barrier.
//
// The tensor maps need 16-byte-aligned rows and base addresses; when the
// runtime cannot build them it passes kiln_tma = 0 and the consumers run
// the cp.async ring instead (the producer leaves at once).
#include <algorithm>

#include "compiler/codegen/cuda/hopper/tma_maps.h"
#include "compiler/codegen/gpu/kernel_source_internal.h"
#include "compiler/codegen/gpu/stmt_access.h"
#include "compiler/codegen/metadata_writer.h"

namespace kiln::compiler::gpu::internal {

bool IsTileRegion(const Param& p, const Region& r,
                  const std::vector<int64_t>& dims) {
  if (!p.is_tensor || !r.has_slices || dims.size() != 2 ||
      r.slices.size() != p.shape.size() || p.shape.size() > 5 ||
      r.slices.back().kind == Slice::Kind::kIndex) {
    return false;
  }
  // The innermost dim is contiguous (row-major, or a unit stride).
  if (!p.strides.empty()) {
    auto st = FoldInt(p.strides.back());
    if (!st || *st != 1) return false;
  }
  std::vector<std::optional<int64_t>> extent;
  for (size_t d = 0; d < r.slices.size(); ++d) {
    const Slice& sl = r.slices[d];
    if (sl.kind == Slice::Kind::kFull) extent.push_back(FoldInt(p.shape[d]));
    if (sl.kind == Slice::Kind::kRange) extent.push_back(FoldInt(sl.extent));
  }
  return extent.size() == 2 && extent[0] == dims[0] && extent[1] == dims[1];
}

absl::Status Emitter::EmitWsConsumer(const ForStmt& f, const LoopRange& range,
                                     const std::vector<const CopyStmt*>& ring,
                                     int64_t stages) {
  const int64_t S = stages;
  const std::string& v = range.var;
  ws_stages_ = S;
  ws_range_ = range;
  // The body's gemms (PlanWarpSpecialised checked they are all wgmma): one
  // group each per iteration, and their accumulators.
  // An fp8 gemm waits for its own group (its product is promoted), so
  // `in_flight` counts the groups left running at the end of an iteration.
  int in_flight = 0;
  std::set<std::string> accs;
  for (const Stmt& s : f.body) {
    if (auto* g = std::get_if<GemmStmt>(&s.node)) {
      accs.insert(bufs_.at(g->c.name).code);
      in_flight += DTypeBits(bufs_.at(g->a.name).dtype) == 8 ? 0 : 1;
    }
  }
  // The producer's copies: per ring tile, one TMA load per panel. (Their
  // starts may name the body's lets that the producer evaluates, declared
  // here as the body declares them.)
  for (const LetStmt* l : kp_.ws.loop_lets) {
    auto val = Value(l->value);
    if (!val.ok()) return val.status();
    vars_[l->name] = {Mangle(l->name), val->type};
  }
  for (const CopyStmt* c : ring) {
    const Buf& b = bufs_.at(c->dst.name);
    absl::StatusOr<TmaCopy> t = MakeTmaCopy(
        *c, kp_.launch.cluster_x > 1 && c->dst.name == kp_.launch.multicast_tile
                ? b.dims[0] / 2
                : 0);
    if (!t.ok()) return t.status();
    t->ring_off = kp_.shared.ring_offset.at(c->dst.name);
    t->slot = kp_.shared.slot_bytes.at(c->dst.name);
    ws_copies_.push_back(*std::move(t));
  }

  // The body without the ring copies (the producer issues those).
  std::vector<const Stmt*> stmts;
  for (const Stmt& s : f.body) {
    auto* c = std::get_if<CopyStmt>(&s.node);
    if (c && std::find(ring.begin(), ring.end(), c) != ring.end()) continue;
    stmts.push_back(&s);
  }
  auto loop_head = [&]() {
    Line("const long long kiln_lo = " + range.start +
         ", kiln_hi = " + range.stop + ";");
    Open(StrCat("for (long long ", v, " = kiln_lo; ", v, " < kiln_hi; ++", v,
                ")"));
    // kiln_it counts ring iterations over all the block's tiles: the
    // stage and the phase parity follow from it.
    Line(StrCat("const int kiln_slot = kiln_it % ", S, ";"));
    WaitFull(0, "kiln_slot", "kiln_it");
    PointRingAt(ring, "kiln_slot");
  };
  // The tiles the producer loads per tile (kp_.ws.preload_tiles) are free for
  // the next tile's loads once the last iteration's last statement reading
  // them has run (a gemm waits for its group at once in the plain fused
  // loop), or else once the loop is over; and at once if it runs no
  // iteration.
  size_t last_pre_read = stmts.size();
  for (size_t i = 0; i < stmts.size(); ++i) {
    std::set<std::string> r, w;
    AllAccesses(*stmts[i], &r, &w);
    for (const std::string& n : kp_.ws.preload_tiles) {
      if (r.count(n) || w.count(n)) last_pre_read = i;
    }
  }
  auto body = [&]() -> absl::Status {
    for (size_t i = 0; i < stmts.size(); ++i) {
      KILN_GPU_RETURN_IF_ERROR(EmitStmt(*stmts[i], false));
      if (!kp_.ws.preload_tiles.empty() && kp_.ws.fused && i == last_pre_read) {
        ReleasePre(StrCat(v, " == kiln_hi - 1 && "));
      }
    }
    return absl::OkStatus();
  };
  if (kp_.ws.fused) {
    if (const std::optional<OverlapPlan>& o = kp_.ws.overlap) {
      if (o->stmts != stmts) {
        return LocatedError(
            f.body.front().loc,
            "the planned overlap does not match the loop's ring",
            absl::StatusCode::kInternal);
      }
      // Each ring tile gets barriers of its own (group = its index in
      // `ring`), freed once the gemm reading it has completed.
      ws_groups_ = static_cast<int>(ring.size());
      KILN_GPU_RETURN_IF_ERROR(EmitOverlapped(*o, range, ring, S));
      if (!kp_.ws.preload_tiles.empty()) ReleasePre();
      return absl::OkStatus();
    }
    // The body reads the gemms' results (softmax): each gemm waits for its
    // group at once, and the stage is free at the end of the iteration.
    // (Per-tile barriers measured 2-10% slower here: one wait and one
    // release per iteration cost less.)
    Line("// consumers: wait for the stage's TMA loads, run the body, free");
    Line("// the stage");
    loop_head();
    KILN_GPU_RETURN_IF_ERROR(body());
    ReleaseEmpty(0, "kiln_slot");
    Line("++kiln_it;");
    Close();
    if (!kp_.ws.preload_tiles.empty()) {
      ReleasePre(last_pre_read < stmts.size() ? "kiln_hi <= kiln_lo && " : "");
    }
    return absl::OkStatus();
  }
  Line("// consumers: wait for the stage's TMA loads, issue its wgmma, free");
  Line(in_flight == 0 ? "// the stage (its wgmma have completed)"
                      : "// the previous stage once its wgmma have completed");
  for (const std::string& a : accs) {
    Line("kiln::wgmma_fence_operands(" + a + ");");
  }
  loop_head();
  defer_wgmma_wait_ = true;
  absl::Status st = body();
  defer_wgmma_wait_ = false;
  KILN_GPU_RETURN_IF_ERROR(st);
  // Free a stage once its wgmma have completed: at once when every gemm
  // of the body has (fp8 waits for its product), so that the producer runs
  // S - 1 stages ahead; else the stage of the iteration before kiln_it.
  const std::string previous = StrCat("(kiln_it + ", S - 1, ") % ", S);
  if (in_flight == 0) {
    ReleaseEmpty(0, "kiln_slot");
  } else {
    Line(StrCat("kiln::wgmma_wait<", in_flight, ">();"));
    ReleaseEmpty(0, previous, v + " > kiln_lo && ");
  }
  Line("++kiln_it;");
  Close();
  if (in_flight > 0) Line("kiln::wgmma_wait<0>();");
  for (const std::string& a : accs) {
    Line("kiln::wgmma_fence_operands(" + a + ");");
  }
  // The last stage's wgmma have completed too: free it for the producer's
  // next tile.
  if (in_flight > 0) ReleaseEmpty(0, previous, "kiln_hi > kiln_lo && ");
  if (!kp_.ws.preload_tiles.empty()) ReleasePre();
  // The gemms read ring slots only: nothing is owed a block barrier.
  pend_r_.clear();
  pend_w_.clear();
  return absl::OkStatus();
}

absl::StatusOr<Emitter::TmaCopy> Emitter::MakeTmaCopy(const CopyStmt& c,
                                                      int64_t half_rows) {
  const Buf& b = bufs_.at(c.dst.name);
  const TmaPanels p = TmaPanelsOf(b.dims, b.dtype);
  TmaCopy t;
  t.panel_elems = p.panel_elems;
  t.panel_bytes = p.panel_bytes;
  t.panels = p.panels;
  t.off0 = kp_.shared.offset.at(c.dst.name);
  t.half_rows = half_rows;
  const std::vector<Slice>& sl = c.src.slices;
  t.rank = static_cast<int>(sl.size());
  for (size_t i = sl.size(); i-- > 0;) {
    // (A whole dim starts at 0.)
    std::string start = "0";
    if (sl[i].kind != Slice::Kind::kFull) {
      auto e = Index(sl[i].start);
      if (!e.ok()) return e.status();
      start = *e;
    }
    t.coord.push_back("(int)(" + start + ")");
  }
  // (The maps are planned: PlanTensorMaps.)
  t.map = TmaMapIndex(kp_.tma, TmaLoadSpec(c, b.dims, b.dtype, half_rows));
  if (t.map < 0) {
    return absl::InternalError(StrCat("kernel '", k_.name,
                                      "': the TMA load of ", c.dst.name,
                                      " has no planned map"));
  }
  return t;
}

void Emitter::EmitTmaLoads(const TmaCopy& t, const std::string& dst,
                           const std::string& bar) {
  for (int64_t p = 0; p < t.panels; ++p) {
    std::string c;
    for (size_t d = 0; d < t.coord.size(); ++d) {
      StrAppend(&c, d ? ", " : "", t.coord[d],
                d == 0 && p ? StrCat(" + ", p * t.panel_elems) : "");
    }
    const std::string at = StrCat(dst, " + ", p * t.panel_bytes);
    if (t.half_rows > 0) {
      // This block's half of the rows (a rank-2 map), to both blocks of
      // the pair.
      Line(StrCat("kiln::tma_load_multicast_2d(", at, " + kiln_rank * ",
                  t.panel_bytes / 2, ", &kiln_map", t.map, ", ", bar, ", ", c,
                  " + (int)kiln_rank * ", t.half_rows, ", 0x3);"));
      continue;
    }
    Line(StrCat("kiln::tma_load<", t.rank, ">(", at, ", &kiln_map", t.map, ", ",
                bar, ", {", c, "});"));
  }
}

absl::Status Emitter::EmitWsPreCopy(const Stmt& s) {
  const auto& c = std::get<CopyStmt>(s.node);
  absl::StatusOr<TmaCopy> t = MakeTmaCopy(c, 0);
  if (!t.ok()) return t.status();
  const Buf& b = bufs_.at(c.dst.name);
  const size_t i = ws_pre_copies_.size();
  Line(StrCat("// tile ", At(s.loc), ": ", c.dst.name,
              " loaded by the producer (TMA) for each tile, into one of "
              "kiln_qslots slots"));
  Open("if (kiln_tma)");
  // (kiln_qslots and kiln_qoff<i>, the second slot's offset, are defined
  // with the producer: PlanSharedLayout placed them.)
  Line(
      "kiln::mbar_wait(&kiln_qfull[kiln_q % kiln_qslots], (kiln_q / "
      "kiln_qslots) & 1);");
  Line(StrCat(b.code, " = reinterpret_cast<", StorageType(b.dtype),
              "*>(kiln_smem + (kiln_q % kiln_qslots == 0 ? ", t->off0,
              " : kiln_qoff", i, "));"));
  // One tile's preloads share its slot and its barrier phase (the producer
  // loads them all under one kiln_qfull arrival): the count of tiles begun
  // moves on after the last of them. (Counting each preload as a tile sent
  // the second one to the next tile's slot, which a block's last tile never
  // fills: MLA's Qs and QPes hung, bench/gpu/NOTES.md step 47.)
  if (i + 1 == kp_.ws.preloads.size()) Line("++kiln_q;");
  Close();
  if (!kp_.shared.preload_slots.empty()) {
    t->ring_off = kp_.shared.preload_slots.at(i);
  }
  ws_pre_copies_.push_back(*std::move(t));
  Open("else");
  KILN_GPU_RETURN_IF_ERROR(EmitStmt(s, false));
  Flush();
  Close();
  return absl::OkStatus();
}

// Every buffer (any scope) a statement reads and writes.
void Emitter::AllAccesses(const Stmt& s, std::set<std::string>* r,
                          std::set<std::string>* w) const {
  AllStmtAccesses(s, plan_, r, w);
}

absl::Status Emitter::EmitOverlapped(const OverlapPlan& o,
                                     const LoopRange& range,
                                     const std::vector<const CopyStmt*>& ring,
                                     int64_t stages) {
  const int64_t S = stages;
  const std::string& v = range.var;
  const std::string prev = StrCat("(kiln_it + ", S - 1, ") % ", S);
  using U = RingUse;
  // Waits for (or frees) the ring tiles of these uses at a slot.
  auto waits = [&](std::initializer_list<U> kinds, const std::string& slot,
                   const std::string& it, bool wait) {
    for (size_t g = 0; g < ring.size(); ++g) {
      auto u = o.use.find(ring[g]->dst.name);
      const U use = u == o.use.end() ? U::kNone : u->second;
      if (std::find(kinds.begin(), kinds.end(), use) == kinds.end()) {
        continue;
      }
      if (wait) {
        WaitFull(static_cast<int>(g), slot, it);
      } else {
        ReleaseEmpty(static_cast<int>(g), slot);
      }
    }
  };
  auto emit = [&](size_t from, size_t to, bool defer_last) -> absl::Status {
    for (size_t i = from; i < to; ++i) {
      defer_wgmma_wait_ = defer_last && i + 1 == to;
      absl::Status st = EmitStmt(*o.stmts[i], false);
      defer_wgmma_wait_ = false;
      KILN_GPU_RETURN_IF_ERROR(st);
    }
    return absl::OkStatus();
  };
  // B of the previous ring iteration: its tiles, then its statements.
  auto previous_b = [&]() -> absl::Status {
    PointRingAt(ring, prev);
    waits({U::kB}, prev, "(kiln_it - 1)", true);
    return emit(o.b_begin, o.stmts.size(), true);
  };
  auto wait_last_gemm = [&]() {
    Line("kiln::wgmma_wait<0>();");
    Line("kiln::wgmma_fence_operands(" + bufs_.at(o.g1_acc).code + ");");
    if (!o.g1_a.empty()) {
      Line("kiln::wgmma_fence_operands(" + bufs_.at(o.g1_a).code + ");");
    }
    waits({U::kB}, prev, "", false);
  };
  Line("// consumers, software-pipelined: iteration k issues its first gemm,");
  Line("// then the last gemm of iteration k - 1 (which runs under this");
  Line("// iteration's element-wise code); each tile is freed once the gemm");
  Line("// reading it has completed");
  Line("const long long kiln_lo = " + range.start +
       ", kiln_hi = " + range.stop + ";");
  Open("if (kiln_lo < kiln_hi)");
  Open("");
  Line("const long long " + v + " = kiln_lo;");
  Line(StrCat("const int kiln_slot = kiln_it % ", S, ";"));
  PointRingAt(ring, "kiln_slot");
  waits({U::kPrefix, U::kA}, "kiln_slot", "kiln_it", true);
  KILN_GPU_RETURN_IF_ERROR(emit(0, o.b_begin, false));
  waits({U::kPrefix, U::kA}, "kiln_slot", "", false);
  Close();
  Line("++kiln_it;");
  Open(StrCat("for (long long ", v, " = kiln_lo + 1; ", v, " < kiln_hi; ++", v,
              ", ++kiln_it)"));
  Line(StrCat("const int kiln_slot = kiln_it % ", S, ";"));
  PointRingAt(ring, "kiln_slot");
  waits({U::kPrefix, U::kA}, "kiln_slot", "kiln_it", true);
  KILN_GPU_RETURN_IF_ERROR(emit(0, o.prefix_end, true));
  KILN_GPU_RETURN_IF_ERROR(previous_b());
  Line("kiln::wgmma_wait<1>();");
  Line("kiln::wgmma_fence_operands(" + bufs_.at(o.g0_acc).code + ");");
  waits({U::kPrefix}, "kiln_slot", "", false);
  PointRingAt(ring, "kiln_slot");
  KILN_GPU_RETURN_IF_ERROR(emit(o.prefix_end, o.wait_at, false));
  wait_last_gemm();
  KILN_GPU_RETURN_IF_ERROR(emit(o.wait_at, o.b_begin, false));
  waits({U::kA}, "kiln_slot", "", false);
  Close();
  // The last iteration's B.
  KILN_GPU_RETURN_IF_ERROR(previous_b());
  wait_last_gemm();
  Close();
  return absl::OkStatus();
}

std::string Emitter::BarIndex(int group, const std::string& slot) const {
  return ws_groups_ == 1 ? slot : StrCat(group * ws_stages_, " + ", slot);
}

void Emitter::WaitFull(int group, const std::string& slot,
                       const std::string& it) {
  Line(StrCat("kiln::mbar_wait(&kiln_full[", BarIndex(group, slot), "], (", it,
              " / ", ws_stages_, ") & 1);"));
}

void Emitter::ReleaseEmpty(int group, const std::string& slot,
                           const std::string& when) {
  // Lane 0 of each consumer warp arrives (the barrier counts warps). In a
  // cluster pair the barrier counts warpgroups of both blocks (the
  // partner's producer multicasts into this block's slot): each
  // warpgroup's first warp arrives here, its second on the partner's.
  const std::string bar = StrCat("&kiln_empty[", BarIndex(group, slot), "]");
  if (kp_.launch.cluster_x > 1) {
    Line(StrCat("if (", when, "threadIdx.x % 128 == 0) kiln::mbar_arrive(", bar,
                ");"));
    Line(StrCat("if (", when, "threadIdx.x % 128 == 32) ",
                "kiln::mbar_arrive_cluster(", bar, ", kiln_rank ^ 1);"));
    return;
  }
  Line(StrCat("if (", when, "threadIdx.x % 32 == 0) kiln::mbar_arrive(", bar,
              ");"));
}

void Emitter::ReleasePre(const std::string& when) {
  Line(StrCat("if (", when,
              "threadIdx.x % 32 == 0) kiln::mbar_arrive(&kiln_qempty[(kiln_q - "
              "1) % kiln_qslots]);"));
}

std::string Emitter::TileLoopHead() const {
  if (!kp_.launch.persistent) return "{";
  if ((kp_.launch.walk == Walk::kMirroredPairsX)) {
    // Each block walks units of two tiles, x = g - 1 - p and then x = p
    // (kiln_t = 2 * unit + half); an odd extent's middle tile is its
    // unit's only one.
    std::string head =
        "for (long long kiln_t = 2LL * blockIdx.x; kiln_t < 2 * kiln_walk0 * "
        "kiln_grid1 * kiln_grid2; kiln_t += kiln_t % 2 ? 2LL * gridDim.x - 1 "
        ": 1) {";
    const std::string bx = Mangle(k_.block_vars[0]);
    StrAppend(&head, " const long long kiln_p = kiln_t / 2 % kiln_walk0; ", bx,
              " = kiln_t % 2 ? kiln_p : kiln_grid0 - 1 - kiln_p; if (kiln_t % "
              "2 && kiln_p == kiln_grid0 - 1 - kiln_p) continue;");
    const char* dims[3] = {"", "kiln_t / 2 / kiln_walk0 % kiln_grid1",
                           "kiln_t / 2 / (kiln_walk0 * kiln_grid1)"};
    for (size_t d = 1; d < k_.block_vars.size() && d < 3; ++d) {
      StrAppend(&head, " ", Mangle(k_.block_vars[d]), " = ", dims[d], ";");
    }
    return head;
  }
  // A cluster pair walks the grid of pairs (kiln_walk0 = ceil(grid0 / 2)
  // along x) in step; its blocks take x = 2 * pair + rank.
  const bool pairs = kp_.launch.cluster_x > 1;
  std::string head =
      pairs ? "for (long long kiln_t = blockIdx.x / 2; kiln_t < kiln_walk0 * "
              "kiln_grid1 * kiln_grid2; kiln_t += gridDim.x / 2) {"
            : "for (long long kiln_t = blockIdx.x; kiln_t < kiln_walk0 * "
              "kiln_grid1 * kiln_grid2; kiln_t += gridDim.x) {";
  const char* dims[3] = {"kiln_t % kiln_walk0",
                         "kiln_t / kiln_walk0 % kiln_grid1",
                         "kiln_t / (kiln_walk0 * kiln_grid1)"};
  for (size_t d = 0; d < k_.block_vars.size() && d < 3; ++d) {
    StrAppend(&head, " ", Mangle(k_.block_vars[d]), " = ", dims[d], ";");
  }
  // (With a rasterize, it places the pair first: EmitRasterize.)
  if (pairs && kp_.ws.rasterize.empty()) StrAppend(&head, " ", PairX());
  return head;
}

std::string Emitter::PairX() const {
  const std::string bx = Mangle(k_.block_vars[0]);
  return StrCat(bx, " = ", bx, " * 2 + kiln_rank;");
}

absl::StatusOr<std::string> Emitter::ProducerCode() {
  std::string saved_out = std::move(out_);
  const int saved_indent = indent_;
  out_.clear();
  indent_ = 1;
  absl::Status st = EmitProducer();
  std::string code = std::move(out_);
  out_ = std::move(saved_out);
  indent_ = saved_indent;
  if (!st.ok()) return st;
  return code;
}

absl::Status Emitter::EmitProducer() {
  const int64_t S = ws_stages_;
  const int64_t T = threads_;
  Line("// Warp specialisation: threads [0, " + std::to_string(T) +
       ") consume, the last warpgroup produces (TMA).");
  const int64_t bars = S * ws_groups_;
  Line(StrCat("__shared__ __align__(8) unsigned long long kiln_full[", bars,
              "], kiln_empty[", bars, "];"));
  if (!kp_.ws.preloads.empty()) {
    Line(StrCat("constexpr int kiln_qslots = ",
                kp_.shared.preload_slots.empty() ? 1 : 2, ";"));
    for (size_t i = 0; i < ws_pre_copies_.size(); ++i) {
      Line(StrCat("constexpr unsigned kiln_qoff", i, " = ",
                  ws_pre_copies_[i].ring_off, ";"));
    }
    Line(
        "__shared__ __align__(8) unsigned long long kiln_qfull[kiln_qslots], "
        "kiln_qempty[kiln_qslots];");
  }
  Open("if (threadIdx.x == 0)");
  Open(StrCat("for (int kiln_s = 0; kiln_s < ", bars, "; ++kiln_s)"));
  Line("kiln::mbar_init(&kiln_full[kiln_s], 1);");
  if (kp_.launch.cluster_x > 1) {
    Line(StrCat("kiln::mbar_init(&kiln_empty[kiln_s], ",
                kp_.launch.cluster_x * T / 128,
                ");  // one arrival per consumer warpgroup of the pair"));
  } else {
    Line(StrCat("kiln::mbar_init(&kiln_empty[kiln_s], ", T / 32,
                ");  // one arrival per consumer warp"));
  }
  Close();
  if (!kp_.ws.preloads.empty()) {
    Open("for (int kiln_s = 0; kiln_s < kiln_qslots; ++kiln_s)");
    Line("kiln::mbar_init(&kiln_qfull[kiln_s], 1);");
    Line(StrCat("kiln::mbar_init(&kiln_qempty[kiln_s], ", T / 32, ");"));
    Close();
  }
  Line("kiln::mbar_init_fence();");
  Close();
  // (A cluster pair's barriers are armed before either block's loads or
  // remote arrivals reach them.)
  Line(kp_.launch.cluster_x > 1 ? "kiln::cluster_sync();" : "__syncthreads();");
  const bool rebalance = T + 128 > 256;
  Open(StrCat("if (threadIdx.x >= ", T, ")"));
  // (Registers per thread after setmaxnreg, multiples of 8: ptxas
  // allocates the producer's code within them.)
  const int64_t producer_regs = ProducerRegs(kp_.launch);
  if (rebalance) Line(StrCat("kiln::regs_dec<", producer_regs, ">();"));
  // (With no TMA copies the loop kept its cp.async ring: nothing to do.)
  if (!ws_copies_.empty() || !ws_pre_copies_.empty()) {
    Open(StrCat("if (kiln_tma && threadIdx.x == ", T, ")"));
    for (size_t m = 0; m < kp_.tma.maps.size(); ++m) {
      Line(StrCat("kiln::tma_prefetch(&kiln_map", m, ");"));
    }
    Line("int kiln_it = 0;  // ring iterations so far (all tiles)");
    if (!ws_pre_copies_.empty()) Line("int kiln_q = 0;  // tiles begun");
    Line(TileLoopHead());
    ++indent_;
    for (const RasterizeStmt* r : kp_.ws.rasterize) {
      KILN_GPU_RETURN_IF_ERROR(EmitRasterize(*r));
    }
    // The lets the copies' starts name, for this tile (the consumers'
    // declarations of them are out of scope here).
    for (const LetStmt* l : kp_.ws.producer_lets) {
      KILN_GPU_RETURN_IF_ERROR(DeclareLet(*l));
    }
  }
  // The tile's own loads (Q), into the next slot once the consumers have
  // read the tile's that was there; issued after the ring's first stage
  // (whose slot is freed sooner), or alone when the ring loop runs no
  // iteration.
  auto pre_loads = [&]() {
    Line("const int kiln_qslot = kiln_q % kiln_qslots;");
    Line(
        "if (kiln_q >= kiln_qslots) kiln::mbar_wait(&kiln_qempty[kiln_qslot], "
        "(kiln_q / kiln_qslots - 1) & 1);");
    Line(StrCat("kiln::mbar_arrive_expect_tx(&kiln_qfull[kiln_qslot], ",
                Bytes(ws_pre_copies_), ");"));
    for (size_t i = 0; i < ws_pre_copies_.size(); ++i) {
      const TmaCopy& t = ws_pre_copies_[i];
      EmitTmaLoads(t,
                   StrCat("kiln_smem + (kiln_qslot == 0 ? ", t.off0,
                          " : kiln_qoff", i, ")"),
                   "&kiln_qfull[kiln_qslot]");
    }
    Line("++kiln_q;");
  };
  if (!ws_copies_.empty()) {
    const std::string& v = ws_range_.var;
    // (The planned bounds, lets resolved: the producer runs none of the
    // consumers' statements.)
    absl::StatusOr<std::string> lo = std::string("0LL");
    if (kp_.ws.loop->start) lo = Index(kp_.ws.start);
    if (!lo.ok()) return lo.status();
    auto hi = Index(kp_.ws.stop);
    if (!hi.ok()) return hi.status();
    Line("const long long kiln_lo = " + *lo + ", kiln_hi = " + *hi + ";");
    Open(StrCat("for (long long ", v, " = kiln_lo; ", v, " < kiln_hi; ++", v,
                ", ++kiln_it)"));
    Line(StrCat("const int kiln_slot = kiln_it % ", S, ";"));
    // The body's lets the loads' starts name, for this iteration.
    for (const LetStmt* l : kp_.ws.loop_lets) {
      KILN_GPU_RETURN_IF_ERROR(DeclareLet(*l));
    }
    // Each barrier group: wait until the consumers freed the slot, then
    // expect its bytes and issue its loads.
    auto claim = [&](int g, int64_t bytes) {
      const std::string bar = BarIndex(g, "kiln_slot");
      Line(StrCat("if (kiln_it >= ", S, ") kiln::mbar_wait(&kiln_empty[", bar,
                  "], (kiln_it / ", S, " - 1) & 1);"));
      Line(StrCat("kiln::mbar_arrive_expect_tx(&kiln_full[", bar, "], ", bytes,
                  ");"));
    };
    if (ws_groups_ == 1) claim(0, Bytes(ws_copies_));
    for (size_t i = 0; i < ws_copies_.size(); ++i) {
      const TmaCopy& t = ws_copies_[i];
      const int g = ws_groups_ == 1 ? 0 : static_cast<int>(i);
      if (ws_groups_ > 1) claim(g, t.bytes());
      Open("");
      Line(StrCat(
          "unsigned char* const kiln_dst = kiln_smem + (kiln_slot == 0 ? ",
          t.off0, " : ", t.ring_off, " + (kiln_slot - 1) * ", t.slot, ");"));
      EmitTmaLoads(t, "kiln_dst",
                   StrCat("&kiln_full[", BarIndex(g, "kiln_slot"), "]"));
      Close();
    }
    if (!ws_pre_copies_.empty()) {
      Open(StrCat("if (", v, " == kiln_lo)"));
      pre_loads();
      Close();
    }
    Close();
    if (!ws_pre_copies_.empty()) {
      Open("if (kiln_hi <= kiln_lo)");
      pre_loads();
      Close();
    }
  } else if (!ws_pre_copies_.empty()) {
    pre_loads();
  }
  if (!ws_copies_.empty() || !ws_pre_copies_.empty()) {
    Close();  // tiles
    Close();
  }
  // (No block of a cluster pair leaves while the other may still arrive
  // on its barriers.)
  if (kp_.launch.cluster_x > 1) Line("kiln::cluster_sync();");
  Line("return;");
  Close();
  if (rebalance) {
    // setmaxnreg.inc only takes registers the block already holds: it
    // launches with `launch` per thread (65536 over its threads, as
    // ptxas allocates under __launch_bounds__(T + 128, 1)), and what the
    // producer gives back is shared by the consumers (a multiple of 8, at
    // most 256). Asking for more waits forever.
    const int64_t launch = std::min<int64_t>(255, 65536 / (T + 128)) / 8 * 8;
    const int64_t regs = std::min<int64_t>(
        256, (launch * (T + 128) - 128 * producer_regs) / T / 8 * 8);
    Line(StrCat("kiln::regs_inc<", regs, ">();"));
  }
  return absl::OkStatus();
}

}  // namespace kiln::compiler::gpu::internal
