// How a compound store `X[...] op= value` combines the element's current
// value with `value` (tile-ir.md §2): `+= -= *= /=` through their binary
// operator, `max=` / `min=` through the `max` / `min` builtins; which of
// them have an atomic form. One mapping for the verifier, guard-accesses,
// CompoundValue (ir.h) and the back ends.
#ifndef KILN_COMPILER_IR_ASSIGN_OP_H_
#define KILN_COMPILER_IR_ASSIGN_OP_H_

#include <optional>
#include <string_view>

#include "compiler/ir/ir.h"

namespace kiln::compiler {

// The binary operator of `+= -= *= /=`; nullopt for `=`, `max=`, `min=`.
std::optional<BinaryOp> CompoundBinaryOp(AssignOp op);
// The builtin of `max=` / `min=` ("max", "min"); empty for the others.
std::string_view CompoundBuiltin(AssignOp op);
// Whether the store has an atomic form (`+=`, `max=`, `min=`): the stores
// into a tensor element, and the updates of a shared tile or fragment
// element iterations of a `parallel` may share (tile-ir.md §8).
bool HasAtomicForm(AssignOp op);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_ASSIGN_OP_H_
