// Generic rewriting of IR trees: visit every expression in a kernel, and
// substitute names by expressions. Used by the passes.
#ifndef KILN_COMPILER_IR_REWRITE_H_
#define KILN_COMPILER_IR_REWRITE_H_

#include <functional>
#include <map>
#include <set>
#include <string>

#include "compiler/ir/ir.h"

namespace kiln::compiler {

// Calls `fn` on every top-level expression of the statements in `block`
// (recursively through nested blocks), including region slices, shapes,
// loop bounds and store indices. `fn` may rewrite the expression in place.
void ForEachExpr(Block& block, const std::function<void(Expr&)>& fn);

// Same over a whole kernel: params (shapes, strides), constraints,
// assumptions, grid, threads, cluster and the body.
void ForEachExpr(Kernel& kernel, const std::function<void(Expr&)>& fn);

// `e` with every Var whose name is in `values` replaced by its value.
Expr Substitute(const Expr& e, const std::map<std::string, Expr>& values);

// Every name declared or used anywhere in the kernel (to make fresh names).
std::set<std::string> CollectNames(const Kernel& kernel);

// Fresh names that collide with nothing in a given set: `base`, `base_1`...
class NameGenerator {
 public:
  explicit NameGenerator(std::set<std::string> taken)
      : taken_(std::move(taken)) {}
  std::string Fresh(const std::string& base);

 private:
  std::set<std::string> taken_;
};

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_REWRITE_H_
