// Parser: tile-IR text to the in-memory IR (grammar: compiler/docs/tile-ir.md).
#ifndef KILN_COMPILER_IR_PARSER_H_
#define KILN_COMPILER_IR_PARSER_H_

#include <string_view>

#include "compiler/ir/diagnostic.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler {

// Largest accepted source text, in bytes.
inline constexpr size_t kMaxSourceBytes = 4 << 20;
// Deepest accepted nesting of statements, parentheses and unary operators.
inline constexpr int kMaxNestingDepth = 64;
// Tallest accepted expression tree (a chain `a + b + ...` counts one level
// per operator).
inline constexpr int kMaxExprHeight = 256;

struct ParseResult {
  Program program;     // what parsed; partial when `errors` is not empty
  Diagnostics errors;  // syntax errors (after the first error in a kernel,
                       // parsing resumes at the next `kernel`)
  bool ok() const { return errors.empty(); }
};

// Parses a whole program. Never crashes on any input: malformed text gives
// diagnostics. Syntax only: run Verify() for the semantic rules.
ParseResult Parse(std::string_view text);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_PARSER_H_
