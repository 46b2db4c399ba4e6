// Step 8 of the fragment plan (fragment_plan.h): the row vectors of
// thread-owned fragments held in registers by the lanes of their rows (a
// softmax's running max and sum, a norm's sum of squares), instead of in
// shared memory behind barriers.
//
// A candidate is a rank-1 f32 fragment not placed by the earlier steps (row
// registers are floats). It stays
// one while every use is one of
//   - a fill of the whole vector;
//   - the destination of a whole reduction along the last dim of a
//     thread-owned rank-2 fragment with as many rows;
//   - an element read inside a `parallel` over such a fragment's index
//     space, indexed by its first variable;
//   - a `parallel` over the vector's rows whose body reads and writes only
//     candidates (indexed by its variable), scalars and tensors (it runs in
//     every lane of a row, alike; a store to a tensor, such as a norm's
//     per-row mean, is made by the row's first lane alone);
// and all the owned fragments it meets (directly or through a row
// `parallel` shared with other candidates) have one layout whose rows'
// chunks sit in whole aligned groups of lanes: register k of thread t holds
// the row of the thread's chunk k, so a reduction ends with every lane of the
// row holding its value (a butterfly within a wave; across the waves of a
// row, through the scratch). A row wider than the block's chunks lies in
// several chunks of every thread, which share one register and combine
// before the butterfly. Anything else leaves it in shared memory.
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "compiler/codegen/gpu/fragment_plan.h"
#include "compiler/ir/const_fold.h"

namespace kiln::compiler::gpu {
namespace {

struct Scan {
  const FragmentPlan& plan;
  std::set<std::string> cand;
  std::set<std::string> bad;
  std::map<std::string, OwnedFragment> layout;
  NameClasses classes;  // candidates meeting in one row `parallel`

  bool IsCand(const std::string& n) const {
    return cand.count(n) > 0 && !bad.count(n);
  }
  const OwnedFragment* Owned(const std::string& n) const {
    auto it = plan.owned.find(n);
    return it == plan.owned.end() ? nullptr : &it->second;
  }
  int64_t Rows(const std::string& n) const { return plan.tiles.at(n).dims[0]; }
  void Layout(const std::string& n, const OwnedFragment& o) {
    if (!IsCand(n)) return;
    if (o.rank != 2 || o.rows != Rows(n)) {
      bad.insert(n);
      return;
    }
    auto [it, fresh] = layout.emplace(n, o);
    if (!fresh && !(it->second == o)) bad.insert(n);
  }

  static void Loads(const Expr& e, const std::function<void(const Expr&)>& f) {
    if (e.kind == ExprKind::kLoad) f(e);
    for (const Expr& a : e.args) Loads(a, f);
  }
  void Outside(const Expr& e) {
    Loads(e, [&](const Expr& l) {
      if (cand.count(l.name)) bad.insert(l.name);
    });
  }
  void OutsideRegion(const Region& r) {
    if (cand.count(r.name)) bad.insert(r.name);
    for (const Slice& s : r.slices) {
      if (s.kind != Slice::Kind::kFull) Outside(s.start);
      if (s.kind == Slice::Kind::kRange) Outside(s.extent);
    }
  }

  // Every statement of a `parallel` body, with its loads and stores.
  static void Body(const Block& b, const std::function<void(const Expr&)>& load,
                   const std::function<void(const StoreStmt&)>& store) {
    for (const Stmt& s : b) {
      std::visit(
          [&](const auto& n) {
            using T = std::decay_t<decltype(n)>;
            auto ex = [&](const Expr& e) { Loads(e, load); };
            if constexpr (std::is_same_v<T, LetStmt>) {
              ex(n.value);
            } else if constexpr (std::is_same_v<T, StoreStmt>) {
              store(n);
              for (const Expr& i : n.indices) ex(i);
              ex(n.value);
            } else if constexpr (std::is_same_v<T, IfStmt>) {
              ex(n.cond);
              Body(n.then_body, load, store);
              Body(n.else_body, load, store);
            } else if constexpr (std::is_same_v<T, ForStmt>) {
              if (n.start) ex(*n.start);
              ex(n.stop);
              Body(n.body, load, store);
            }
          },
          s.node);
    }
  }

  static bool ByVar(const std::vector<Expr>& idx, const std::string& v) {
    return idx.size() == 1 && idx[0].kind == ExprKind::kVar && idx[0].name == v;
  }

  void Parallel(const ParallelStmt& p) {
    // The owned fragment whose index space this is, if any.
    const OwnedFragment* over = nullptr;
    std::set<std::string> vectors, others;
    bool stores_elsewhere = false;
    auto note = [&](const std::string& name, const std::vector<Expr>& idx,
                    bool is_store) {
      if (cand.count(name)) {
        vectors.insert(name);
        if (!ByVar(idx, p.vars[0])) bad.insert(name);
        if (is_store && p.vars.size() != 1) bad.insert(name);
        return;
      }
      if (const OwnedFragment* o = Owned(name)) {
        // (The loop's index space is its full-rank owned fragments'; a
        // lower-rank one indexed by trailing variables rides along.)
        if (over == nullptr || o->rank > over->rank) over = o;
        others.insert(name);
      } else if (plan.tiles.count(name)) {
        others.insert(name);  // a fragment or tile placed otherwise
        if (is_store) stores_elsewhere = true;
      }
      // (A tensor store in a row `parallel` is made by one lane per row:
      // OwnRowLayout::lead.)
    };
    Body(
        p.body, [&](const Expr& l) { note(l.name, l.args, false); },
        [&](const StoreStmt& s) { note(s.name, s.indices, true); });
    if (vectors.empty()) return;
    if (p.vars.size() == 1 && others.empty() && !stores_elsewhere) {
      // A row `parallel`: its vectors share one layout.
      const auto ext = FoldInt(p.extents[0]);
      for (const std::string& v : vectors) {
        if (!ext || *ext != Rows(v)) bad.insert(v);
        classes.Union(v, *vectors.begin());
      }
      return;
    }
    // A `parallel` over an owned fragment's elements reading the vectors
    // (each element is one thread's: its stores may go anywhere).
    const bool ok = over != nullptr && p.vars.size() == 2;
    for (const std::string& v : vectors) {
      if (!ok) {
        bad.insert(v);
      } else {
        Layout(v, *over);
      }
    }
  }

  void Stmts(const Block& b) {
    WalkControlFlow(
        b, [&](const Expr& e) { Outside(e); },
        [&](const std::string& name) {
          if (cand.count(name)) bad.insert(name);
        },
        [&](const Stmt& s) {
          std::visit(
              [&](const auto& n) {
                using T = std::decay_t<decltype(n)>;
                if constexpr (std::is_same_v<T, FillStmt>) {
                  Outside(n.value);
                  for (const Slice& sl : n.dst.slices) {
                    if (sl.kind != Slice::Kind::kFull) bad.insert(n.dst.name);
                  }
                } else if constexpr (std::is_same_v<T, ReduceStmt>) {
                  OutsideRegion(n.src);
                  if (cand.count(n.dst.name)) {
                    const OwnedFragment* o = Owned(n.src.name);
                    bool whole = true;
                    for (const Slice& sl : n.src.slices) {
                      whole = whole && sl.kind == Slice::Kind::kFull;
                    }
                    for (const Slice& sl : n.dst.slices) {
                      whole = whole && sl.kind == Slice::Kind::kFull;
                    }
                    for (const Slice& sl : n.dst.slices) {
                      if (sl.kind != Slice::Kind::kFull) Outside(sl.start);
                    }
                    if (o == nullptr || !whole || n.dim != 1) {
                      bad.insert(n.dst.name);
                    } else {
                      Layout(n.dst.name, *o);
                    }
                  }
                } else if constexpr (std::is_same_v<T, ParallelStmt>) {
                  Parallel(n);
                } else if constexpr (std::is_same_v<T, CopyStmt>) {
                  OutsideRegion(n.src);
                  OutsideRegion(n.dst);
                } else if constexpr (std::is_same_v<T, GemmStmt>) {
                  OutsideRegion(n.a);
                  OutsideRegion(n.b);
                  OutsideRegion(n.c);
                } else if constexpr (std::is_same_v<T, CumsumStmt> ||
                                     std::is_same_v<T, AtomicAddStmt>) {
                  OutsideRegion(n.src);
                  OutsideRegion(n.dst);
                }
              },
              s.node);
        });
  }
};

// Whether the rows of `o` sit in whole aligned groups of lanes: within one
// wave (a power of two dividing it) or across whole waves. A row of more
// chunks than threads (a multiple of them) spans every lane of the block,
// each thread holding several of its chunks (RowFragment::own_group).
bool RowsInLaneGroups(const OwnedFragment& o, int64_t wave) {
  int64_t lanes = o.cols / o.vec;
  if (lanes > o.threads && lanes % o.threads == 0) lanes = o.threads;
  if (lanes <= 0 || o.threads % lanes != 0) return false;
  if (lanes <= wave) return (lanes & (lanes - 1)) == 0 && wave % lanes == 0;
  return lanes % wave == 0;
}

}  // namespace

void PlanOwnedRows(const Kernel& k, int64_t wave, FragmentPlan* plan) {
  if (plan->owned.empty()) return;
  Scan scan{*plan, {}, {}, {}, {}};
  for (const auto& [name, t] : plan->tiles) {
    if (t.scope != Scope::kFragment || t.dims.size() != 1 || t.dims[0] <= 0 ||
        plan->registers.count(name) || plan->rows.count(name) ||
        plan->packed.count(name) || plan->owned.count(name) ||
        plan->uniform.count(name) || t.dtype != DType::kF32) {
      continue;
    }
    scan.cand.insert(name);
  }
  if (scan.cand.empty()) return;
  for (bool changed = true; changed;) {
    const size_t before = scan.bad.size();
    scan.classes = {};
    scan.layout.clear();
    scan.Stmts(k.body);
    // The vectors of one row `parallel` take one layout; one without any is
    // not held anywhere in particular: it stays in shared memory.
    std::map<std::string, OwnedFragment> by_class;
    std::set<std::string> conflicting;
    for (const std::string& c : scan.cand) {
      if (!scan.IsCand(c)) {
        conflicting.insert(scan.classes.Find(c));
        continue;
      }
      auto it = scan.layout.find(c);
      if (it == scan.layout.end()) continue;
      auto [cl, fresh] = by_class.emplace(scan.classes.Find(c), it->second);
      if (!fresh && !(cl->second == it->second)) {
        conflicting.insert(cl->first);
      }
    }
    for (const std::string& c : scan.cand) {
      if (!scan.IsCand(c)) continue;
      const std::string root = scan.classes.Find(c);
      auto cl = by_class.find(root);
      if (conflicting.count(root) || cl == by_class.end() ||
          !RowsInLaneGroups(cl->second, wave)) {
        scan.bad.insert(c);
      } else {
        scan.layout[c] = cl->second;
      }
    }
    changed = scan.bad.size() != before;
  }
  for (const std::string& c : scan.cand) {
    if (!scan.IsCand(c)) continue;
    const OwnedFragment& o = scan.layout.at(c);
    RowFragment r;
    r.m = o.rows;
    r.own_cols = o.cols;
    r.own_threads = o.threads;
    r.own_vec = o.vec;
    r.own_across_waves = r.own_lanes() > wave;
    plan->rows[c] = r;
  }
}

}  // namespace kiln::compiler::gpu
