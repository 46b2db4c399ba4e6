#include "compiler/codegen/gpu/device_header.h"

#include <cstring>

#include "compiler/ir/canonical_hash.h"
#include "compiler/ir/format.h"

namespace kiln::compiler::gpu {

std::string HashDeviceHeaders(std::span<const DeviceHeader> headers) {
  std::string all;
  for (const DeviceHeader& h : headers) {
    StrAppend(&all, h.name, "\n", std::strlen(h.text), "\n", h.text);
  }
  return Sha256Hex(all);
}

}  // namespace kiln::compiler::gpu
