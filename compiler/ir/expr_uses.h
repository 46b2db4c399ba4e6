// Whether an expression names any of a set of names, as a variable or as a
// loaded buffer: the dependence test the passes and planners share.
#ifndef KILN_COMPILER_IR_EXPR_USES_H_
#define KILN_COMPILER_IR_EXPR_USES_H_

#include <set>
#include <string>

#include "compiler/ir/ir.h"

namespace kiln::compiler {

inline bool UsesAnyOf(const Expr& e, const std::set<std::string>& names) {
  if ((e.kind == ExprKind::kVar || e.kind == ExprKind::kLoad) &&
      names.count(e.name)) {
    return true;
  }
  for (const Expr& a : e.args) {
    if (UsesAnyOf(a, names)) return true;
  }
  return false;
}

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_EXPR_USES_H_
