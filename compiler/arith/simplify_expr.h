// Algebraic simplification of expressions: constant folding plus the
// identities that index arithmetic produces after lowering
// (x + 0, x * 1, x * 0, (x + c1) + c2, x / 1, x % 1, select on a constant).
#ifndef KILN_COMPILER_ARITH_SIMPLIFY_EXPR_H_
#define KILN_COMPILER_ARITH_SIMPLIFY_EXPR_H_

#include <set>
#include <string>

#include "compiler/ir/ir.h"

namespace kiln::compiler {

class Prover;

// The names known to hold 64-bit integers (symbols, block and loop indices,
// lets of index expressions).
using IndexNames = std::set<std::string, std::less<>>;

// The simplified expression. Integer identities and proofs apply only to
// index subtrees: integer literals and names in `index_names` combined by
// integer operators; anything touching a float, a load or another name is
// left alone so results stay bit-identical. With a prover, comparisons it
// proves true or false are replaced by their value.
Expr SimplifyExpr(const Expr& e, const IndexNames& index_names,
                  Prover* prover = nullptr);

// True when `e` is an index expression over `index_names` (see above).
bool IsIndexExpr(const Expr& e, const IndexNames& index_names);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_ARITH_SIMPLIFY_EXPR_H_
