#include "server/tuning/tuning_key.h"

#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "compiler/ir/canonical_hash.h"

namespace kiln::server::tuning {

Bindings ShapeBucket(const Bindings& shape) {
  Bindings bucket;
  for (const auto& [name, value] : shape) {
    int64_t p = 1;
    while (p < value && p < (int64_t{1} << 62)) p <<= 1;
    bucket[name] = p;
  }
  return bucket;
}

std::string KernelHashWithoutTunableValues(const compiler::Kernel& kernel) {
  compiler::Kernel stripped = kernel;
  for (compiler::Tunable& t : stripped.tunables) t.candidates.clear();
  return compiler::KernelHash(stripped);
}

std::string TuningKeyText(const TuningKeyParts& parts) {
  std::string text =
      absl::StrCat("kiln-tuning-key-v1\nkernel ", parts.kernel_hash, "\n");
  for (const auto& [name, value] : parts.fixed) {
    absl::StrAppend(&text, "fixed ", name, "=", value, "\n");
  }
  absl::StrAppend(&text, "target ", parts.target, "\nsku ", parts.sku, "\n");
  for (const auto& [name, value] : parts.bucket) {
    absl::StrAppend(&text, "bucket ", name, "=", value, "\n");
  }
  return text;
}

std::string TuningKey(const TuningKeyParts& parts) {
  return compiler::Sha256Hex(TuningKeyText(parts));
}

std::string CpuSku() {
  std::string model;
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (absl::StartsWith(line, "model name")) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) {
        model = std::string(absl::StripAsciiWhitespace(
            absl::string_view(line).substr(colon + 1)));
      }
      break;
    }
  }
  if (model.empty()) model = "unknown CPU";
  return absl::StrCat(model, ", ", std::thread::hardware_concurrency(),
                      " threads");
}

}  // namespace kiln::server::tuning
