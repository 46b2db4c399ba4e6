// The kernel-wide facts the passes that consult the prover start from.
#ifndef KILN_COMPILER_PASSES_KERNEL_FACTS_H_
#define KILN_COMPILER_PASSES_KERNEL_FACTS_H_

#include "compiler/arith/prover.h"
#include "compiler/arith/simplify_expr.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler {

// Every symbol of a tensor shape is an index name and >= 0. Every integer
// scalar parameter is an index name too (an unknown integer, uniform over
// the launch, which `assume`s may bound: they are checked at launch), and
// >= 0 when it is unsigned and narrower than 64 bits (the index arithmetic
// is 64-bit and signed).
inline void AddSymbolFacts(const Kernel& k, Prover* prover, IndexNames* names) {
  for (const Param& p : k.params) {
    if (!p.is_tensor && IsInteger(p.dtype)) {
      names->insert(p.name);
      if (!IsSigned(p.dtype) && DTypeBits(p.dtype) < 64) {
        prover->AddFact(
            Expr::Binary(BinaryOp::kGe, Expr::Var(p.name), Expr::Int(0)));
      }
    }
    for (const Expr& d : p.shape) {
      if (d.kind == ExprKind::kVar) {
        names->insert(d.name);
        prover->AddFact(Expr::Binary(BinaryOp::kGe, d, Expr::Int(0)));
      }
    }
  }
}

// Every block index lies in [0, its grid extent).
inline void AddBlockRanges(const Kernel& k, Prover* prover, IndexNames* names) {
  for (size_t d = 0; d < k.block_vars.size() && d < k.grid.size(); ++d) {
    names->insert(k.block_vars[d]);
    prover->AddRange(k.block_vars[d], Expr::Int(0), k.grid[d]);
  }
}

// Inside a `parallel`: each variable lies in [0, its extent).
inline void AddParallelRanges(const ParallelStmt& p, Prover* prover,
                              IndexNames* names) {
  for (size_t v = 0; v < p.vars.size() && v < p.extents.size(); ++v) {
    names->insert(p.vars[v]);
    prover->AddRange(p.vars[v], Expr::Int(0), p.extents[v]);
  }
}

// After `let name = value` of an index expression: name == value (and name
// is an index name).
inline void AddLetFact(const std::string& name, const Expr& value,
                       Prover* prover, IndexNames* names) {
  if (!IsIndexExpr(value, *names)) return;
  names->insert(name);
  prover->AddFact(Expr::Binary(BinaryOp::kEq, Expr::Var(name), value));
}

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_KERNEL_FACTS_H_
