// A tile-op operand region as element accesses: per buffer dim either a
// fixed index or `start + iv` over a loop variable. Shared by the code that
// turns tile ops into element loops (the CPU lowering, the guard-accesses
// pass and the GPU emitter).
#ifndef KILN_COMPILER_IR_REGION_SLICES_H_
#define KILN_COMPILER_IR_REGION_SLICES_H_

#include <vector>

#include "compiler/ir/const_fold.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler {

struct RegionSlices {
  // Per buffer dim: the start, and whether it is free (ranged) and not unit.
  std::vector<Expr> starts;
  std::vector<Expr> extents;  // free dims only: the extent (else unused)
  std::vector<bool> free;     // a ranged (or full) dim
  std::vector<bool> unit;     // a free dim whose extent folds to 1
  std::vector<bool> full;     // a `:` slice (always in range)

  RegionSlices() = default;
  // `r` over a buffer of `shape` (every dim full when `r` has no slices);
  // `fold`: starts and extents constant-folded.
  RegionSlices(const Region& r, const std::vector<Expr>& shape, bool fold) {
    for (size_t d = 0; d < shape.size(); ++d) {
      Slice s;  // whole-buffer operand: every dim full
      if (r.has_slices && d < r.slices.size()) s = r.slices[d];
      const bool is_full = s.kind == Slice::Kind::kFull;
      full.push_back(is_full);
      free.push_back(s.kind != Slice::Kind::kIndex);
      starts.push_back(is_full ? Expr::Int(0)
                       : fold  ? FoldConstants(s.start)
                               : s.start);
      Expr ext = s.kind == Slice::Kind::kRange
                     ? (fold ? FoldConstants(s.extent) : s.extent)
                 : is_full ? shape[d]
                           : Expr::Int(1);
      const auto c = FoldInt(ext);
      unit.push_back(free.back() && c && *c == 1);
      extents.push_back(std::move(ext));
    }
  }

  // The buffer dims that take a loop variable, in order (the free dims,
  // optionally without the unit ones).
  std::vector<size_t> LoopDims(bool drop_unit) const {
    std::vector<size_t> out;
    for (size_t d = 0; d < free.size(); ++d) {
      if (free[d] && !(drop_unit && unit[d])) out.push_back(d);
    }
    return out;
  }

  // Extents of the free dims (optionally without the unit ones).
  std::vector<Expr> FreeExtents(bool drop_unit) const {
    std::vector<Expr> out;
    for (size_t d : LoopDims(drop_unit)) out.push_back(extents[d]);
    return out;
  }

  // Element indices: the loop variables `ivs` fill the free dims in order
  // (skipping unit dims when `drop_unit`); `fold_sums`: each `start + iv`
  // constant-folded.
  std::vector<Expr> Indices(const std::vector<Expr>& ivs, bool drop_unit,
                            bool fold_sums) const {
    std::vector<Expr> idx;
    size_t k = 0;
    for (size_t d = 0; d < starts.size(); ++d) {
      if (!free[d] || (drop_unit && unit[d]) || k >= ivs.size()) {
        idx.push_back(starts[d]);
        continue;
      }
      const auto s0 = FoldInt(starts[d]);
      if (s0 && *s0 == 0) {
        idx.push_back(ivs[k++]);
        continue;
      }
      Expr sum = Expr::Binary(BinaryOp::kAdd, starts[d], ivs[k++]);
      idx.push_back(fold_sums ? FoldConstants(sum) : std::move(sum));
    }
    return idx;
  }

  // `a && b`, `a` dropping out while it is the starting `true`.
  static Expr AndTrue(Expr a, Expr b) {
    return a.kind == ExprKind::kBool
               ? std::move(b)
               : Expr::Binary(BinaryOp::kAnd, std::move(a), std::move(b));
  }

  // `0 <= idx < shape[d]` for every non-full dim (true when there is none).
  Expr InBounds(const std::vector<Expr>& idx,
                const std::vector<Expr>& shape) const {
    Expr g = Expr::Bool(true);
    auto conj = [&](Expr c) { g = AndTrue(std::move(g), std::move(c)); };
    for (size_t d = 0; d < idx.size() && d < shape.size(); ++d) {
      if (full[d]) continue;
      conj(Expr::Binary(BinaryOp::kLe, Expr::Int(0), idx[d]));
      conj(Expr::Binary(BinaryOp::kLt, idx[d], shape[d]));
    }
    return g;
  }

  // `0 <= start` and `start + spans[d] <= shape[d]` for every dim, where
  // `spans[d]` elements are touched from the dim's start (true when
  // nothing is left); a full dim touched whole is left out.
  Expr SpanInBounds(const std::vector<Expr>& spans,
                    const std::vector<Expr>& shape) const {
    Expr g = Expr::Bool(true);
    auto conj = [&](Expr c) { g = AndTrue(std::move(g), std::move(c)); };
    for (size_t d = 0;
         d < starts.size() && d < spans.size() && d < shape.size(); ++d) {
      const auto n = FoldInt(spans[d]);
      if (full[d] && (spans[d] == shape[d] || (n && FoldInt(shape[d]) == n))) {
        continue;
      }
      const Expr end = FoldInt(starts[d]) == 0
                           ? spans[d]
                           : Expr::Binary(BinaryOp::kAdd, starts[d], spans[d]);
      conj(Expr::Binary(BinaryOp::kLe, Expr::Int(0), starts[d]));
      conj(Expr::Binary(BinaryOp::kLe, end, shape[d]));
    }
    return g;
  }
};

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_REGION_SLICES_H_
