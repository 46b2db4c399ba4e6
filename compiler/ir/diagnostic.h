// Diagnostics: errors tied to a source location, printed as
// `FILE:LINE:COL: error: MESSAGE`.
#ifndef KILN_COMPILER_IR_DIAGNOSTIC_H_
#define KILN_COMPILER_IR_DIAGNOSTIC_H_

#include <optional>
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

// A pass's or back end's error at `loc`: the message alone, the location
// carried beside it as a value (a status payload), so that the compile API
// writes `FILE:LINE:COL: error: MESSAGE` without parsing text back.
absl::Status LocatedError(
    const Loc& loc, std::string_view message,
    absl::StatusCode code = absl::StatusCode::kInvalidArgument);

// The location LocatedError attached (nullopt: none, or line 0).
std::optional<Loc> ErrorLocation(const absl::Status& status);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_DIAGNOSTIC_H_
