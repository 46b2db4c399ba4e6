// OpenBenchDevice: the device a worker's --device flag names.
#include "server/bench_worker/bench_device.h"

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kiln::bench {

absl::StatusOr<std::unique_ptr<BenchDevice>> OpenBenchDevice(
    std::string_view name) {
  const std::string text(name);
  if (text == "cpu") return MakeCpuBenchDevice();
  int ordinal = -1;
  if (text.rfind("cuda:", 0) == 0 &&
      absl::SimpleAtoi(text.substr(5), &ordinal) && ordinal >= 0) {
    return MakeCudaBenchDevice(ordinal);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown benchmark device '", text, "'; expected cpu or cuda:N"));
}

}  // namespace kiln::bench
