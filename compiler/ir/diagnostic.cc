#include "compiler/ir/diagnostic.h"

#include <cstdlib>

#include "absl/strings/cord.h"
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

namespace {
constexpr char kLocationPayload[] = "kiln.dev/location";
}  // namespace

absl::Status LocatedError(const Loc& loc, std::string_view message,
                          absl::StatusCode code) {
  absl::Status st(code, absl::string_view(message.data(), message.size()));
  if (loc.line > 0) {
    st.SetPayload(kLocationPayload, absl::Cord(StrCat(loc.line, ":", loc.col)));
  }
  return st;
}

std::optional<Loc> ErrorLocation(const absl::Status& status) {
  auto p = status.GetPayload(kLocationPayload);
  if (!p) return std::nullopt;
  const std::string text(*p);
  const size_t colon = text.find(':');
  if (colon == std::string::npos) return std::nullopt;
  Loc loc;
  loc.line = std::atoi(text.substr(0, colon).c_str());
  loc.col = std::atoi(text.substr(colon + 1).c_str());
  if (loc.line <= 0) return std::nullopt;
  return loc;
}

}  // namespace kiln::compiler
