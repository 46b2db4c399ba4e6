// Printer: the canonical textual form of the IR (compiler/docs/tile-ir.md §7).
// For every program p: Parse(Print(p)).program == p.
#ifndef KILN_COMPILER_IR_PRINTER_H_
#define KILN_COMPILER_IR_PRINTER_H_

#include <string>

#include "compiler/ir/ir.h"

namespace kiln::compiler {

std::string Print(const Program& program);
std::string Print(const Kernel& kernel);
std::string Print(const Expr& expr);
// A region operand as tile ops print it: `X[i, s:+n, :]`, or `X` whole.
std::string Print(const Region& region);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_PRINTER_H_
