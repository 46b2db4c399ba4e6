// Step 7 of the fragment plan (fragment_plan.h): fragments held in
// registers by the threads that use them, chunk-wise, for element-wise and
// memory-bound kernels (norms, softmax, casts, element-wise maps).
//
// A candidate is a rank-1 or rank-2 fragment or shared tile with constant
// dims, not placed by the earlier steps, whose elements divide evenly over
// the block: a shared tile met only in the ways below (TileLang's habit of
// staging a row through shared memory: copy X -> X_shared -> X_local) never
// passes an element from one thread to another, so registers hold it
// without the round trip and its barriers. It
// stays a candidate while every use is one of
//   - a copy of the whole fragment, from or to a tensor, a shared tile or
//     another candidate of the same shape (not a register accumulator);
//   - a fill of the whole fragment;
//   - the source of a whole reduction along its last dim (the destination
//     elsewhere: shared memory; a rank-1 tile reduces as one row);
//   - an element access inside a `parallel` whose extents are the
//     fragment's dims, indexed by the loop variables in order, with no
//     accumulator or row vector in the same body (a fragment of lower rank
//     may be indexed by the trailing variables when the leading extents
//     are 1 and a full-rank candidate is met there too);
// and is dropped on any other (a gemm, cumsum or atomic operand, a slice,
// an element read outside a `parallel`, a reduction into it), to a
// fixpoint. Candidates meeting in one copy or one `parallel` must own their
// elements alike: they take one chunk width, the widest the group's
// copies want (16 bytes of the narrowest tensor they copy), halved until
// the columns and the block divide evenly (a class may mix owned and
// shared members: copies and `parallel`s between them go element by
// element). The budget holds at the busiest point of the kernel (Peak
// below): while the registers live there exceed it, the largest shared tile
// live there is dropped (back to shared memory), then the largest fragment.
#include <functional>

#include "compiler/codegen/gpu/fragment_plan.h"
#include "compiler/codegen/gpu/stmt_access.h"
#include "compiler/ir/const_fold.h"

namespace kiln::compiler::gpu {
namespace {

constexpr int64_t kMaxOwnedRegs = 128;  // per fragment, per thread

void Loads(const Expr& e, const std::function<void(const Expr&)>& f) {
  if (e.kind == ExprKind::kLoad) f(e);
  for (const Expr& a : e.args) Loads(a, f);
}

void RegionLoads(const Region& r, const std::function<void(const Expr&)>& f) {
  for (const Slice& s : r.slices) {
    if (s.kind != Slice::Kind::kFull) Loads(s.start, f);
    if (s.kind == Slice::Kind::kRange) Loads(s.extent, f);
  }
}

struct Scan {
  const FragmentPlan& plan;
  const std::set<std::string>& cand;
  std::set<std::string> bad;
  NameClasses classes;
  std::map<std::string, int64_t> narrowest;  // bytes of copy partners

  bool IsCand(const std::string& n) const {
    return cand.count(n) > 0 && !bad.count(n);
  }
  bool InRegisters(const std::string& n) const {
    return plan.registers.count(n) || plan.rows.count(n) ||
           plan.packed.count(n);
  }
  const TileInfo* Tile(const std::string& n) const {
    auto it = plan.tiles.find(n);
    return it == plan.tiles.end() ? nullptr : &it->second;
  }
  void Partner(const std::string& own, DType other) {
    const int64_t b = std::max<int64_t>(1, DTypeBits(other) / 8);
    auto [it, fresh] = narrowest.emplace(own, b);
    if (!fresh) it->second = std::min(it->second, b);
  }

  // Element reads outside a parallel body disqualify.
  void Outside(const Expr& e) {
    Loads(e, [&](const Expr& l) {
      if (IsCand(l.name)) bad.insert(l.name);
    });
  }

  void Parallel(const ParallelStmt& p) {
    std::vector<std::string> used;
    std::vector<std::string> lower;  // indexed by trailing variables only
    bool full_rank = false;
    bool mixed = false;
    auto access = [&](const std::string& name, const std::vector<Expr>& idx) {
      if (InRegisters(name)) mixed = true;
      if (!IsCand(name)) return;
      const TileInfo* t = Tile(name);
      // Indexed by the loop variables in order; or, a tile of lower rank
      // (LayerNorm's gamma [D] in a (1, D) loop), by the trailing ones when
      // every leading extent is 1: the same elements of the same threads.
      const size_t off = p.vars.size() - std::min(p.vars.size(), idx.size());
      bool ok = idx.size() == t->dims.size() && idx.size() <= p.vars.size();
      for (size_t d = 0; ok && d < off; ++d) ok = FoldInt(p.extents[d]) == 1;
      for (size_t d = 0; ok && d < idx.size(); ++d) {
        ok = idx[d].kind == ExprKind::kVar && idx[d].name == p.vars[off + d] &&
             FoldInt(p.extents[off + d]) == t->dims[d];
      }
      if (!ok) bad.insert(name);
      if (off == 0) {
        full_rank = true;
      } else {
        lower.push_back(name);
      }
      used.push_back(name);
    };
    std::function<void(const Block&)> body = [&](const Block& b) {
      for (const Stmt& s : b) {
        std::visit(
            [&](const auto& n) {
              using T = std::decay_t<decltype(n)>;
              auto ex = [&](const Expr& e) {
                Loads(e, [&](const Expr& l) { access(l.name, l.args); });
              };
              if constexpr (std::is_same_v<T, LetStmt>) {
                ex(n.value);
              } else if constexpr (std::is_same_v<T, StoreStmt>) {
                access(n.name, n.indices);
                for (const Expr& i : n.indices) ex(i);
                ex(n.value);
              } else if constexpr (std::is_same_v<T, IfStmt>) {
                ex(n.cond);
                body(n.then_body);
                body(n.else_body);
              } else if constexpr (std::is_same_v<T, ForStmt>) {
                if (n.start) ex(*n.start);
                ex(n.stop);
                body(n.body);
              } else {
                // (Tile ops are not allowed in a parallel body: the
                // verifier refuses them.)
              }
            },
            s.node);
      }
    };
    body(p.body);
    // The loop runs over a full-rank member's elements: without one, the
    // lower-rank members are not owned.
    if (!full_rank) {
      for (const std::string& u : lower) bad.insert(u);
    }
    for (const std::string& u : used) {
      if (mixed) bad.insert(u);
      classes.Union(u, used[0]);
    }
  }

  void Copy(const CopyStmt& c) {
    RegionLoads(c.src, [&](const Expr& l) { Outside(l); });
    RegionLoads(c.dst, [&](const Expr& l) { Outside(l); });
    const bool s = IsCand(c.src.name), d = IsCand(c.dst.name);
    if (s && (!Whole(c.src) || InRegisters(c.dst.name))) {
      bad.insert(c.src.name);
    }
    if (d && (!Whole(c.dst) || InRegisters(c.src.name))) {
      bad.insert(c.dst.name);
    }
    if (s && d) {
      if (Tile(c.src.name)->dims != Tile(c.dst.name)->dims) {
        bad.insert(c.src.name);
        bad.insert(c.dst.name);
      }
      classes.Union(c.src.name, c.dst.name);
    }
    const TileInfo* st = Tile(c.src.name);
    const TileInfo* dt = Tile(c.dst.name);
    if (s && !dt) Partner(c.src.name, DTypeOf(c.dst.name, dt));
    if (d && !st) Partner(c.dst.name, DTypeOf(c.src.name, st));
  }
  // Tensors are not tiles; their dtype is recorded by the caller.
  std::map<std::string, DType> tensors;
  DType DTypeOf(const std::string& n, const TileInfo* t) const {
    if (t) return t->dtype;
    auto it = tensors.find(n);
    return it == tensors.end() ? DType::kF32 : it->second;
  }

  void Stmts(const Block& b) {
    WalkControlFlow(
        b, [&](const Expr& e) { Outside(e); },
        [&](const std::string& name) {
          if (IsCand(name)) bad.insert(name);
        },
        [&](const Stmt& s) {
          std::visit(
              [&](const auto& n) {
                using T = std::decay_t<decltype(n)>;
                if constexpr (std::is_same_v<T, CopyStmt>) {
                  Copy(n);
                } else if constexpr (std::is_same_v<T, FillStmt>) {
                  RegionLoads(n.dst, [&](const Expr& l) { Outside(l); });
                  Outside(n.value);
                  if (IsCand(n.dst.name) && !Whole(n.dst)) {
                    bad.insert(n.dst.name);
                  }
                } else if constexpr (std::is_same_v<T, ReduceStmt>) {
                  RegionLoads(n.src, [&](const Expr& l) { Outside(l); });
                  RegionLoads(n.dst, [&](const Expr& l) { Outside(l); });
                  if (IsCand(n.dst.name)) bad.insert(n.dst.name);
                  if (IsCand(n.src.name)) {
                    const TileInfo* t = Tile(n.src.name);
                    // Along the last dim: a rank-1 tile is one row.
                    const bool last = (t->dims.size() == 2 && n.dim == 1) ||
                                      (t->dims.size() == 1 && n.dim == 0);
                    if (!Whole(n.src) || !last || !Whole(n.dst) ||
                        InRegisters(n.dst.name)) {
                      bad.insert(n.src.name);
                    }
                  }
                } else if constexpr (std::is_same_v<T, GemmStmt>) {
                  bad.insert(n.a.name);
                  bad.insert(n.b.name);
                  bad.insert(n.c.name);
                } else if constexpr (std::is_same_v<T, CumsumStmt> ||
                                     std::is_same_v<T, AtomicAddStmt>) {
                  bad.insert(n.src.name);
                  bad.insert(n.dst.name);
                } else if constexpr (std::is_same_v<T, ParallelStmt>) {
                  Parallel(n);
                }
              },
              s.node);
        });
  }
};

// The widest chunk not over `want` elements that divides the columns and
// spreads the elements evenly over the block (0: none).
int ChunkWidth(const TileInfo& t, int64_t threads, int64_t want) {
  const int64_t cols = t.dims.back();
  int64_t elems = 1;
  for (int64_t d : t.dims) elems *= d;
  for (int64_t v = std::max<int64_t>(1, want); v >= 1; v /= 2) {
    if (cols % v == 0 && elems % (v * threads) == 0) {
      return static_cast<int>(v);
    }
  }
  return 0;
}

// Where the owned fragments are live. Statements are numbered in order
// (a `parallel` or tile op is one statement; `for` and `if` bodies are
// numbered through); a fragment is live from its first statement to its
// last, and over the whole of every loop it is used in (its value may pass
// from one iteration to the next). Only the points between two statements
// hold whole fragments: a statement reading the last of one fragment and
// writing the first of another (`copy X_shared -> X_local`, a `parallel`
// mapping one into the other) goes chunk by chunk over one layout, so the
// two share registers. A fused reduction's temporary (FusedReductionAfter:
// a `parallel` storing it, then its row reduction) is never held whole: its
// store counts at the reduction.
struct Liveness {
  const FragmentPlan& plan;
  const std::map<std::string, OwnedFragment>& owned;
  int next = 0;
  std::map<std::string, std::pair<int, int>> span;  // first, last

  void Use(const std::string& n, int at) {
    auto [it, fresh] = span.emplace(n, std::make_pair(at, at));
    if (!fresh) {
      it->second.first = std::min(it->second.first, at);
      it->second.second = std::max(it->second.second, at);
    }
  }

  // Numbers `b`'s statements; returns the owned fragments they use.
  std::set<std::string> Number(const Block& b) {
    std::set<std::string> used;
    for (size_t i = 0; i < b.size(); ++i) {
      const Stmt& s = b[i];
      if (auto* f = std::get_if<ForStmt>(&s.node)) {
        const int begin = next;
        std::set<std::string> in = Number(f->body);
        for (const std::string& n : in) {
          Use(n, begin);
          Use(n, std::max(begin, next - 1));
        }
        used.insert(in.begin(), in.end());
        continue;
      }
      if (auto* c = std::get_if<IfStmt>(&s.node)) {
        for (const Block* body : {&c->then_body, &c->else_body}) {
          std::set<std::string> in = Number(*body);
          used.insert(in.begin(), in.end());
        }
        continue;
      }
      std::set<std::string> r, w;
      AllStmtAccesses(s, plan, &r, &w);
      r.insert(w.begin(), w.end());
      const ReduceStmt* fused = FusedReductionAfter(b, i, plan);
      const std::string temporary = fused ? fused->src.name : "";
      for (const std::string& n : r) {
        if (!owned.count(n)) continue;
        Use(n, n == temporary ? next + 1 : next);
        used.insert(n);
      }
      ++next;
    }
    return used;
  }
};

// The registers of `owned` at the kernel's busiest point, and the
// fragments live there.
int64_t Peak(const Kernel& k, const FragmentPlan& plan,
             const std::map<std::string, OwnedFragment>& owned,
             std::set<std::string>* live_at_peak) {
  Liveness live{plan, owned, 0, {}};
  live.Number(k.body);
  int64_t peak = 0;
  for (int point = 1; point < live.next; ++point) {
    int64_t regs = 0;
    std::set<std::string> here;
    for (const auto& [n, sp] : live.span) {
      if (sp.first < point && point <= sp.second) {
        regs += owned.at(n).regs();
        here.insert(n);
      }
    }
    if (regs > peak) {
      peak = regs;
      *live_at_peak = std::move(here);
    }
  }
  return peak;
}

}  // namespace

void PlanOwned(const Kernel& k, int64_t threads, int64_t budget,
               FragmentPlan* plan) {
  std::set<std::string> cand;
  for (const auto& [name, t] : plan->tiles) {
    if (t.scope == Scope::kLocal || plan->registers.count(name) ||
        plan->rows.count(name) || plan->packed.count(name) ||
        plan->uniform.count(name)) {
      continue;
    }
    if (t.dims.empty() || t.dims.size() > 2 || t.dtype == DType::kI4 ||
        t.dtype == DType::kU4 || threads <= 0) {
      continue;
    }
    bool constant = true;
    int64_t elems = 1;
    for (int64_t d : t.dims) {
      constant = constant && d > 0;
      elems *= d;
    }
    if (constant && elems % threads == 0 && elems / threads <= kMaxOwnedRegs) {
      cand.insert(name);
    }
  }
  if (cand.empty()) return;
  std::map<std::string, DType> tensors;
  for (const Param& p : k.params) {
    if (p.is_tensor) tensors[p.name] = p.dtype;
  }
  for (;;) {
    Scan scan{*plan, cand, {}, {}, {}, tensors};
    for (bool changed = true; changed;) {
      const size_t before = scan.bad.size();
      scan.classes = {};
      scan.narrowest.clear();
      scan.Stmts(k.body);
      changed = scan.bad.size() != before;
    }
    // One chunk width per class: 16 bytes of the narrowest tensor its
    // members copy (members copying none do not ask; a class copying no
    // tensor takes 16 bytes of its own narrowest dtype).
    std::map<std::string, int64_t> want;  // class -> elements per chunk
    std::map<std::string, int64_t> own_want;
    for (const std::string& c : cand) {
      if (!scan.IsCand(c)) continue;
      const TileInfo& t = plan->tiles.at(c);
      const std::string root = scan.classes.Find(c);
      const int64_t own = 16 / std::max<int64_t>(1, DTypeBits(t.dtype) / 8);
      auto [o, fresh_own] = own_want.emplace(root, own);
      if (!fresh_own) o->second = std::max(o->second, own);
      auto it = scan.narrowest.find(c);
      if (it == scan.narrowest.end()) continue;
      auto [w, fresh] = want.emplace(root, 16 / it->second);
      if (!fresh) w->second = std::max(w->second, 16 / it->second);
    }
    for (const auto& [root, v] : own_want) want.emplace(root, v);
    std::map<std::string, int> width;  // class -> chosen chunk width
    for (const std::string& c : cand) {
      if (!scan.IsCand(c)) continue;
      const std::string root = scan.classes.Find(c);
      const int v = ChunkWidth(plan->tiles.at(c), threads, want.at(root));
      auto [w, fresh] = width.emplace(root, v);
      if (!fresh) w->second = std::min(w->second, v);
    }
    std::map<std::string, OwnedFragment> owned;
    int64_t total = 0;
    for (const auto& [n, r] : plan->registers) total += r.regs();
    for (const std::string& c : cand) {
      if (!scan.IsCand(c)) continue;
      const TileInfo& t = plan->tiles.at(c);
      const std::string root = scan.classes.Find(c);
      OwnedFragment o;
      o.rank = static_cast<int>(t.dims.size());
      o.rows = o.rank == 2 ? t.dims[0] : 1;
      o.cols = t.dims.back();
      o.threads = threads;
      // (Members of a class have one shape, so one width divides all.)
      o.vec = width.at(root);
      if (o.vec == 0) continue;
      owned[c] = o;
    }
    // (The fusion test reads the plan as it would be with these owned.)
    FragmentPlan tentative = *plan;
    tentative.owned = owned;
    std::set<std::string> live;
    total += Peak(k, tentative, owned, &live);
    if (total > budget && !owned.empty()) {
      // Of those live at the peak (any, if none is), shared tiles go back
      // to shared memory first (largest first), so a staging tile never
      // takes a fragment's registers.
      if (live.empty()) {
        for (const auto& [n, o] : owned) live.insert(n);
      }
      auto shared_first = [&](const std::string& n) {
        return plan->tiles.at(n).scope == Scope::kShared;
      };
      const std::string* largest = &*live.begin();
      for (const std::string& n : live) {
        const bool a = shared_first(n), b = shared_first(*largest);
        if ((a && !b) ||
            (a == b && owned.at(n).regs() > owned.at(*largest).regs())) {
          largest = &n;
        }
      }
      cand.erase(*largest);
      continue;
    }
    plan->owned = std::move(owned);
    return;
  }
}

}  // namespace kiln::compiler::gpu
