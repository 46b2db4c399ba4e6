// Constant folding of integer expressions and static comparison of shapes.
//
// Shapes in the tile IR are expressions (`BM`, `2 * BK`, `64`). The verifier
// and later passes compare them statically: fold the constant integer
// arithmetic, then compare structurally (Expr::operator==, which ignores
// locations). Nothing here is symbolic algebra: `2 * BM` and `BM * 2` are
// "cannot prove equal".
//
// Every function is total: overflow, division by zero and out-of-range shifts
// make a subtree non-constant instead of invoking undefined behaviour, and
// recursion stops at kMaxFoldDepth (deeper subtrees are left as they are).
#ifndef KILN_COMPILER_IR_CONST_FOLD_H_
#define KILN_COMPILER_IR_CONST_FOLD_H_

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace kiln::compiler {

// Deepest expression the folder descends into. Above the parser's nesting
// limit so that every parsed program folds completely.
inline constexpr int kMaxFoldDepth = 256;

// Integer semantics of the IR (64-bit signed, §3), nullopt when the result is
// not representable or undefined (overflow, division by zero, shift count
// outside 0..63). `/` and `%` are floor division and floor modulo.
std::optional<int64_t> FoldIntBinary(BinaryOp op, int64_t a, int64_t b);
std::optional<int64_t> FoldIntUnary(UnaryOp op, int64_t a);
std::optional<int64_t> FloorDiv(int64_t a, int64_t b);
std::optional<int64_t> FloorMod(int64_t a, int64_t b);
std::optional<int64_t> CeilDiv(int64_t a, int64_t b);

// The value of `e` when it is a constant integer expression: integer literals
// combined by integer operators (+ - * / % << >> & | ^, unary - ~) and the
// builtins ceildiv/min/max/abs. nullopt for anything else (names, floats,
// comparisons) and when a step is undefined (see above).
std::optional<int64_t> FoldInt(const Expr& e);

// The value of a condition over constants: comparisons of constant integer
// expressions combined by && || ! (and bool literals). nullopt otherwise.
std::optional<bool> FoldBool(const Expr& e);

// `e` with every constant integer subtree replaced by its value (an Int at
// the subtree's location). Non-constant parts are kept as they are.
Expr FoldConstants(const Expr& e);

// Outcome of comparing two dims statically.
enum class DimCompare {
  kEqual,     // same constant, or structurally equal after folding
  kDiffer,    // two different constants
  kUnproven,  // not both constant and not structurally equal
};
DimCompare CompareDims(const Expr& a, const Expr& b);

// Comparing two shapes (already folded or not): kEqual when the ranks match
// and every dim is kEqual; kDiffer when the ranks differ or some dim differs;
// otherwise kUnproven.
DimCompare CompareShapes(std::span<const Expr> a, std::span<const Expr> b);

// `shape` without the dims that fold to the constant 1.
std::vector<Expr> DropUnitDims(std::span<const Expr> shape);

// "[64, BK * 2]": each dim folded and printed canonically.
std::string ShapeToString(std::span<const Expr> shape);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_CONST_FOLD_H_
