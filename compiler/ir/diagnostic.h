// Diagnostics: errors tied to a source location, printed as
// `FILE:LINE:COL: error: MESSAGE`.
#ifndef KILN_COMPILER_IR_DIAGNOSTIC_H_
#define KILN_COMPILER_IR_DIAGNOSTIC_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler {

struct Diagnostic {
  Loc loc;
  std::string message;

  // `FILE:LINE:COL: error: MESSAGE` (or `FILE: error: MESSAGE` without a line).
  std::string ToString(std::string_view file) const;
};

using Diagnostics = std::vector<Diagnostic>;

// Formats every diagnostic, one per line, each ending in '\n'.
std::string FormatDiagnostics(const Diagnostics& diags, std::string_view file);

// InvalidArgument carrying every diagnostic (OK when `diags` is empty).
absl::Status DiagnosticsToStatus(const Diagnostics& diags,
                                 std::string_view file);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_DIAGNOSTIC_H_
