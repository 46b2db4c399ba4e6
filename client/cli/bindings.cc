#include "client/cli/bindings.h"

#include <exception>
#include <iostream>

#include "absl/strings/str_split.h"
#include "client/cli/commands.h"

namespace kiln::cli {

std::map<std::string, int64_t> ParseBindings(
    const std::vector<std::string>& items, const char* command,
    const char* flag) {
  std::map<std::string, int64_t> out;
  for (const std::string& arg : items) {
    for (absl::string_view item : absl::StrSplit(arg, ',', absl::SkipEmpty())) {
      const std::string d(item);
      const size_t eq = d.find('=');
      size_t used = 0;
      int64_t value = 0;
      bool ok = eq != std::string::npos && eq > 0 && eq + 1 < d.size();
      if (ok) {
        try {
          value = std::stoll(d.substr(eq + 1), &used, 0);
        } catch (const std::exception&) {
          ok = false;
        }
        ok = ok && used == d.size() - eq - 1;
      }
      if (!ok) {
        std::cerr << command << ": error: " << flag
                  << " expects NAME=INTEGER, got '" << d << "'\n";
        Exit(kExitUsage);
      }
      out[d.substr(0, eq)] = value;
    }
  }
  return out;
}

}  // namespace kiln::cli
