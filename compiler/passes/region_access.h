// A region operand of the passes that turn tile ops into element loops
// (lower-tile-ops on the CPU, guard-accesses on every target): its slices
// over a named buffer.
#ifndef KILN_COMPILER_PASSES_REGION_ACCESS_H_
#define KILN_COMPILER_PASSES_REGION_ACCESS_H_

#include <string>
#include <vector>

#include "compiler/ir/ir.h"
#include "compiler/ir/region_slices.h"

namespace kiln::compiler {

// A buffer a region names: a tensor parameter or a tile.
struct RegionBuffer {
  Scope scope = Scope::kGlobal;
  DType dtype = DType::kF32;
  std::vector<Expr> shape;
};

struct RegionAccess : RegionSlices {
  std::string name;
  const RegionBuffer* buffer = nullptr;

  RegionAccess(const Region& r, const RegionBuffer* buf)
      : RegionSlices(r, buf->shape, /*fold=*/false),
        name(r.name),
        buffer(buf) {}

  // Element indices, each `start + iv` constant-folded.
  std::vector<Expr> Indices(const std::vector<Expr>& ivs,
                            bool drop_unit) const {
    return RegionSlices::Indices(ivs, drop_unit, /*fold_sums=*/true);
  }
  Expr Load(const std::vector<Expr>& ivs, bool drop_unit) const {
    return Expr::Load(name, Indices(ivs, drop_unit));
  }
  // The edge predicate of a global operand; true for tiles.
  Expr Guard(const std::vector<Expr>& indices) const {
    if (buffer->scope != Scope::kGlobal) return Expr::Bool(true);
    return InBounds(indices, buffer->shape);
  }
};

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_REGION_ACCESS_H_
