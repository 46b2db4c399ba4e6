// stores-to-copies: a `parallel` that only stores a tile's elements into a
// tensor, one tile element per iteration and in the tile's own index order,
// is a copy, and becomes one, so that the copy's planning (vector and TMA
// stores, the whole-tile version of a masked store: guard-accesses) serves
// it. TileLang's epilogues are written this way:
//
//   parallel (i, j) in (BM, BN) {          copy C[0:+rows, :] ->
//     if i < rows {                  =>      Y[row0:+rows, bx * BN:+BN]
//       Y[row0 + i, bx * BN + j] = C[i, j]
//     }
//   }
//
// 1. The parallel's body is one element store (`=`) into a tensor, or one
//    `if` without `else` holding only that store, whose condition is a
//    conjunction of `v < x` (v a parallel variable, x free of them).
// 2. The stored value is the tile element at exactly the parallel's
//    variables, in order, and the tile's dims are the parallel's extents.
// 3. Each tensor index is `b + v`, `v + b` or `v` for one parallel variable
//    (each used once, in increasing order of dims), or an expression free
//    of them (an index dim). Neither the bases nor the bounds read the
//    tensor stored into.
// Then each variable's dim becomes a range `b:+x` (`x` its bound, else its
// extent) on the tensor side and `0:+x` (or the whole dim) on the tile
// side. The meaning is the same on every target: iterations past the
// bound store nothing either way, and the tensor side keeps its rules
// (writes past its end are skipped). A loop the rule does not match stays
// as written.
#include <map>
#include <optional>
#include <set>

#include "compiler/ir/const_fold.h"
#include "compiler/ir/expr_uses.h"
#include "compiler/passes/passes.h"

namespace kiln::compiler {
namespace {

class StoresToCopies {
 public:
  explicit StoresToCopies(const Kernel& k) {
    for (const Param& p : k.params) {
      if (p.is_tensor) tensors_.insert(p.name);
    }
  }

  void Run(Block& b) {
    for (Stmt& s : b) {
      if (auto* a = std::get_if<AllocStmt>(&s.node)) {
        if (a->scope != Scope::kGlobal) tiles_[a->name] = a->shape;
      } else if (auto* p = std::get_if<ParallelStmt>(&s.node)) {
        if (auto c = AsCopy(*p)) s.node = std::move(*c);
      } else if (auto* f = std::get_if<ForStmt>(&s.node)) {
        Run(f->body);
      } else if (auto* i = std::get_if<IfStmt>(&s.node)) {
        Run(i->then_body);
        Run(i->else_body);
      }
    }
  }

 private:
  // Rule 1's bounds: `v < x` conjuncts into `bounds` (false: another form).
  bool Bounds(const Expr& c, const std::set<std::string>& vars,
              std::map<std::string, Expr>* bounds) const {
    if (c.kind == ExprKind::kBinary && c.binary_op == BinaryOp::kAnd) {
      return Bounds(c.args[0], vars, bounds) && Bounds(c.args[1], vars, bounds);
    }
    if (c.kind != ExprKind::kBinary || c.binary_op != BinaryOp::kLt ||
        c.args[0].kind != ExprKind::kVar || !vars.count(c.args[0].name) ||
        UsesAnyOf(c.args[1], vars) || bounds->count(c.args[0].name)) {
      return false;
    }
    (*bounds)[c.args[0].name] = c.args[1];
    return true;
  }

  std::optional<CopyStmt> AsCopy(const ParallelStmt& p) const {
    if (p.body.size() != 1) return std::nullopt;
    const std::set<std::string> vars(p.vars.begin(), p.vars.end());
    std::map<std::string, Expr> bounds;
    const Stmt* inner = &p.body[0];
    if (auto* i = std::get_if<IfStmt>(&inner->node)) {
      if (i->has_else || i->then_body.size() != 1 ||
          !Bounds(i->cond, vars, &bounds)) {
        return std::nullopt;
      }
      inner = &i->then_body[0];
    }
    auto* st = std::get_if<StoreStmt>(&inner->node);
    if (!st || st->op != AssignOp::kSet || !tensors_.count(st->name)) {
      return std::nullopt;
    }
    // Rule 2.
    const Expr& v = st->value;
    auto tile = tiles_.find(v.name);
    if (v.kind != ExprKind::kLoad || tile == tiles_.end() ||
        v.args.size() != p.vars.size() ||
        tile->second.size() != p.vars.size()) {
      return std::nullopt;
    }
    for (size_t k = 0; k < p.vars.size(); ++k) {
      if (v.args[k].kind != ExprKind::kVar || v.args[k].name != p.vars[k] ||
          FoldInt(tile->second[k]) != FoldInt(p.extents[k]) ||
          !FoldInt(p.extents[k])) {
        return std::nullopt;
      }
    }
    // Rule 3.
    const std::set<std::string> dst{st->name};
    CopyStmt c;
    c.dst.name = st->name;
    c.dst.has_slices = true;
    c.dst.loc = v.loc;
    c.src.name = v.name;
    c.src.loc = v.loc;
    size_t next = 0;  // the next parallel variable expected
    bool whole_tile = true;
    for (const Expr& idx : st->indices) {
      Slice sl;
      std::optional<Expr> base;
      if (next < p.vars.size()) {
        const std::string& var = p.vars[next];
        if (idx.kind == ExprKind::kVar && idx.name == var) {
          base = Expr::Int(0);
        } else if (idx.kind == ExprKind::kBinary &&
                   idx.binary_op == BinaryOp::kAdd) {
          for (int side = 0; side < 2 && !base; ++side) {
            const Expr& a = idx.args[side];
            if (a.kind == ExprKind::kVar && a.name == var) {
              base = idx.args[1 - side];
            }
          }
        }
      }
      if (base) {
        if (UsesAnyOf(*base, vars) || UsesAnyOf(*base, dst))
          return std::nullopt;
        const std::string& var = p.vars[next];
        auto bound = bounds.find(var);
        if (bound != bounds.end() && UsesAnyOf(bound->second, dst)) {
          return std::nullopt;
        }
        sl.kind = Slice::Kind::kRange;
        sl.start = *base;
        sl.extent = bound != bounds.end() ? bound->second : p.extents[next];
        Slice tile_side;
        if (bound != bounds.end()) {
          tile_side.kind = Slice::Kind::kRange;
          tile_side.start = Expr::Int(0);
          tile_side.extent = bound->second;
          whole_tile = false;
        }
        c.src.slices.push_back(std::move(tile_side));
        ++next;
      } else {
        if (UsesAnyOf(idx, vars) || UsesAnyOf(idx, dst)) return std::nullopt;
        sl.kind = Slice::Kind::kIndex;
        sl.start = idx;
      }
      c.dst.slices.push_back(std::move(sl));
    }
    if (next != p.vars.size()) return std::nullopt;
    c.src.has_slices = !whole_tile;
    if (whole_tile) c.src.slices.clear();
    return c;
  }

  std::set<std::string> tensors_;
  std::map<std::string, std::vector<Expr>> tiles_;
};

class StoresToCopiesPass : public Pass {
 public:
  std::string_view name() const override { return "stores-to-copies"; }
  absl::Status Run(Kernel& k, PassContext&) override {
    StoresToCopies(k).Run(k.body);
    return absl::OkStatus();
  }
};

}  // namespace

std::unique_ptr<Pass> CreateStoresToCopiesPass() {
  return std::make_unique<StoresToCopiesPass>();
}

}  // namespace kiln::compiler
