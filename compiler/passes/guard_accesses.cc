// Every access in range, on every target (tile-ir.md §6.8, §6.9, §8): an
// element load outside its buffer reads zero, an element store outside it
// is skipped, and a tile op's region is clipped to its tile.
//
// 1. Every load `X[i, ...]` of a tensor or tile, anywhere in the body (lets,
//    stores, conditions, loop bounds, region starts), innermost first,
//    becomes `select(in_range, X[i, ...], X-typed 0)`; the back ends
//    evaluate a select's branches lazily (CPU: a branch; GPU: `?:`).
// 2. Every element store `X[i, ...] = v` becomes `if in_range { ... }`.
// 3. A copy, fill or atomic_add whose region has an extent that is not a
//    compile-time constant, or a tile-side index not shown in range, becomes
//    a `parallel` over constant bounds (the extent when constant, else the
//    tile's dim) whose body moves one element under `if`: the iteration is
//    inside every run-time extent and every tile-side index is inside its
//    tile. Elements of a tensor region past the tensor's end then follow
//    rule 1 and 2 as before (reads zero, writes skipped). The back ends
//    never see a run-time extent. A copy whose tile sides start at
//    constants keeps a whole version beside the loop: `if` every run-time
//    extent is at least its bound, the copy with those extents made the
//    bounds (it moves the same elements), else the loop. A grouped GEMM's
//    masked epilogue stores its full tiles as a constant-extent copy.
// 4. A gemm, reduce or cumsum region (compile-time extents, by the
//    verifier) whose tile-side index is not shown in range is an error at
//    its location: those ops have no element form to clip.
// `in_range` is the conjunction over dims of `0 <= i` and `i < dim`,
// leaving out the conjuncts that constants decide (a constant index, or
// `e % c` into a dim of at least c) and those the prover shows true from
// the facts in scope, as the simplify pass gathers them: symbols >= 0,
// block indices in the grid, `assume`s, loop and parallel variables in
// their ranges, the conditions of enclosing `if`s, index lets (so
// `if col < N { ... W[col] ... }` tests nothing more). The GPU emitter
// hoists the linear ones left into one test per statement.
#include <map>

#include "absl/status/status.h"
#include "compiler/arith/prover.h"
#include "compiler/arith/simplify_expr.h"
#include "compiler/ir/assign_op.h"
#include "compiler/ir/const_fold.h"
#include "compiler/ir/diagnostic.h"
#include "compiler/ir/format.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/rewrite.h"
#include "compiler/passes/access_report.h"
#include "compiler/passes/kernel_facts.h"
#include "compiler/passes/passes.h"
#include "compiler/passes/region_access.h"

namespace kiln::compiler {
namespace {

Stmt MakeStmt(auto node, Loc loc) {
  Stmt s;
  s.loc = loc;
  s.node = std::move(node);
  return s;
}

// `a && b`, where a `true` side drops out.
Expr And(Expr a, Expr b) {
  if (a.kind == ExprKind::kBool && a.bool_value) return b;
  if (b.kind == ExprKind::kBool && b.bool_value) return a;
  return Expr::Binary(BinaryOp::kAnd, std::move(a), std::move(b));
}

class Guarder {
 public:
  // `report`: where the findings go (`--prove`); null in a compile.
  Guarder(const Kernel& k, Prover* prover, AccessReport* report = nullptr)
      : prover_(prover), report_(report), fresh_(CollectNames(k)) {
    for (const Param& p : k.params) {
      if (p.is_tensor) buffers_[p.name] = {Scope::kGlobal, p.dtype, p.shape};
    }
  }

  // The kernel-wide facts, then the body.
  absl::Status Run(Kernel& k) {
    prover_->Push();
    AddSymbolFacts(k, prover_, &names_);
    for (const Expr& a : k.assumptions) prover_->AddFact(a);
    AddBlockRanges(k, prover_, &names_);
    Rewrite(k.body);
    prover_->Pop();
    return status_;
  }

 private:
  bool Proven(const Expr& c) {
    return IsIndexExpr(c, names_) && prover_->CanProve(c);
  }

  // The conjunction over dims of `idx` in range of `shape`, without the
  // conjuncts constants or the prover decide (true: nothing to test).
  Expr InRange(const std::vector<Expr>& shape, const std::vector<Expr>& idx,
               const std::vector<bool>* full = nullptr) {
    Expr g = Expr::Bool(true);
    for (size_t d = 0; d < idx.size() && d < shape.size(); ++d) {
      if (full && (*full)[d]) continue;
      const auto i = FoldInt(idx[d]);
      const auto dim = FoldInt(shape[d]);
      // `e % c` (floor modulo) with c > 0 is in [0, c).
      if (idx[d].kind == ExprKind::kBinary &&
          idx[d].binary_op == BinaryOp::kMod && dim) {
        const auto c = FoldInt(idx[d].args[1]);
        if (c && *c > 0 && *c <= *dim) continue;
      }
      if (!i || *i < 0) {
        Expr lo = Expr::Binary(BinaryOp::kLe, Expr::Int(0), idx[d]);
        if (!Proven(lo)) g = And(std::move(g), std::move(lo));
      }
      if (!i || !dim || *i >= *dim) {
        Expr hi = Expr::Binary(BinaryOp::kLt, idx[d], shape[d]);
        if (!Proven(hi)) g = And(std::move(g), std::move(hi));
      }
    }
    return g;
  }

  // ---- the findings (report_ only)

  static void Conjuncts(const Expr& e, std::vector<Expr>* out) {
    if (e.kind == ExprKind::kBinary && e.binary_op == BinaryOp::kAnd) {
      Conjuncts(e.args[0], out);
      Conjuncts(e.args[1], out);
    } else if (!(e.kind == ExprKind::kBool && e.bool_value)) {
      out->push_back(e);
    }
  }

  // !c, a comparison flipped (what the prover's rules read best).
  static Expr Negated(const Expr& c) {
    if (c.kind == ExprKind::kBinary) {
      static const std::map<BinaryOp, BinaryOp> kFlip = {
          {BinaryOp::kLt, BinaryOp::kGe}, {BinaryOp::kLe, BinaryOp::kGt},
          {BinaryOp::kGt, BinaryOp::kLe}, {BinaryOp::kGe, BinaryOp::kLt},
          {BinaryOp::kEq, BinaryOp::kNe}, {BinaryOp::kNe, BinaryOp::kEq}};
      if (auto it = kFlip.find(c.binary_op); it != kFlip.end()) {
        return Expr::Binary(it->second, c.args[0], c.args[1]);
      }
    }
    return Expr::Unary(UnaryOp::kNot, c);
  }

  static std::string Values(const std::map<std::string, int64_t>& m) {
    std::string s;
    for (const auto& [name, v] : m) {
      StrAppend(&s, s.empty() ? "" : ", ", name, " = ", v);
    }
    return s;
  }

  // A finding on an access whose unproven in-range conditions are `left`
  // (InRange's guard, or a region's); `tested`: what the guard does.
  void Note(const Loc& loc, std::string access, const Expr& left,
            std::string_view tested) {
    if (!report_ || quiet_) return;
    AccessFinding f;
    f.loc = loc;
    f.access = std::move(access);
    std::vector<Expr> conds;
    Conjuncts(left, &conds);
    std::vector<std::string> tests;
    std::string example;
    for (const Expr& c : conds) {
      if ((c.kind == ExprKind::kBool && !c.bool_value) || Proven(Negated(c))) {
        f.verdict = AccessFinding::Verdict::kOutOfRange;
        f.detail = StrCat("`", Print(c), "` never holds");
        break;
      }
      f.verdict = AccessFinding::Verdict::kChecked;
      tests.push_back(StrCat("`", Print(c), "`"));
      if (example.empty() && IsIndexExpr(c, names_)) {
        if (auto m = prover_->Counterexample(c); m && !m->empty()) {
          example = StrCat("; out of range at ", Values(*m));
        }
      }
    }
    if (f.verdict == AccessFinding::Verdict::kChecked) {
      f.detail =
          StrCat("tests ", StrJoin(tests, " && "), " (", tested, ")", example);
    }
    report_->findings.push_back(std::move(f));
  }

  // The finding on one region of tile op `op`: every dim's start and end
  // inside its buffer.
  void NoteRegion(const Loc& loc, std::string_view op, const Region& r) {
    if (!report_ || quiet_) return;
    const RegionBuffer* b = Find(r);
    if (!b) return;
    const RegionAccess a(r, b);
    std::vector<Expr> spans;
    for (size_t d = 0; d < a.starts.size(); ++d) {
      spans.push_back(a.free[d] ? a.extents[d] : Expr::Int(1));
    }
    std::vector<Expr> conds;
    Conjuncts(a.SpanInBounds(spans, b->shape), &conds);
    Expr left = Expr::Bool(true);
    for (const Expr& c : conds) {
      Expr folded = FoldConstants(c);
      if (folded.kind == ExprKind::kBool && folded.bool_value) continue;
      if (!Proven(folded)) left = And(std::move(left), std::move(folded));
    }
    const bool tensor = b->scope == Scope::kGlobal;
    Note(loc, StrCat(op, " ", tensor ? "tensor" : "tile", " region ", Print(r)),
         left,
         tensor ? "elements past the tensor read 0, writes there are skipped"
                : "clipped to the tile at run time");
  }

  // Races: two iterations of parallel `p` storing to one element of a
  // shared tile. The stores of the body's top level, under its `if`s
  // (their index conditions holding for both) and in its loops (each
  // iteration at any step of them), through its index lets. A `+=`,
  // `max=` or `min=` the prover does not show free of it (an index read
  // from memory included) is marked `shared_atomic` (tile-ir.md §8); a
  // `-=`, `*=` or `/=` there is an error; a `=` race is a finding of
  // `--prove`. (Compiles look at compound stores only.)
  void CheckRaces(ParallelStmt& p) {
    std::map<std::string, Expr> lets;  // index lets, resolved
    std::map<std::string, Expr> primed;
    Expr other = Expr::Bool(true);  // the same iteration
    for (const std::string& v : p.vars) {
      primed[v] = Expr::Var(v + "'");
      other = And(std::move(other),
                  Expr::Binary(BinaryOp::kEq, Expr::Var(v), primed[v]));
    }
    prover_->Push();
    for (size_t v = 0; v < p.vars.size() && v < p.extents.size(); ++v) {
      prover_->AddRange(p.vars[v] + "'", Expr::Int(0), p.extents[v]);
    }
    std::function<void(Block&)> walk = [&](Block& b) {
      for (Stmt& st : b) {
        if (auto* l = std::get_if<LetStmt>(&st.node)) {
          Expr v = Substitute(l->value, lets);
          if (IsIndexExpr(v, names_)) lets[l->name] = std::move(v);
        } else if (auto* i = std::get_if<IfStmt>(&st.node)) {
          const Expr c = Substitute(i->cond, lets);
          const bool fact = IsIndexExpr(c, names_);
          prover_->Push();
          if (fact) {
            prover_->AddFact(c);
            prover_->AddFact(Substitute(c, primed));
          }
          walk(i->then_body);
          prover_->Pop();
          prover_->Push();
          if (fact) {
            const Expr n = Expr::Unary(UnaryOp::kNot, c);
            prover_->AddFact(n);
            prover_->AddFact(Substitute(n, primed));
          }
          walk(i->else_body);
          prover_->Pop();
        } else if (auto* f = std::get_if<ForStmt>(&st.node)) {
          // A loop inside the body: its variable ranges per iteration of
          // the parallel (two iterations may be at different steps). A
          // loop whose bounds the prover cannot read leaves its variable
          // unknown: an index using it is then not shown free of races.
          const Expr lo = Substitute(f->start ? *f->start : Expr::Int(0), lets);
          const Expr hi = Substitute(f->stop, lets);
          const bool bounded =
              IsIndexExpr(lo, names_) && IsIndexExpr(hi, names_);
          const bool known = names_.count(f->var) > 0;
          if (bounded) names_.insert(f->var);
          prover_->Push();
          if (bounded) {
            prover_->AddRange(f->var, lo, hi);
            prover_->AddRange(f->var + "'", Substitute(lo, primed),
                              Substitute(hi, primed));
            primed[f->var] = Expr::Var(f->var + "'");
          }
          walk(f->body);
          primed.erase(f->var);
          prover_->Pop();
          if (!known) names_.erase(f->var);
        } else if (auto* s = std::get_if<StoreStmt>(&st.node)) {
          CheckStoreRace(p, st.loc, *s, lets, primed, other);
        }
      }
    };
    walk(p.body);
    prover_->Pop();
  }

  void CheckStoreRace(const ParallelStmt& p, const Loc& loc, StoreStmt& s,
                      const std::map<std::string, Expr>& lets,
                      const std::map<std::string, Expr>& primed,
                      const Expr& other) {
    auto it = buffers_.find(s.name);
    if (it == buffers_.end()) return;
    const Scope scope = it->second.scope;
    const bool compound = s.op != AssignOp::kSet;
    // (A fragment's elements may be shared by the iterations too: GPU
    // targets keep a fragment indexed so in shared memory. `=` races are
    // reported for shared tiles.)
    if (scope != Scope::kShared && !(compound && scope == Scope::kFragment)) {
      return;
    }
    if (!compound && (!report_ || quiet_)) return;
    // Same element => same iteration, for every two iterations.
    Expr same = Expr::Bool(true);
    bool index = true;
    for (const Expr& e : s.indices) {
      Expr idx = Substitute(e, lets);
      index &= IsIndexExpr(idx, names_);
      Expr twin = Substitute(idx, primed);
      same = And(std::move(same),
                 Expr::Binary(BinaryOp::kEq, std::move(idx), std::move(twin)));
    }
    const Expr claim =
        Expr::Binary(BinaryOp::kOr, Expr::Unary(UnaryOp::kNot, same), other);
    if (index && prover_->CanProve(claim)) return;
    const char* const what =
        scope == Scope::kShared ? "shared tile" : "fragment";
    // Two iterations that write one element, when the prover finds them.
    std::string pair;
    if (index) {
      if (auto m = prover_->Counterexample(claim)) {
        std::vector<std::string> a, b;
        for (const std::string& v : p.vars) {
          a.push_back(StrCat(v, " = ", (*m)[v]));
          b.push_back(StrCat(v, " = ", (*m)[v + "'"]));
        }
        pair = StrCat("iterations (", StrJoin(a, ", "), ") and (",
                      StrJoin(b, ", "), ")");
      }
    } else if (!compound) {
      return;  // (an index read from memory: not a finding of `=`)
    }
    const std::string why =
        pair.empty()
            ? StrCat(
                  "the prover cannot show that iterations of 'parallel' "
                  "write distinct elements of ",
                  what, " '", s.name, "'")
            : StrCat(pair, " write the same element of ", what, " '", s.name,
                     "'");
    const std::string access =
        StrCat("store ", Print(Expr::Load(s.name, s.indices)));
    auto finding = [&](AccessFinding::Verdict verdict, std::string what_is,
                       std::string detail) {
      AccessFinding f;
      f.loc = loc;
      f.verdict = verdict;
      f.access = std::move(what_is);
      f.detail = std::move(detail);
      report_->findings.push_back(std::move(f));
    };
    if (!compound) {
      if (!pair.empty()) finding(AccessFinding::Verdict::kRace, access, why);
      return;
    }
    if (!HasAtomicForm(s.op)) {
      if (status_.ok()) {
        status_ = LocatedError(
            loc, StrCat("'", AssignOpSpelling(s.op), "' into ", what, " '",
                        s.name, "' inside 'parallel': ", why,
                        "; '+=', 'max=' and 'min=' update such an element "
                        "atomically, '-=', '*=' and '/=' do not"));
      }
      return;
    }
    if (!SharedAtomicType(it->second.dtype)) {
      if (status_.ok()) {
        status_ =
            LocatedError(loc, StrCat("'", AssignOpSpelling(s.op), "' into ",
                                     DTypeName(it->second.dtype), " ", what,
                                     " '", s.name, "' inside 'parallel': ", why,
                                     ", so the update must be atomic, and ",
                                     DTypeName(it->second.dtype),
                                     " elements have no atomic update"));
      }
      return;
    }
    s.shared_atomic = true;
    if (report_ && !quiet_) {
      finding(AccessFinding::Verdict::kAtomic,
              StrCat(access, " ", AssignOpSpelling(s.op)),
              StrCat(why, "; updated atomically"));
    }
  }

  // Element types a shared-memory atomic update takes on every GPU target.
  static bool SharedAtomicType(DType t) {
    switch (t) {
      case DType::kBool:
      case DType::kI4:
      case DType::kU4:
        return false;
      default:
        return true;
    }
  }

  static Expr Zero(DType t) {
    if (t == DType::kBool) return Expr::Bool(false);
    return Expr::Cast(t, Expr::Int(0));
  }

  void Rewrite(Expr& e) {
    for (Expr& a : e.args) Rewrite(a);
    if (e.kind != ExprKind::kLoad) return;
    auto it = buffers_.find(e.name);
    if (it == buffers_.end()) return;
    Expr guard = InRange(it->second.shape, e.args);
    Note(e.loc, StrCat("load ", Print(e)), guard, "reads 0 past it");
    if (guard.kind == ExprKind::kBool) return;  // constants in range
    const Loc loc = e.loc;
    Expr load = std::move(e);
    e = Expr::Call("select",
                   {std::move(guard), std::move(load), Zero(it->second.dtype)},
                   loc);
  }

  void Rewrite(Region& r) {
    for (Slice& s : r.slices) {
      if (s.kind != Slice::Kind::kFull) Rewrite(s.start);
      if (s.kind == Slice::Kind::kRange) Rewrite(s.extent);
    }
  }

  // Inside `if c`: each conjunct of c that is an index expression.
  void AddConjuncts(const Expr& c) {
    if (c.kind == ExprKind::kBinary && c.binary_op == BinaryOp::kAnd) {
      AddConjuncts(c.args[0]);
      AddConjuncts(c.args[1]);
    } else if (IsIndexExpr(c, names_)) {
      prover_->AddFact(c);
    }
  }

  const RegionBuffer* Find(const Region& r) const {
    auto it = buffers_.find(r.name);
    return it == buffers_.end() ? nullptr : &it->second;
  }

  // The constant bounds of a clipped op's loop over `lead` (the first
  // region's loop dims): the extent when constant, else each tile side's
  // room (its dim, less a constant start); `extents` gets the first
  // region's extents, folded. False where a bound is unknown or not
  // positive (the verifier's case).
  static bool LoopBounds(const std::vector<RegionAccess>& acc,
                         const std::vector<size_t>& lead,
                         std::vector<Expr>* extents,
                         std::vector<int64_t>* bounds) {
    for (size_t k = 0; k < lead.size(); ++k) {
      const Expr ext = FoldConstants(acc[0].extents[lead[k]]);
      std::optional<int64_t> bound = FoldInt(ext);
      for (const RegionAccess& a : acc) {
        if (a.buffer->scope == Scope::kGlobal) continue;
        const size_t d = a.LoopDims(true)[k];
        const auto dim = FoldInt(a.buffer->shape[d]);
        const auto start = FoldInt(a.starts[d]);
        if (!dim) continue;
        const int64_t room = start ? *dim - *start : *dim;
        bound = bound ? std::min(*bound, room) : room;
      }
      if (!bound || *bound <= 0) return false;
      extents->push_back(ext);
      bounds->push_back(*bound);
    }
    return true;
  }

  // Rule 3's whole version of a copy with run-time extents: the copy with
  // each run-time extent of its loop dims replaced by its constant bound
  // (LoopBounds), and the condition (every such extent of the destination
  // at least its bound) under which it moves exactly what the clipped copy
  // moves. A masked epilogue whose row count fills the tile then stores
  // the whole tile as a constant-extent copy (on the Hopper path through
  // TMA). Nullopt: no run-time extent, or a tile side whose start is not
  // a constant.
  std::optional<std::pair<Expr, CopyStmt>> WholeVersion(const CopyStmt& c) {
    std::vector<RegionAccess> acc;
    for (const Region* r : {&c.dst, &c.src}) {
      const RegionBuffer* b = Find(*r);
      if (!b) return std::nullopt;
      acc.emplace_back(*r, b);
    }
    const std::vector<size_t> lead = acc[0].LoopDims(true);
    for (const RegionAccess& a : acc) {
      if (a.LoopDims(true).size() != lead.size()) return std::nullopt;
    }
    std::vector<Expr> extents;
    std::vector<int64_t> bounds;
    if (!LoopBounds(acc, lead, &extents, &bounds)) return std::nullopt;
    CopyStmt whole = c;
    Expr cond = Expr::Bool(true);
    for (size_t k = 0; k < lead.size(); ++k) {
      if (FoldInt(extents[k])) continue;
      cond = And(std::move(cond),
                 Expr::Binary(BinaryOp::kGe, extents[k], Expr::Int(bounds[k])));
      Region* regions[2] = {&whole.dst, &whole.src};
      for (size_t r = 0; r < 2; ++r) {
        const size_t d = acc[r].LoopDims(true)[k];
        if (acc[r].buffer->scope != Scope::kGlobal &&
            !FoldInt(acc[r].starts[d])) {
          return std::nullopt;
        }
        if (!regions[r]->has_slices || d >= regions[r]->slices.size() ||
            regions[r]->slices[d].kind != Slice::Kind::kRange) {
          return std::nullopt;
        }
        regions[r]->slices[d].extent = Expr::Int(bounds[k]);
      }
    }
    if (cond.kind == ExprKind::kBool) return std::nullopt;
    // A tile side that now covers its tile is written whole (`copy Acc ->
    // Y[...]`, as the planners expect an epilogue store).
    for (Region* r : {&whole.dst, &whole.src}) {
      const RegionBuffer* b = Find(*r);
      if (b->scope == Scope::kGlobal) continue;
      bool covers = r->slices.size() == b->shape.size();
      for (size_t d = 0; covers && d < r->slices.size(); ++d) {
        const Slice& sl = r->slices[d];
        covers = sl.kind == Slice::Kind::kFull ||
                 (sl.kind == Slice::Kind::kRange && FoldInt(sl.start) == 0 &&
                  FoldInt(sl.extent).has_value() &&
                  FoldInt(sl.extent) == FoldInt(b->shape[d]));
      }
      if (covers) {
        r->slices.clear();
        r->has_slices = false;
      }
    }
    return std::make_pair(std::move(cond), std::move(whole));
  }

  // Rule 3 and 4 for a tile op over `regions` (the first is the one whose
  // free dims the loop runs over). `make_body` gives the element
  // statement from the loop variables; null for an op that has no element
  // form (then an unproven tile-side index is an error). Returns the
  // parallel loop that replaces the op, or nullopt to keep it.
  std::optional<ParallelStmt> Clip(
      std::vector<const Region*> regions, Loc loc,
      const std::function<Stmt(const std::vector<RegionAccess>&,
                               const std::vector<Expr>&)>& make_body) {
    std::vector<RegionAccess> acc;
    for (const Region* r : regions) {
      const RegionBuffer* b = Find(*r);
      if (!b) return std::nullopt;  // the verifier reported it
      acc.emplace_back(*r, b);
    }
    const std::vector<size_t> lead = acc[0].LoopDims(true);
    for (const RegionAccess& a : acc) {
      if (a.LoopDims(true).size() != lead.size()) return std::nullopt;
    }
    std::vector<Expr> extents, ivs;
    std::vector<std::string> vars;
    std::vector<int64_t> bounds;
    if (!LoopBounds(acc, lead, &extents, &bounds)) return std::nullopt;
    bool runtime_extent = false;
    for (size_t k = 0; k < lead.size(); ++k) {
      runtime_extent |= !FoldInt(extents[k]).has_value();
      vars.push_back(fresh_.Fresh(StrCat("kiln_r", k)));
      ivs.push_back(Expr::Var(vars.back()));
    }
    if (lead.empty()) {  // one element: a loop of one
      bounds.push_back(1);
      vars.push_back(fresh_.Fresh("kiln_r0"));
    }
    prover_->Push();
    for (size_t k = 0; k < vars.size(); ++k) {
      names_.insert(vars[k]);
      prover_->AddRange(vars[k], Expr::Int(0), Expr::Int(bounds[k]));
    }
    Expr cond = Expr::Bool(true);
    for (size_t k = 0; k < lead.size(); ++k) {
      if (FoldInt(extents[k])) continue;
      cond =
          And(std::move(cond), Expr::Binary(BinaryOp::kLt, ivs[k], extents[k]));
    }
    const Region* unproven = nullptr;
    for (size_t r = 0; r < acc.size(); ++r) {
      const RegionAccess& a = acc[r];
      if (a.buffer->scope == Scope::kGlobal) continue;
      Expr in = InRange(a.buffer->shape, a.Indices(ivs, true), &a.full);
      if (in.kind != ExprKind::kBool && !unproven) unproven = regions[r];
      cond = And(std::move(cond), std::move(in));
    }
    prover_->Pop();
    if (!make_body) {
      if (unproven && status_.ok()) {
        status_ = LocatedError(
            unproven->loc,
            StrCat("this region of tile '", unproven->name,
                   "' is not shown to lie inside it; a gemm, reduce or "
                   "cumsum region must be, from constants, tunables, symbols "
                   "and their 'assume's, block indices, loop variables, "
                   "enclosing 'if's and lets of those (a copy, fill or "
                   "atomic_add is clipped to its tile instead)"));
      }
      return std::nullopt;
    }
    if (!runtime_extent && !unproven) return std::nullopt;
    ParallelStmt par;
    par.vars = vars;
    for (int64_t b : bounds) par.extents.push_back(Expr::Int(b));
    Stmt body = make_body(acc, ivs);
    if (cond.kind == ExprKind::kBool) {
      par.body.push_back(std::move(body));
    } else {
      IfStmt guard;
      guard.cond = std::move(cond);
      guard.then_body.push_back(std::move(body));
      par.body.push_back(MakeStmt(std::move(guard), loc));
    }
    return par;
  }

  // The findings on tile op `s`'s regions, before any is clipped.
  void NoteRegions(const Stmt& s) {
    if (!report_) return;
    if (auto* c = std::get_if<CopyStmt>(&s.node)) {
      NoteRegion(s.loc, "copy", c->src);
      NoteRegion(s.loc, "copy", c->dst);
    } else if (auto* f = std::get_if<FillStmt>(&s.node)) {
      NoteRegion(s.loc, "fill", f->dst);
    } else if (auto* at = std::get_if<AtomicAddStmt>(&s.node)) {
      NoteRegion(s.loc, "atomic_add", at->src);
      NoteRegion(s.loc, "atomic_add", at->dst);
    } else if (auto* g = std::get_if<GemmStmt>(&s.node)) {
      for (const Region* r : {&g->a, &g->b, &g->c})
        NoteRegion(s.loc, "gemm", *r);
    } else if (auto* rd = std::get_if<ReduceStmt>(&s.node)) {
      NoteRegion(s.loc, "reduce", rd->src);
      NoteRegion(s.loc, "reduce", rd->dst);
    } else if (auto* cs = std::get_if<CumsumStmt>(&s.node)) {
      NoteRegion(s.loc, "cumsum", cs->src);
      NoteRegion(s.loc, "cumsum", cs->dst);
    }
  }

  // Rules 3 and 4 for statement `s`: true when it became a parallel loop.
  bool ClipRegions(Stmt& s) {
    const Loc loc = s.loc;
    NoteRegions(s);
    auto store = [loc](const RegionAccess& dst, const std::vector<Expr>& ivs,
                       Expr value, AssignOp op) {
      StoreStmt st;
      st.name = dst.name;
      st.indices = dst.Indices(ivs, true);
      st.value = std::move(value);
      st.op = op;
      return MakeStmt(std::move(st), loc);
    };
    std::optional<ParallelStmt> par;
    if (auto* c = std::get_if<CopyStmt>(&s.node)) {
      auto whole = WholeVersion(*c);
      par = Clip({&c->dst, &c->src}, loc, [&](const auto& a, const auto& ivs) {
        return store(a[0], ivs, a[1].Load(ivs, true), AssignOp::kSet);
      });
      if (par && whole) {
        IfStmt split;
        split.cond = std::move(whole->first);
        split.then_body.push_back(MakeStmt(std::move(whole->second), loc));
        split.else_body.push_back(MakeStmt(std::move(*par), loc));
        split.has_else = true;
        s.node = std::move(split);
        return true;
      }
    } else if (auto* f = std::get_if<FillStmt>(&s.node)) {
      const Expr value = f->is_clear ? Expr::Int(0) : f->value;
      par = Clip({&f->dst}, loc, [&](const auto& a, const auto& ivs) {
        return store(a[0], ivs, value, AssignOp::kSet);
      });
    } else if (auto* at = std::get_if<AtomicAddStmt>(&s.node)) {
      par =
          Clip({&at->dst, &at->src}, loc, [&](const auto& a, const auto& ivs) {
            return store(a[0], ivs, a[1].Load(ivs, true), AssignOp::kAdd);
          });
    } else if (auto* g = std::get_if<GemmStmt>(&s.node)) {
      for (const Region* r : {&g->a, &g->b, &g->c}) Clip({r}, loc, nullptr);
    } else if (auto* rd = std::get_if<ReduceStmt>(&s.node)) {
      for (const Region* r : {&rd->src, &rd->dst}) Clip({r}, loc, nullptr);
    } else if (auto* cs = std::get_if<CumsumStmt>(&s.node)) {
      for (const Region* r : {&cs->src, &cs->dst}) Clip({r}, loc, nullptr);
    }
    if (!par) return false;
    s.node = std::move(*par);
    return true;
  }

  void Rewrite(Block& b) {
    prover_->Push();  // lets are visible to the end of their block
    for (Stmt& s : b) {
      if (auto* a = std::get_if<AllocStmt>(&s.node)) {
        buffers_[a->name] = {a->scope, a->dtype, a->shape};
      }
      // (What a clipped op became is the pass's own code: no findings.)
      const bool quiet = quiet_;
      quiet_ |= ClipRegions(s);
      std::visit(
          [&](auto& n) {
            using T = std::decay_t<decltype(n)>;
            if constexpr (std::is_same_v<T, LetStmt>) {
              Rewrite(n.value);
              AddLetFact(n.name, n.value, prover_, &names_);
            } else if constexpr (std::is_same_v<T, StoreStmt>) {
              for (Expr& i : n.indices) Rewrite(i);
              Rewrite(n.value);
            } else if constexpr (std::is_same_v<T, IfStmt>) {
              Rewrite(n.cond);
              const bool fact = IsIndexExpr(n.cond, names_);
              prover_->Push();
              AddConjuncts(n.cond);
              Rewrite(n.then_body);
              prover_->Pop();
              prover_->Push();
              if (fact) {
                prover_->AddFact(Expr::Unary(UnaryOp::kNot, n.cond));
              }
              Rewrite(n.else_body);
              prover_->Pop();
            } else if constexpr (std::is_same_v<T, ForStmt>) {
              if (n.start) Rewrite(*n.start);
              Rewrite(n.stop);
              prover_->Push();
              names_.insert(n.var);
              prover_->AddRange(n.var, n.start ? *n.start : Expr::Int(0),
                                n.stop);
              Rewrite(n.body);
              prover_->Pop();
            } else if constexpr (std::is_same_v<T, ParallelStmt>) {
              prover_->Push();
              AddParallelRanges(n, prover_, &names_);
              CheckRaces(n);
              Rewrite(n.body);
              prover_->Pop();
            } else if constexpr (std::is_same_v<T, CopyStmt>) {
              Rewrite(n.src);
              Rewrite(n.dst);
            } else if constexpr (std::is_same_v<T, FillStmt>) {
              Rewrite(n.dst);
              Rewrite(n.value);
            } else if constexpr (std::is_same_v<T, GemmStmt>) {
              Rewrite(n.a);
              Rewrite(n.b);
              Rewrite(n.c);
            } else if constexpr (std::is_same_v<T, ReduceStmt> ||
                                 std::is_same_v<T, CumsumStmt> ||
                                 std::is_same_v<T, AtomicAddStmt>) {
              Rewrite(n.src);
              Rewrite(n.dst);
            } else if constexpr (std::is_same_v<T, RasterizeStmt>) {
              Rewrite(n.panel);
            }
          },
          s.node);
      quiet_ = quiet;
      // An element store: skipped out of range.
      if (auto* st = std::get_if<StoreStmt>(&s.node)) {
        auto it = buffers_.find(st->name);
        if (it == buffers_.end()) continue;
        Expr guard = InRange(it->second.shape, st->indices);
        Note(s.loc, StrCat("store ", Print(Expr::Load(st->name, st->indices))),
             guard, "skipped past it");
        if (guard.kind == ExprKind::kBool) continue;
        IfStmt wrap;
        wrap.cond = std::move(guard);
        Stmt inner;
        inner.loc = s.loc;
        inner.node = std::move(*st);
        wrap.then_body.push_back(std::move(inner));
        s.node = std::move(wrap);
      }
    }
    prover_->Pop();
  }

  std::map<std::string, RegionBuffer> buffers_;
  Prover* prover_;
  AccessReport* report_;
  bool quiet_ = false;  // inside a clipped op's loop
  NameGenerator fresh_;
  IndexNames names_;
  absl::Status status_;
};

class GuardAccessesPass : public Pass {
 public:
  std::string_view name() const override { return "guard-accesses"; }
  absl::Status Run(Kernel& k, PassContext& ctx) override {
    return Guarder(k, ctx.prover).Run(k);
  }
};

}  // namespace

std::unique_ptr<Pass> CreateGuardAccessesPass() {
  return std::make_unique<GuardAccessesPass>();
}

absl::StatusOr<AccessReport> ProveAccesses(
    const Kernel& kernel, const std::map<std::string, int64_t>& bindings) {
  Kernel k = kernel;
  Prover prover;
  PassContext ctx;
  ctx.target = "cpu";
  ctx.bindings = bindings;
  ctx.prover = &prover;
  absl::Status st = CreateSpecializePass()->Run(k, ctx);
  if (!st.ok()) return st;
  AccessReport report;
  report.kernel = kernel.name;
  report.bindings = bindings;
  st = Guarder(k, &prover, &report).Run(k);
  if (!st.ok()) return st;
  return report;
}

std::string FormatAccessReport(const AccessReport& r, std::string_view file) {
  std::vector<std::string> b;
  for (const auto& [name, v] : r.bindings) b.push_back(StrCat(name, "=", v));
  std::string out =
      StrCat("kernel ", r.kernel,
             b.empty() ? "" : StrCat(" (", StrJoin(b, ", "), ")"), "\n");
  int counts[5] = {0, 0, 0, 0, 0};
  for (const AccessFinding& f : r.findings) {
    static constexpr const char* kNames[] = {"proven", "checked at run time",
                                             "out of range", "race", "atomic"};
    const int v = static_cast<int>(f.verdict);
    ++counts[v];
    StrAppend(&out, "  ", file, ":", f.loc.line, ":", f.loc.col, ": ",
              kNames[v], ": ", f.access,
              f.detail.empty() ? "" : StrCat(": ", f.detail), "\n");
  }
  StrAppend(&out, "  ", counts[0], " proven, ", counts[1],
            " checked at run time, ", counts[2], " out of range, ", counts[3],
            " races", counts[4] ? StrCat(", ", counts[4], " atomic") : "",
            "\n");
  return out;
}

}  // namespace kiln::compiler
