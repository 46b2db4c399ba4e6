// PlanOverlap (Hopper): a fused warp-specialised ring loop (attention) is
// software-pipelined by its last gemm (FA3's intra-warpgroup overlap) where
// the statements allow it and registers are left (kernel_plan.h,
// OverlapPlan). The emitter's side is EmitOverlapped (tma_loop.cc beside this
// file).
// 1. The body without its ring copies; the last statement must be a 16-bit
//    wgmma gemm (fp8 gemms wait for themselves).
// 2. B: that gemm and the statements just before it that write only its
//    accumulator (attention: the rescale of O). A: the rest; its prefix ends
//    with its first wgmma gemm.
// 3. Refuse when the prefix reads or A touches B's accumulator, B reads
//    what the prefix writes, or B uses the loop variable or the body's lets
//    (B runs one iteration late).
// 4. wait_at: the first statement of A's rest writing what the last gemm
//    reads (P, rewritten from the new scores).
// 5. Which part reads each ring tile; a tile read by B and by A would be
//    needed at two stages at once: refuse.
// 6. Both accumulators and the packed A operand stay live across the
//    element-wise code. Measured (CUDA 13, H200): ptxas spills past 160
//    registers. With two consumer warpgroups (three with the producer) the
//    pipelined loop runs slower than the plain one even where it fits
//    (128x128 tiles, 160 live registers of the consumers' 232, no spills:
//    -4 to -11% at head dims 64 and 128; the warpgroups already overlap one
//    another's softmax and gemms), so those loops keep the plain form.
#include <algorithm>

#include "compiler/codegen/gpu/kernel_source_internal.h"
#include "compiler/codegen/gpu/planners.h"
#include "compiler/codegen/gpu/stmt_access.h"

namespace kiln::compiler::gpu {

void PlanOverlap(const Kernel& /*k*/, KernelPlan* plan) {
  WarpSpecialisedPlan& ws = plan->ws;
  if (!ws.loop || !ws.fused) return;
  const FragmentPlan& frag = plan->fragments;
  // 1.
  std::vector<const Stmt*> stmts;
  for (const Stmt& s : ws.loop->body) {
    auto* c = std::get_if<CopyStmt>(&s.node);
    if (c && std::find(ws.ring_tiles.begin(), ws.ring_tiles.end(),
                       c->dst.name) != ws.ring_tiles.end()) {
      continue;
    }
    stmts.push_back(&s);
  }
  // The register accumulator of a 16-bit wgmma gemm statement (or null).
  auto wg_acc = [&](const Stmt* s) -> const GemmStmt* {
    auto* g = std::get_if<GemmStmt>(&s->node);
    if (!g) return nullptr;
    auto c = frag.registers.find(g->c.name);
    auto a = frag.tiles.find(g->a.name);
    if (c == frag.registers.end() || !c->second.warpgroup ||
        a == frag.tiles.end() || DTypeBits(a->second.dtype) == 8) {
      return nullptr;
    }
    return g;
  };
  if (stmts.size() < 3) return;
  const GemmStmt* last = wg_acc(stmts.back());
  if (!last) return;
  std::vector<std::set<std::string>> reads(stmts.size()), writes(stmts.size());
  for (size_t i = 0; i < stmts.size(); ++i) {
    AllStmtAccesses(*stmts[i], frag, &reads[i], &writes[i]);
  }
  // 2.
  const std::string& acc = last->c.name;
  size_t b = stmts.size() - 1;
  while (b > 0 && writes[b - 1] == std::set<std::string>{acc}) --b;
  size_t g0 = 0;
  while (g0 < b && !wg_acc(stmts[g0])) ++g0;
  if (g0 >= b) return;
  // 3.
  std::set<std::string> prefix_w, rest_r, rest_w, b_r, g1_r, body_lets;
  for (const Stmt* st : stmts) {
    if (auto* l = std::get_if<LetStmt>(&st->node)) body_lets.insert(l->name);
  }
  for (size_t i = 0; i < stmts.size(); ++i) {
    const std::set<std::string>& r = reads[i];
    const std::set<std::string>& w = writes[i];
    if (i <= g0) {
      prefix_w.insert(w.begin(), w.end());
      if (r.count(acc)) return;
    } else if (i < b) {
      rest_r.insert(r.begin(), r.end());
      rest_w.insert(w.begin(), w.end());
    } else {
      b_r.insert(r.begin(), r.end());
      if (i + 1 == stmts.size()) g1_r = r;
      std::set<std::string> used, declared;
      internal::CollectUses(Block{*stmts[i]}, &used, &declared);
      if (used.count(ws.loop->var)) return;
      for (const std::string& n : used) {
        if (body_lets.count(n)) return;
      }
    }
  }
  if (prefix_w.count(acc) || rest_r.count(acc) || rest_w.count(acc)) return;
  for (const std::string& n : b_r) {
    if (prefix_w.count(n)) return;
  }
  OverlapPlan o;
  o.prefix_end = g0 + 1;
  o.b_begin = b;
  // 4.
  o.wait_at = b;
  for (size_t i = g0 + 1; i < b; ++i) {
    bool clash = false;
    for (const std::string& n : writes[i]) clash |= g1_r.count(n) > 0;
    if (clash) {
      o.wait_at = i;
      break;
    }
  }
  // 5.
  for (const std::string& tile : ws.ring_tiles) {
    bool pre = false, rest = false, late = false;
    for (size_t i = 0; i < stmts.size(); ++i) {
      if (!reads[i].count(tile)) continue;
      (i <= g0 ? pre : i < b ? rest : late) = true;
    }
    if (late && (pre || rest)) return;
    o.use[tile] = late   ? RingUse::kB
                  : rest ? RingUse::kA
                  : pre  ? RingUse::kPrefix
                         : RingUse::kNone;
  }
  o.stmts = std::move(stmts);
  o.g0_acc = std::get<GemmStmt>(o.stmts[g0]->node).c.name;
  o.g1_acc = acc;
  if (frag.packed.count(last->a.name)) o.g1_a = last->a.name;
  // 6.
  const RegisterFragment& acc0 = frag.registers.at(o.g0_acc);
  const RegisterFragment& acc1 = frag.registers.at(o.g1_acc);
  const int64_t live =
      acc0.regs() + acc1.regs() + (o.g1_a.empty() ? 0 : acc0.regs() / 2);
  const int64_t cap =
      std::min<int64_t>(255, 65536 / plan->launch.launch_threads / 8 * 8);
  if (live > std::min<int64_t>(cap - 48, 160)) return;
  ws.overlap = std::move(o);
}

}  // namespace kiln::compiler::gpu
