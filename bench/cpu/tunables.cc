// Thin wrappers over compiler/tuning_space.h for the benchmark tables.
#include "bench/cpu/tunables.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/tuning_space.h"

namespace kiln::bench {

std::vector<Bindings> ValidBindings(const compiler::Kernel& kernel) {
  return compiler::EnumerateTuningSpace(kernel);
}

std::string BindingsText(const Bindings& b) {
  std::vector<std::string> parts;
  for (const auto& [name, value] : b) {
    parts.push_back(absl::StrCat(name, "=", value));
  }
  return parts.empty() ? "-" : absl::StrJoin(parts, " ");
}

}  // namespace kiln::bench
