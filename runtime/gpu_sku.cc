#include "runtime/gpu_sku.h"

#include "absl/strings/str_cat.h"

namespace kiln::runtime {

std::string GpuSku(absl::string_view name, int units, absl::string_view unit) {
  std::string s(name);
  for (char& c : s) {
    if (c == ' ') c = '-';
  }
  return absl::StrCat(s, "-", units, unit);
}

}  // namespace kiln::runtime
