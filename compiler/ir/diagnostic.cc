#include "compiler/ir/diagnostic.h"

#include "compiler/ir/format.h"

namespace kiln::compiler {

std::string Diagnostic::ToString(std::string_view file) const {
  if (loc.line <= 0) return StrCat(file, ": error: ", message);
  return StrCat(file, ":", loc.line, ":", loc.col, ": error: ", message);
}

std::string FormatDiagnostics(const Diagnostics& diags, std::string_view file) {
  std::string out;
  for (const Diagnostic& d : diags) StrAppend(&out, d.ToString(file), "\n");
  return out;
}

absl::Status DiagnosticsToStatus(const Diagnostics& diags,
                                 std::string_view file) {
  if (diags.empty()) return absl::OkStatus();
  std::string text = FormatDiagnostics(diags, file);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  return absl::InvalidArgumentError(text);
}

}  // namespace kiln::compiler
