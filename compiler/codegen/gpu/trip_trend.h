// Facts about a kernel's loop bounds that the GPU planners decide from,
// proven rather than read off the spelling: a bound's top-level `let`s are
// resolved to their values, and how the bound moves as a block index grows
// is proven, by monotone composition where that decides it and otherwise by
// the arithmetic prover (Z3 behind its interval rules). So
// `let n = min(ceildiv(S, 64), ceildiv((bx + 1) * 128, 64))` then
// `pipelined(n)`, the same bound written inline as
// `ceildiv(min(S, (bx + 1) * 128), 64)`, and either with S a constant
// all give the same facts.
#ifndef KILN_COMPILER_CODEGEN_GPU_TRIP_TREND_H_
#define KILN_COMPILER_CODEGEN_GPU_TRIP_TREND_H_

#include <map>
#include <set>
#include <string>

#include "compiler/ir/ir.h"

namespace kiln::compiler::gpu {

// How an integer expression moves as one block index grows by one, every
// other name fixed.
enum class Trend { kConstant, kRising, kFalling, kUnknown };
std::string_view TrendName(Trend t);

// The values of the integer lets of the kernel body's top level that come
// before statement `before` (the whole body when null), each with the
// earlier lets substituted, so that a resolved expression names only
// parameters, symbols, block indices and what the let values load.
std::map<std::string, Expr> TopLevelLets(const Kernel& k,
                                         const Stmt* before = nullptr);

// `e` with those lets replaced by their values.
Expr ResolveLets(const Expr& e, const std::map<std::string, Expr>& lets);

// How resolved expression `e` moves as block index `block_var` grows (over
// the kernel's grid, under its assumptions). A name other than parameters,
// symbols and block indices (an unresolved let, a loop variable) makes it
// kUnknown unless `e` does not involve `block_var` at all.
Trend TrendAlongBlock(const Kernel& k, const Expr& e,
                      const std::string& block_var);

}  // namespace kiln::compiler::gpu

#endif  // KILN_COMPILER_CODEGEN_GPU_TRIP_TREND_H_
