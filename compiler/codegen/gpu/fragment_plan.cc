#include "compiler/codegen/gpu/fragment_plan.h"

#include <cstdlib>
#include <functional>
#include <utility>

#include "compiler/ir/const_fold.h"
#include "compiler/ir/format.h"

namespace kiln::compiler::gpu {
namespace {

constexpr int64_t kMaxRegsPerFragment = 128;
constexpr int64_t kMaxRegsTotal = 192;
// Accumulator and thread-owned registers together.
constexpr int64_t kMaxOwnedTotal = 128;

void ForEachStmt(const Block& b, const std::function<void(const Stmt&)>& f) {
  for (const Stmt& s : b) {
    f(s);
    if (auto* x = std::get_if<ForStmt>(&s.node)) ForEachStmt(x->body, f);
    if (auto* x = std::get_if<IfStmt>(&s.node)) {
      ForEachStmt(x->then_body, f);
      ForEachStmt(x->else_body, f);
    }
    if (auto* x = std::get_if<ParallelStmt>(&s.node)) ForEachStmt(x->body, f);
  }
}

void ForEachExpr(const Expr& e, const std::function<void(const Expr&)>& f) {
  f(e);
  for (const Expr& a : e.args) ForEachExpr(a, f);
}

// Every expression directly in a statement (not in nested blocks).
void StmtExprs(const Stmt& s, const std::function<void(const Expr&)>& f) {
  auto region = [&](const Region& r) {
    for (const Slice& sl : r.slices) {
      if (sl.kind != Slice::Kind::kFull) ForEachExpr(sl.start, f);
      if (sl.kind == Slice::Kind::kRange) ForEachExpr(sl.extent, f);
    }
  };
  std::visit(
      [&](const auto& n) {
        using T = std::decay_t<decltype(n)>;
        if constexpr (std::is_same_v<T, CopyStmt>) {
          region(n.src);
          region(n.dst);
        } else if constexpr (std::is_same_v<T, FillStmt>) {
          region(n.dst);
          ForEachExpr(n.value, f);
        } else if constexpr (std::is_same_v<T, LetStmt>) {
          ForEachExpr(n.value, f);
        } else if constexpr (std::is_same_v<T, StoreStmt>) {
          for (const Expr& i : n.indices) ForEachExpr(i, f);
          ForEachExpr(n.value, f);
        } else if constexpr (std::is_same_v<T, IfStmt>) {
          ForEachExpr(n.cond, f);
        } else if constexpr (std::is_same_v<T, ForStmt>) {
          if (n.start) ForEachExpr(*n.start, f);
          ForEachExpr(n.stop, f);
        }
      },
      s.node);
}

bool Is16Bit(DType t) { return t == DType::kF16 || t == DType::kBF16; }

void PlanRows(const Kernel& k, const GpuDialect& dialect, FragmentPlan* plan) {
  std::set<std::string> cand, bad;
  for (const auto& [name, t] : plan->tiles) {
    if (t.scope == Scope::kFragment && t.dims.size() == 1 &&
        t.dtype == DType::kF32 && !plan->registers.count(name) &&
        !plan->uniform.count(name)) {
      cand.insert(name);
    }
  }
  auto is_acc = [&](const std::string& n) {
    return plan->registers.count(n) > 0;
  };
  for (bool changed = true; changed;) {
    changed = false;
    NameClasses g;
    auto is_row = [&](const std::string& n) {
      return cand.count(n) > 0 && !bad.count(n);
    };
    std::set<std::string> newly_bad;
    auto mark = [&](const std::string& n) {
      if (is_row(n)) newly_bad.insert(n);
    };
    std::set<std::string> added;  // rows atomically added to a tensor
    ForEachStmt(k.body, [&](const Stmt& s) {
      std::visit(
          [&](const auto& n) {
            using T = std::decay_t<decltype(n)>;
            if constexpr (std::is_same_v<T, ReduceStmt>) {
              if (is_row(n.src.name)) mark(n.src.name);
              if (is_row(n.dst.name)) {
                const bool ok = is_acc(n.src.name) && Whole(n.src) &&
                                Whole(n.dst) && n.dim == 1;
                if (ok) {
                  g.Union(n.dst.name, n.src.name);
                } else {
                  mark(n.dst.name);
                }
              }
            } else if constexpr (std::is_same_v<T, CopyStmt>) {
              const bool rs = is_row(n.src.name), rd = is_row(n.dst.name);
              if (rs && !Whole(n.src)) mark(n.src.name);
              if (rd && !Whole(n.dst)) mark(n.dst.name);
              if (rs && rd) g.Union(n.src.name, n.dst.name);
              if (rs && is_acc(n.dst.name)) mark(n.src.name);
              if (rd && is_acc(n.src.name)) mark(n.dst.name);
            } else if constexpr (std::is_same_v<T, FillStmt>) {
              if (is_row(n.dst.name) && !Whole(n.dst)) mark(n.dst.name);
            } else if constexpr (std::is_same_v<T, AtomicAddStmt>) {
              if (is_row(n.src.name) && !Whole(n.src)) mark(n.src.name);
              if (is_row(n.src.name)) added.insert(n.src.name);
            } else if constexpr (std::is_same_v<T, CumsumStmt>) {
              mark(n.src.name);
              mark(n.dst.name);
            } else if constexpr (std::is_same_v<T, GemmStmt>) {
              mark(n.a.name);
              mark(n.b.name);
              mark(n.c.name);
            } else if constexpr (std::is_same_v<T, ParallelStmt>) {
              std::set<std::string> rows_used, accs;
              bool stores_memory = false, stores_registers = false,
                   bad_index = false;
              auto check = [&](const std::string& name,
                               const std::vector<Expr>& idx) {
                if (is_acc(name)) accs.insert(name);
                if (!is_row(name)) return;
                rows_used.insert(name);
                if (idx.size() != 1 || idx[0].kind != ExprKind::kVar ||
                    idx[0].name != n.vars[0]) {
                  bad_index = true;
                }
              };
              ForEachStmt(n.body, [&](const Stmt& b) {
                if (auto* st = std::get_if<StoreStmt>(&b.node)) {
                  check(st->name, st->indices);
                  auto t = plan->tiles.find(st->name);
                  if (t == plan->tiles.end() ||
                      t->second.scope == Scope::kShared) {
                    stores_memory = true;
                  } else {
                    stores_registers = true;  // row, accumulator or local
                  }
                }
                StmtExprs(b, [&](const Expr& e) {
                  if (e.kind == ExprKind::kLoad) check(e.name, e.args);
                });
              });
              if (rows_used.empty()) return;
              bool ok = !bad_index;
              if (n.vars.size() == 1) {
                // A body storing into memory runs on one lane of each row
                // group (the rows' copies agree), so it may store nothing
                // the other lanes hold.
                ok = ok && accs.empty() && !(stores_memory && stores_registers);
              } else {
                ok = ok && !accs.empty();
              }
              for (const std::string& r : rows_used) {
                if (!ok) {
                  mark(r);
                  continue;
                }
                for (const std::string& a : accs) g.Union(r, a);
                for (const std::string& r2 : rows_used) g.Union(r, r2);
              }
            }
          },
          s.node);
    });
    // Components: at least one accumulator, all of one layout, every row
    // of the accumulators' M. Where the accumulators split their columns
    // over warps (warpgroups), each column slice holds a copy of its rows
    // (reductions meet in the scratch; one slice stores them).
    std::map<std::string, std::vector<std::string>> comp;
    for (const std::string& r : cand) {
      if (is_row(r)) comp[g.Find(r)].push_back(r);
    }
    for (const auto& [name, rf] : plan->registers) {
      comp[g.Find(name)].push_back(name);
    }
    for (const auto& [root, members] : comp) {
      const RegisterFragment* acc = nullptr;
      bool ok = true;
      for (const std::string& m : members) {
        if (!is_acc(m)) continue;
        const RegisterFragment& rf = plan->registers.at(m);
        if (!acc) acc = &rf;
        ok = ok && rf.m == acc->m && rf.warps_m == acc->warps_m &&
             rf.warps_n == acc->warps_n && rf.warpgroup == acc->warpgroup;
      }
      for (const std::string& m : members) {
        if (is_acc(m)) continue;
        // (Each column slice's copy of a row would add itself.)
        if (!ok || !acc || plan->tiles.at(m).dims[0] != acc->m ||
            (acc->warps_n > 1 && added.count(m))) {
          newly_bad.insert(m);
        }
      }
    }
    for (const std::string& b : newly_bad) changed |= bad.insert(b).second;
    if (!changed) {
      for (const std::string& r : cand) {
        if (!is_row(r)) continue;
        for (const auto& [name, rf] : plan->registers) {
          if (g.Find(name) == g.Find(r)) {
            plan->rows[r] = RowFragment{rf.m,
                                        rf.warps_m,
                                        rf.warps_n,
                                        rf.tile_m,
                                        dialect.acc.rows_per_lane,
                                        rf.warpgroup};
            break;
          }
        }
      }
    }
  }
}

void PlanPacked(const Kernel& k, FragmentPlan* plan) {
  std::map<std::string, std::string> source;  // fragment -> accumulator
  std::set<std::string> bad;
  ForEachStmt(k.body, [&](const Stmt& s) {
    if (auto* c = std::get_if<CopyStmt>(&s.node)) {
      auto t = plan->tiles.find(c->dst.name);
      if (t == plan->tiles.end() || t->second.scope != Scope::kFragment) {
        return;
      }
      auto acc = plan->registers.find(c->src.name);
      if (acc == plan->registers.end() || !Whole(c->src) || !Whole(c->dst) ||
          acc->second.warps_n != 1 || !Is16Bit(t->second.dtype) ||
          source.count(c->dst.name)) {
        bad.insert(c->dst.name);
        return;
      }
      source[c->dst.name] = c->src.name;
    }
  });
  for (const auto& entry : source) {
    const std::string p = entry.first, acc = entry.second;
    const RegisterFragment& src = plan->registers.at(acc);
    int readers = 0;
    if (plan->uniform.count(p)) bad.insert(p);  // read outside `parallel`
    ForEachStmt(k.body, [&](const Stmt& s) {
      std::visit(
          [&](const auto& n) {
            using T = std::decay_t<decltype(n)>;
            if constexpr (std::is_same_v<T, GemmStmt>) {
              if (n.b.name == p || n.c.name == p) bad.insert(p);
              if (n.a.name != p) return;
              auto c = plan->registers.find(n.c.name);
              if (c == plan->registers.end() || n.transpose_a ||
                  c->second.m != src.m || c->second.warps_m != src.warps_m ||
                  c->second.warps_n != 1 ||
                  c->second.warpgroup != src.warpgroup) {
                bad.insert(p);
              }
              ++readers;
            } else if constexpr (std::is_same_v<T, CopyStmt>) {
              if (n.src.name == p) bad.insert(p);
            } else if constexpr (std::is_same_v<T, FillStmt>) {
              if (n.dst.name == p) bad.insert(p);
            } else if constexpr (std::is_same_v<T, ReduceStmt> ||
                                 std::is_same_v<T, CumsumStmt>) {
              if (n.src.name == p || n.dst.name == p) bad.insert(p);
            } else if constexpr (std::is_same_v<T, AtomicAddStmt>) {
              if (n.src.name == p) bad.insert(p);
            } else if constexpr (std::is_same_v<T, ParallelStmt>) {
              ForEachStmt(n.body, [&](const Stmt& b) {
                if (auto* st = std::get_if<StoreStmt>(&b.node)) {
                  if (st->name == p) bad.insert(p);
                }
                StmtExprs(b, [&](const Expr& e) {
                  if (e.kind == ExprKind::kLoad && e.name == p) bad.insert(p);
                });
              });
            }
          },
          s.node);
    });
    // wgmma accumulators: the packed operands count against the register
    // budget too (over it, ptxas spills; P then goes through shared memory).
    if (src.warpgroup) {
      int64_t total = src.m / src.warps_m / src.tile_m * (src.n / 16) * 4;
      for (const auto& [n, r] : plan->registers) total += r.regs();
      if (total > kMaxRegsTotal) bad.insert(p);
    }
    if (readers > 0 && !bad.count(p)) plan->packed[p] = acc;
  }
}

// Mirrors: an f32 fragment of an accumulator's shape that a `parallel`
// over that shape reads or stores element for element beside the
// accumulator (`Acc[i, j] += Part[i, j] * s[i]`, the promotion of a
// block-scaled GEMM) takes the accumulator's register layout, so the
// statement is lane-local arithmetic; to a fixpoint (a mirror's mirrors).
// Every other use is checked with the accumulators' (step 3), which drops
// a mirror used in a way registers cannot serve.
std::set<std::string> AddMirrors(const Kernel& k, FragmentPlan* plan) {
  std::set<std::string> mirrors;
  std::map<std::string, RegisterFragment>& regs = plan->registers;
  auto mirrorable = [&](const std::string& n, const RegisterFragment& r) {
    auto t = plan->tiles.find(n);
    return t != plan->tiles.end() && t->second.scope == Scope::kFragment &&
           t->second.dtype == DType::kF32 && t->second.dims.size() == 2 &&
           t->second.dims[0] == r.m && t->second.dims[1] == r.n &&
           !plan->uniform.count(n) && !regs.count(n);
  };
  for (bool changed = true; changed;) {
    changed = false;
    ForEachStmt(k.body, [&](const Stmt& s) {
      auto* p = std::get_if<ParallelStmt>(&s.node);
      if (!p || p->vars.size() != 2) return;
      std::set<std::string> in_order;
      auto note = [&](const std::string& name, const std::vector<Expr>& idx) {
        if (idx.size() == 2 && idx[0].kind == ExprKind::kVar &&
            idx[0].name == p->vars[0] && idx[1].kind == ExprKind::kVar &&
            idx[1].name == p->vars[1]) {
          in_order.insert(name);
        }
      };
      ForEachStmt(p->body, [&](const Stmt& b) {
        if (auto* st = std::get_if<StoreStmt>(&b.node)) {
          note(st->name, st->indices);
        }
        StmtExprs(b, [&](const Expr& e) {
          if (e.kind == ExprKind::kLoad) note(e.name, e.args);
        });
      });
      const RegisterFragment* acc = nullptr;
      for (const std::string& n : in_order) {
        auto r = regs.find(n);
        if (r != regs.end() && FoldInt(p->extents[0]) == r->second.m &&
            FoldInt(p->extents[1]) == r->second.n) {
          acc = &r->second;
          break;
        }
      }
      if (!acc) return;
      const RegisterFragment layout = *acc;
      for (const std::string& n : in_order) {
        if (mirrorable(n, layout)) {
          regs[n] = layout;
          mirrors.insert(n);
          changed = true;
        }
      }
    });
  }
  return mirrors;
}

}  // namespace

std::optional<FragmentBox> RegisterBox(const Region& r, int64_t m, int64_t n) {
  FragmentBox box{{0, 0}, {m, n}};
  if (!r.has_slices) return box;
  if (r.slices.size() != 2) return std::nullopt;
  const int64_t dims[2] = {m, n};
  for (size_t d = 0; d < 2; ++d) {
    const Slice& sl = r.slices[d];
    if (sl.kind == Slice::Kind::kFull) continue;
    if (sl.kind != Slice::Kind::kRange) return std::nullopt;
    const auto start = FoldInt(sl.start);
    const auto extent = FoldInt(sl.extent);
    if (!start || !extent || *start < 0 || *extent < 1 ||
        *start + *extent > dims[d]) {
      return std::nullopt;
    }
    box.start[d] = *start;
    box.extent[d] = *extent;
  }
  return box;
}

bool ChooseWarpgroups(int64_t m, int64_t n, int64_t k, int64_t threads,
                      const TileInfo& a, const TileInfo& b, bool transpose_b,
                      int* wgs_m, int* wgs_n) {
  auto operand = [](const TileInfo& t) {
    return t.dims.size() == 2 && t.dims[0] % 8 == 0 &&
           (t.dims[1] * (DTypeBits(t.dtype) / 8)) % 32 == 0;
  };
  const int64_t groups = threads / 128;
  const int64_t bytes = std::max<int64_t>(1, DTypeBits(a.dtype) / 8);
  // One instruction is 32 bytes of K: k16 for 16-bit types, k32 for fp8.
  const int64_t k_step = 32 / bytes;
  if (threads % 128 != 0 || groups == 0 || k % k_step != 0 || !operand(a) ||
      !operand(b)) {
    return false;
  }
  // B's swizzle panel in elements (kiln::WgmmaTile::kPanel): an N-major B
  // is addressed a panel at a time.
  const int64_t panel = SwizzleSpanBytes(b.dims[1] * bytes) / bytes;
  for (int64_t wm = groups; wm >= 1; --wm) {
    if (groups % wm != 0) continue;
    const int64_t wn = groups / wm;
    if (m % (64 * wm) != 0 || n % wn != 0) continue;
    const int64_t cols = n / wn;
    if (cols % 8 != 0 || cols > 256) continue;
    if (wn > 1 && (bytes != 2 || (!transpose_b && cols % panel != 0))) {
      continue;
    }
    *wgs_m = static_cast<int>(wm);
    *wgs_n = static_cast<int>(wn);
    return true;
  }
  return false;
}

bool ChooseWarps(int64_t m, int64_t n, int64_t warps, GemmPolicy policy,
                 int* warps_m, int* warps_n) {
  auto fits = [&](int64_t wm, int64_t wn) {
    return wm * wn == warps && m % (16 * wm) == 0 && n % (16 * wn) == 0;
  };
  if (policy == GemmPolicy::kFullRow && fits(warps, 1)) {
    *warps_m = static_cast<int>(warps);
    *warps_n = 1;
    return true;
  }
  if (policy == GemmPolicy::kFullCol && fits(1, warps)) {
    *warps_m = 1;
    *warps_n = static_cast<int>(warps);
    return true;
  }
  int64_t best = -1;
  for (int64_t wm = 1; wm <= warps; ++wm) {
    if (warps % wm != 0 || !fits(wm, warps / wm)) continue;
    int64_t diff = std::llabs(m / wm - n / (warps / wm));
    if (best < 0 || diff < best) {
      best = diff;
      *warps_m = static_cast<int>(wm);
      *warps_n = static_cast<int>(warps / wm);
    }
  }
  return best >= 0;
}

std::map<std::string, std::string> FragmentPlan::Describe() const {
  std::map<std::string, std::string> out;
  for (const auto& [name, t] : tiles) {
    if (t.scope == Scope::kLocal) continue;
    if (auto it = registers.find(name); it != registers.end()) {
      const RegisterFragment& r = it->second;
      out[name] = r.warpgroup
                      ? StrCat("registers, wgmma accumulator [", r.m, ", ", r.n,
                               "] over ", r.warps_m,
                               r.warps_n > 1 ? StrCat("x", r.warps_n) : "",
                               " warpgroups, ", r.regs(), " per thread")
                      : StrCat("registers, mma accumulator [", r.m, ", ", r.n,
                               "] over ", r.warps_m, "x", r.warps_n, " warps, ",
                               r.regs(), " per thread");
    } else if (auto pk = packed.find(name); pk != packed.end()) {
      out[name] = StrCat("registers, mma A operands packed from ", pk->second);
    } else if (auto rt = rows.find(name);
               rt != rows.end() && rt->second.owned()) {
      const RowFragment& r = rt->second;
      out[name] =
          StrCat("registers, rows of thread-owned chunks of ", r.own_vec,
                 " columns over ", r.own_threads, " threads, ", r.regs(),
                 " per thread (", r.own_lanes(), " lanes per row)");
    } else if (auto rt = rows.find(name); rt != rows.end()) {
      out[name] = StrCat(
          "registers, rows of the ", rt->second.warpgroup ? "wgmma" : "mma",
          " accumulator layout [", rt->second.m, "] over ", rt->second.warps_m,
          rt->second.warpgroup ? " warpgroups, " : " warps, ",
          rt->second.regs(), " per thread",
          rt->second.warps_n > 1 ? StrCat(", a copy in each of ",
                                          rt->second.warps_n, " column slices")
                                 : "");
    } else if (auto ow = owned.find(name); ow != owned.end()) {
      const OwnedFragment& o = ow->second;
      out[name] =
          StrCat("registers, thread-owned chunks of ", o.vec, " columns over ",
                 o.threads, " threads, ", o.regs(), " per thread");
    } else if (wgmma_tiles.count(name)) {
      out[name] = "shared, wgmma operand (swizzled panels, 1024-byte aligned)";
    } else if (swizzled.count(name)) {
      out[name] = "shared, swizzled 16-byte chunks";
    } else {
      out[name] = t.scope == Scope::kFragment ? "shared (fragment)" : "shared";
    }
  }
  return out;
}

void WalkControlFlow(const Block& b,
                     const std::function<void(const Expr&)>& outside,
                     const std::function<void(const std::string&)>& stored,
                     const std::function<void(const Stmt&)>& tile_op) {
  for (const Stmt& s : b) {
    std::visit(
        [&](const auto& n) {
          using T = std::decay_t<decltype(n)>;
          if constexpr (std::is_same_v<T, LetStmt>) {
            outside(n.value);
          } else if constexpr (std::is_same_v<T, StoreStmt>) {
            stored(n.name);
            for (const Expr& i : n.indices) outside(i);
            outside(n.value);
          } else if constexpr (std::is_same_v<T, IfStmt>) {
            outside(n.cond);
            WalkControlFlow(n.then_body, outside, stored, tile_op);
            WalkControlFlow(n.else_body, outside, stored, tile_op);
          } else if constexpr (std::is_same_v<T, ForStmt>) {
            if (n.start) outside(*n.start);
            outside(n.stop);
            WalkControlFlow(n.body, outside, stored, tile_op);
          } else if constexpr (std::is_same_v<T, RasterizeStmt>) {
            outside(n.panel);
          } else {
            tile_op(s);
          }
        },
        s.node);
  }
}

FragmentPlan PlanFragments(const Kernel& k, int64_t threads,
                           const GpuDialect& dialect) {
  FragmentPlan plan;
  ForEachStmt(k.body, [&](const Stmt& s) {
    if (auto* a = std::get_if<AllocStmt>(&s.node)) {
      TileInfo t;
      t.scope = a->scope;
      t.dtype = a->dtype;
      t.layout = a->layout;
      for (const Expr& d : a->shape) t.dims.push_back(FoldInt(d).value_or(0));
      plan.tiles[a->name] = t;
    }
  });
  std::function<void(const Block&)> uniform = [&](const Block& b) {
    for (const Stmt& s : b) {
      if (std::holds_alternative<ParallelStmt>(s.node)) continue;
      auto note = [&](const std::string& n) {
        auto t = plan.tiles.find(n);
        if (t != plan.tiles.end() && t->second.scope == Scope::kFragment) {
          plan.uniform.insert(n);
        }
      };
      if (auto* st = std::get_if<StoreStmt>(&s.node)) note(st->name);
      StmtExprs(s, [&](const Expr& e) {
        if (e.kind == ExprKind::kLoad) note(e.name);
      });
      if (auto* f = std::get_if<ForStmt>(&s.node)) uniform(f->body);
      if (auto* i = std::get_if<IfStmt>(&s.node)) {
        uniform(i->then_body);
        uniform(i->else_body);
      }
    }
  };
  uniform(k.body);
  const int64_t wave = dialect.wave_size;
  const int64_t warps = threads % wave == 0 ? threads / wave : 0;
  auto tile = [&](const std::string& n) -> const TileInfo* {
    auto it = plan.tiles.find(n);
    return it == plan.tiles.end() ? nullptr : &it->second;
  };
  auto smem_operand = [&](const Region& r, DType dt) {
    const TileInfo* t = tile(r.name);
    return t && t->scope != Scope::kLocal && Whole(r) && t->dims.size() == 2 &&
           t->dtype == dt && t->dims[1] % 8 == 0;
  };

  // 2. Candidates from gemms.
  std::map<std::string, RegisterFragment>& cand = plan.registers;
  std::set<std::string> rejected;
  ForEachStmt(k.body, [&](const Stmt& s) {
    auto* g = std::get_if<GemmStmt>(&s.node);
    if (!g) return;
    const TileInfo* c = tile(g->c.name);
    const TileInfo* a = tile(g->a.name);
    // 8-bit floats: wgmma only, both operands K-major (A [M, K], B [N, K]).
    const bool fp8 =
        a && (a->dtype == DType::kF8E4M3 || a->dtype == DType::kF8E5M2);
    const bool wgmma_fp8 =
        fp8 && dialect.warpgroup_mma && !g->transpose_a && g->transpose_b;
    bool ok = warps > 0 && c && a && c->scope == Scope::kFragment &&
              c->dtype == DType::kF32 && Whole(g->c) && c->dims.size() == 2 &&
              (Is16Bit(a->dtype) || wgmma_fp8) &&
              smem_operand(g->a, a->dtype) && smem_operand(g->b, a->dtype);
    RegisterFragment rf;
    rf.tile_m = dialect.acc.tile_m;
    rf.tile_n = dialect.acc.tile_n;
    rf.tile_regs = dialect.acc.regs_per_tile;
    if (ok) {
      int64_t kd = g->transpose_a ? a->dims[0] : a->dims[1];
      rf.m = c->dims[0];
      rf.n = c->dims[1];
      int wgs_m = 0, wgs_n = 0;
      if (dialect.warpgroup_mma &&
          ChooseWarpgroups(rf.m, rf.n, kd, threads, *tile(g->a.name),
                           *tile(g->b.name), g->transpose_b, &wgs_m, &wgs_n)) {
        rf.warpgroup = true;
        rf.tile_m = 64;
        rf.warps_m = wgs_m;
        rf.warps_n = wgs_n;
        ok = rf.regs() <= kMaxRegsPerFragment;
      } else {
        ok = !fp8 && kd % 16 == 0 &&
             ChooseWarps(rf.m, rf.n, warps, g->policy, &rf.warps_m,
                         &rf.warps_n) &&
             rf.regs() <= kMaxRegsPerFragment;
      }
    }
    if (!ok) {
      rejected.insert(g->c.name);
      return;
    }
    auto it = cand.find(g->c.name);
    if (it != cand.end() && !(it->second == rf)) {
      rejected.insert(g->c.name);
    } else {
      cand[g->c.name] = rf;
    }
  });
  for (const std::string& r : rejected) cand.erase(r);
  for (const std::string& u : plan.uniform) cand.erase(u);
  const std::set<std::string> mirrors = AddMirrors(k, &plan);

  // 3. Uses, to a fixpoint.
  for (bool changed = true; changed;) {
    changed = false;
    std::set<std::string> drop;
    auto is_reg = [&](const std::string& n) { return cand.count(n) > 0; };
    ForEachStmt(k.body, [&](const Stmt& s) {
      std::visit(
          [&](const auto& n) {
            using T = std::decay_t<decltype(n)>;
            if constexpr (std::is_same_v<T, CopyStmt>) {
              bool rs = is_reg(n.src.name), rd = is_reg(n.dst.name);
              // A constant box of a register fragment stored to a tensor
              // (TileLang's `T.copy(acc_o[:valid, :], O[...])`, the rows of
              // a head group smaller than the tile) stays in registers: each
              // thread stores its elements inside the box.
              auto free_dims = [](const Region& r) {
                size_t count = 0;
                for (const Slice& sl : r.slices) {
                  count += sl.kind != Slice::Kind::kIndex;
                }
                return count;
              };
              const bool box_to_tensor =
                  rs && !tile(n.dst.name) && n.dst.has_slices &&
                  free_dims(n.dst) == 2 &&
                  RegisterBox(n.src, cand.at(n.src.name)).has_value();
              if (rs && ((!Whole(n.src) && !box_to_tensor) || rd)) {
                drop.insert(n.src.name);
              }
              if (rd && (!Whole(n.dst) || rs)) drop.insert(n.dst.name);
            } else if constexpr (std::is_same_v<T, FillStmt>) {
              if (is_reg(n.dst.name) && !Whole(n.dst)) drop.insert(n.dst.name);
            } else if constexpr (std::is_same_v<T, GemmStmt>) {
              if (is_reg(n.a.name)) drop.insert(n.a.name);
              if (is_reg(n.b.name)) drop.insert(n.b.name);
            } else if constexpr (std::is_same_v<T, ReduceStmt>) {
              if (is_reg(n.src.name) &&
                  (!Whole(n.src) || n.dim != 1 || is_reg(n.dst.name))) {
                drop.insert(n.src.name);
              }
              if (is_reg(n.dst.name)) drop.insert(n.dst.name);
            } else if constexpr (std::is_same_v<T, CumsumStmt>) {
              if (is_reg(n.src.name)) drop.insert(n.src.name);
              if (is_reg(n.dst.name)) drop.insert(n.dst.name);
            } else if constexpr (std::is_same_v<T, AtomicAddStmt>) {
              if (is_reg(n.src.name) && !Whole(n.src)) drop.insert(n.src.name);
            } else if constexpr (std::is_same_v<T, ParallelStmt>) {
              // Register fragments accessed in the body: indexed by the
              // loop variables in order, extents equal to their shape, one
              // layout for all.
              std::vector<std::string> used;
              bool bad_index = false;
              auto check = [&](const std::string& name,
                               const std::vector<Expr>& idx) {
                if (!is_reg(name)) return;
                used.push_back(name);
                bool ok = n.vars.size() == 2 && idx.size() == 2;
                for (size_t d = 0; ok && d < 2; ++d) {
                  ok =
                      idx[d].kind == ExprKind::kVar && idx[d].name == n.vars[d];
                }
                if (ok) {
                  const RegisterFragment& r = cand.at(name);
                  ok = FoldInt(n.extents[0]) == r.m &&
                       FoldInt(n.extents[1]) == r.n;
                }
                if (!ok) {
                  drop.insert(name);
                  bad_index = true;
                }
              };
              ForEachStmt(n.body, [&](const Stmt& b) {
                if (auto* st = std::get_if<StoreStmt>(&b.node)) {
                  check(st->name, st->indices);
                }
                StmtExprs(b, [&](const Expr& e) {
                  if (e.kind == ExprKind::kLoad) check(e.name, e.args);
                });
              });
              (void)bad_index;
              for (const std::string& u : used) {
                if (is_reg(u) && is_reg(used[0]) &&
                    !(cand.at(u) == cand.at(used[0]))) {
                  drop.insert(u);
                }
              }
            }
          },
          s.node);
    });
    for (const std::string& d : drop) changed |= cand.erase(d) > 0;
    // Budget: drop the largest while over, mirrors before accumulators.
    int64_t total = 0;
    for (const auto& [n, r] : cand) total += r.regs();
    if (!changed && total > kMaxRegsTotal) {
      auto rank = [&](const auto& it) {
        return std::pair(mirrors.count(it->first) > 0, it->second.regs());
      };
      auto largest = cand.begin();
      for (auto it = cand.begin(); it != cand.end(); ++it) {
        if (rank(it) > rank(largest)) largest = it;
      }
      cand.erase(largest);
      changed = true;
    }
  }

  // 5. Row vectors.
  PlanRows(k, dialect, &plan);
  // 6. A operands in registers.
  if (dialect.acc_feeds_a_operand) PlanPacked(k, &plan);

  // 4. Swizzled operands of the tensor-core gemms (the wgmma layout for
  // any tile a wgmma reads: it keeps 16-byte rows of 8 elements whole, so
  // ldmatrix can read it too).
  ForEachStmt(k.body, [&](const Stmt& s) {
    if (auto* g = std::get_if<GemmStmt>(&s.node)) {
      auto c = cand.find(g->c.name);
      if (c == cand.end()) return;
      std::set<std::string>& into =
          c->second.warpgroup ? plan.wgmma_tiles : plan.swizzled;
      if (!plan.packed.count(g->a.name)) into.insert(g->a.name);
      into.insert(g->b.name);
    }
  });
  for (const std::string& t : plan.wgmma_tiles) plan.swizzled.erase(t);
  // 7. Thread-owned fragments.
  PlanOwned(k, threads, kMaxOwnedTotal, &plan);
  // 8. Their row vectors.
  PlanOwnedRows(k, dialect.wave_size, &plan);
  return plan;
}

}  // namespace kiln::compiler::gpu
