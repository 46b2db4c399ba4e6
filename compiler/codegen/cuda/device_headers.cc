#include "compiler/codegen/cuda/device_headers.h"

#include <cstring>

#include "compiler/ir/canonical_hash.h"
#include "compiler/ir/format.h"

namespace kiln::compiler::cuda {

std::span<const DeviceHeader> DeviceHeaders() {
  return {internal::kDeviceHeaders,
          static_cast<size_t>(internal::kNumDeviceHeaders)};
}

const std::string& DeviceHeadersHash() {
  static const std::string* hash = [] {
    std::string all;
    for (const DeviceHeader& h : DeviceHeaders()) {
      StrAppend(&all, h.name, "\n", std::strlen(h.text), "\n", h.text);
    }
    return new std::string(Sha256Hex(all));
  }();
  return *hash;
}

}  // namespace kiln::compiler::cuda
