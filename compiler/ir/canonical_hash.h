// Canonical hash of a kernel: SHA-256 of its canonical text after local names
// (tiles, block indices, loop variables, lets, parallel variables) are renamed
// to positional names. Invariant under whitespace, comments and local names;
// sensitive to every semantic change (compiler/docs/tile-ir.md §7).
#ifndef KILN_COMPILER_IR_CANONICAL_HASH_H_
#define KILN_COMPILER_IR_CANONICAL_HASH_H_

#include <string>
#include <string_view>

#include "compiler/ir/ir.h"

namespace kiln::compiler {

// The kernel with its local names replaced by positional ones ($t0, $t1, ...
// for tiles; $v0, $v1, ... for every other local binder). '$' cannot start an
// identifier, so a renamed local never collides with a parameter, symbol or
// tunable name; the result is for hashing, not for re-parsing.
Kernel CanonicalizeLocalNames(const Kernel& kernel);

// Lower-case hex SHA-256 (64 characters) of the kernel's canonical form.
std::string KernelHash(const Kernel& kernel);

// Lower-case hex SHA-256 of raw bytes.
std::string Sha256Hex(std::string_view bytes);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_CANONICAL_HASH_H_
