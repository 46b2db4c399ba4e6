// Verifier rule for `local` tiles stored inside `parallel` (tile-ir.md §6,
// rule 8): such a tile is private to one iteration.
//
// A local tile is one copy per thread on GPU targets and one per block on
// the CPU, and the iterations of a `parallel` are spread over the threads as
// the back end chooses. A value one iteration stores into a local tile is
// therefore seen by the iterations that happen to share its thread: on the
// CPU by every later iteration, on a GPU by some. So once a `parallel`
// stores a local tile, an element of it may be read only inside a
// `parallel`, after the same iteration stored that element (the same
// indices, after substituting lets); reading it anywhere else would give
// each target, and each thread mapping, its own answer.
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compiler/ir/const_fold.h"
#include "compiler/ir/format.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/rewrite.h"
#include "compiler/ir/verifier_internal.h"

namespace kiln::compiler::verifier_internal {
namespace {

class PrivateLocals {
 public:
  explicit PrivateLocals(Diagnostics* diags) : diags_(diags) {}

  void Run(const Kernel& k) {
    std::set<std::string> locals;
    Collect(k.body, /*in_parallel=*/false, &locals);
    if (stored_.empty()) return;
    Outside(k.body);
  }

 private:
  // An element by its tile and printed indices (lets substituted); "*"
  // stands for every index of its dim.
  using Element = std::pair<std::string, std::vector<std::string>>;

  // The elements one iteration has stored.
  struct Iteration {
    std::map<std::string, Expr> lets;  // index lets, substituted
    std::set<Element> stored;
  };

  // Local tiles, and where a `parallel` first stores each.
  void Collect(const Block& b, bool in_parallel,
               std::set<std::string>* locals) {
    for (const Stmt& s : b) {
      if (const auto* a = std::get_if<AllocStmt>(&s.node)) {
        if (a->scope == Scope::kLocal) {
          locals->insert(a->name);
          for (const Expr& d : a->shape) dims_[a->name].push_back(Print(d));
        }
      } else if (const auto* st = std::get_if<StoreStmt>(&s.node)) {
        if (in_parallel && locals->count(st->name)) {
          stored_.emplace(st->name, s.loc);
        }
      } else if (const auto* p = std::get_if<ParallelStmt>(&s.node)) {
        Collect(p->body, true, locals);
      } else if (const auto* f = std::get_if<ForStmt>(&s.node)) {
        Collect(f->body, in_parallel, locals);
      } else if (const auto* i = std::get_if<IfStmt>(&s.node)) {
        Collect(i->then_body, in_parallel, locals);
        Collect(i->else_body, in_parallel, locals);
      }
    }
  }

  std::string StoredAt(const std::string& name) const {
    const Loc& l = stored_.at(name);
    return StrCat(l.line, ":", l.col);
  }

  // ---- outside `parallel`: no element of such a tile is read.

  void Outside(const Block& b) {
    for (const Stmt& s : b) {
      if (const auto* p = std::get_if<ParallelStmt>(&s.node)) {
        for (const Expr& e : p->extents) ReadOutside(e, s.loc);
        Iteration it;
        Inside(p->body, &it);
      } else if (const auto* f = std::get_if<ForStmt>(&s.node)) {
        if (f->start) ReadOutside(*f->start, s.loc);
        ReadOutside(f->stop, s.loc);
        if (f->stages) ReadOutside(*f->stages, s.loc);
        Outside(f->body);
      } else if (const auto* i = std::get_if<IfStmt>(&s.node)) {
        ReadOutside(i->cond, s.loc);
        Outside(i->then_body);
        Outside(i->else_body);
      } else {
        const auto* st = std::get_if<StoreStmt>(&s.node);
        if (st && st->op != AssignOp::kSet && stored_.count(st->name)) {
          ReportOutside(s.loc, st->name);  // `+=` reads the element
        }
        SourceRegionsOutside(s);
        Block one{s};
        ForEachExpr(one, [&](Expr& e) { ReadOutside(e, s.loc); });
      }
    }
  }

  void ReadOutside(const Expr& e, const Loc& at) {
    if (e.kind == ExprKind::kLoad && stored_.count(e.name)) {
      ReportOutside(e.loc.line ? e.loc : at, e.name);
    }
    for (const Expr& a : e.args) ReadOutside(a, at);
  }

  // A tile op reading a whole region of such a tile.
  void SourceRegionsOutside(const Stmt& s) {
    auto src = [&](const Region& r) {
      if (stored_.count(r.name))
        ReportOutside(r.loc.line ? r.loc : s.loc, r.name);
    };
    if (const auto* c = std::get_if<CopyStmt>(&s.node)) {
      src(c->src);
    } else if (const auto* g = std::get_if<GemmStmt>(&s.node)) {
      src(g->a);
      src(g->b);
      src(g->c);
    } else if (const auto* r = std::get_if<ReduceStmt>(&s.node)) {
      src(r->src);
    } else if (const auto* c = std::get_if<CumsumStmt>(&s.node)) {
      src(c->src);
    } else if (const auto* a = std::get_if<AtomicAddStmt>(&s.node)) {
      src(a->src);
    }
  }

  void ReportOutside(const Loc& loc, const std::string& name) {
    diags_->push_back(
        {loc, StrCat("local tile '", name,
                     "' is read outside 'parallel', but it is stored inside "
                     "'parallel' at ",
                     StoredAt(name),
                     ": a local tile is one copy per thread on GPU "
                     "targets (one per block on the CPU), so after the loop "
                     "each thread holds the values of its own iterations; "
                     "keep such values in a fragment indexed by the parallel "
                     "variables, or reduce them")});
  }

  // ---- inside `parallel`: an element is read after this iteration
  // stored it.

  void Inside(const Block& b, Iteration* it) {
    for (const Stmt& s : b) {
      if (const auto* l = std::get_if<LetStmt>(&s.node)) {
        ReadInside(l->value, s.loc, *it);
        it->lets[l->name] = Substitute(l->value, it->lets);
      } else if (const auto* st = std::get_if<StoreStmt>(&s.node)) {
        for (const Expr& e : st->indices) ReadInside(e, s.loc, *it);
        ReadInside(st->value, s.loc, *it);
        if (!stored_.count(st->name)) continue;
        Element key = Key(st->name, st->indices, *it);
        if (st->op != AssignOp::kSet && !Stored(key, *it)) {
          ReportInside(s.loc, key);
        }
        it->stored.insert(std::move(key));
      } else if (const auto* i = std::get_if<IfStmt>(&s.node)) {
        ReadInside(i->cond, s.loc, *it);
        Iteration then_it = *it, else_it = *it;
        Inside(i->then_body, &then_it);
        Inside(i->else_body, &else_it);
        // Stored on both branches: stored after the `if`.
        for (const Element& k : then_it.stored) {
          if (else_it.stored.count(k)) it->stored.insert(k);
        }
      } else if (const auto* f = std::get_if<ForStmt>(&s.node)) {
        if (f->start) ReadInside(*f->start, s.loc, *it);
        ReadInside(f->stop, s.loc, *it);
        // What the body stores counts within the body only (the loop may
        // run no step), except an element indexed by the loop variable in a
        // dim the loop covers from 0 to its end: every element of that dim
        // is stored after the loop.
        Iteration body = *it;
        Inside(f->body, &body);
        const bool from_zero = !f->start || FoldInt(*f->start) == 0;
        const std::string stop = Print(Substitute(f->stop, it->lets));
        for (Element k : body.stored) {
          if (!from_zero || it->stored.count(k)) continue;
          bool whole = false;
          const std::vector<std::string>& dims = dims_[k.first];
          for (size_t d = 0; d < k.second.size() && d < dims.size(); ++d) {
            if (k.second[d] == f->var && dims[d] == stop) {
              k.second[d] = "*";
              whole = true;
            }
          }
          if (whole) it->stored.insert(std::move(k));
        }
      }
    }
  }

  static Element Key(const std::string& name, const std::vector<Expr>& indices,
                     const Iteration& it) {
    Element k{name, {}};
    for (const Expr& e : indices) {
      k.second.push_back(Print(Substitute(e, it.lets)));
    }
    return k;
  }

  // Whether `k` was stored, itself or as part of a whole dim.
  static bool Stored(const Element& k, const Iteration& it) {
    const size_t n = k.second.size();
    if (n >= 16) return it.stored.count(k) > 0;
    for (uint32_t mask = 0; mask < (1u << n); ++mask) {
      Element w = k;
      for (size_t d = 0; d < n; ++d) {
        if (mask & (1u << d)) w.second[d] = "*";
      }
      if (it.stored.count(w)) return true;
    }
    return false;
  }

  void ReadInside(const Expr& e, const Loc& at, const Iteration& it) {
    for (const Expr& a : e.args) ReadInside(a, at, it);
    if (e.kind != ExprKind::kLoad || !stored_.count(e.name)) return;
    const Element key = Key(e.name, e.args, it);
    if (!Stored(key, it)) ReportInside(e.loc.line ? e.loc : at, key);
  }

  void ReportInside(const Loc& loc, const Element& key) {
    const std::string& name = key.first;
    diags_->push_back(
        {loc, StrCat("'", name, "[", StrJoin(key.second, ", "),
                     "]' reads local tile '", name,
                     "' before this iteration of 'parallel' stored that "
                     "element; it is stored inside 'parallel' at ",
                     StoredAt(name),
                     ", and a local tile is one copy per thread "
                     "on GPU targets (one per block on the CPU), so the "
                     "value would depend on which iterations share a thread; "
                     "store the element earlier in the same iteration, or "
                     "use a fragment indexed by the parallel variables")});
  }

  Diagnostics* diags_;
  std::map<std::string, Loc> stored_;  // local tile -> first store in parallel
  std::map<std::string, std::vector<std::string>> dims_;  // printed
};

}  // namespace

void CheckPrivateLocals(const Kernel& kernel, Diagnostics* diags) {
  PrivateLocals(diags).Run(kernel);
}

}  // namespace kiln::compiler::verifier_internal
