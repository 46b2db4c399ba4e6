// Text building for diagnostics and the printer, on fmt.
//
// Debian's abseil is built with its own absl::string_view (not
// std::string_view), so absl::StrCat cannot take the std::string_view values
// the IR uses; these thin adapters over fmt can.
#ifndef KILN_COMPILER_IR_FORMAT_H_
#define KILN_COMPILER_IR_FORMAT_H_

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <iterator>
#include <string>
#include <string_view>

#include "absl/strings/string_view.h"

// absl::string_view (status messages) formats as the text it views.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<std::string_view> {
  template <typename Context>
  auto format(absl::string_view s, Context& ctx) const {
    return fmt::formatter<std::string_view>::format(
        std::string_view(s.data(), s.size()), ctx);
  }
};

namespace kiln::compiler {

// Concatenates the text form of every argument.
template <typename... Args>
std::string StrCat(const Args&... args) {
  std::string out;
  (fmt::format_to(std::back_inserter(out), "{}", args), ...);
  return out;
}

// Appends the text form of every argument to `out`.
template <typename... Args>
void StrAppend(std::string* out, const Args&... args) {
  (fmt::format_to(std::back_inserter(*out), "{}", args), ...);
}

// Joins the elements of `range` with `sep`.
template <typename Range>
std::string StrJoin(const Range& range, std::string_view sep) {
  return fmt::format("{}", fmt::join(range, sep));
}

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_FORMAT_H_
