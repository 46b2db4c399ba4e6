// Verifier: the semantic rules of compiler/docs/tile-ir.md §6.
#ifndef KILN_COMPILER_IR_VERIFIER_H_
#define KILN_COMPILER_IR_VERIFIER_H_

#include "compiler/ir/diagnostic.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler {

// Checks every rule and returns every violation, in source order (empty when
// the program is valid). Never crashes on any parsed program.
Diagnostics Verify(const Program& program);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_VERIFIER_H_
