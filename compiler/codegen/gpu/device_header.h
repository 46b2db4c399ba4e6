// One header of a device library (cuda/device/kiln/*.cuh,
// hip/device/kiln/*.hip.h) embedded in the binary at build time by
// embed_headers.cmake, and the hash of a library that goes into a target's
// toolchain identity (so into every binary key).
#ifndef KILN_COMPILER_CODEGEN_GPU_DEVICE_HEADER_H_
#define KILN_COMPILER_CODEGEN_GPU_DEVICE_HEADER_H_

#include <span>
#include <string>

namespace kiln::compiler::gpu {

struct DeviceHeader {
  const char* name;  // include name, e.g. "kiln/mma.cuh"
  const char* text;
};

// SHA-256 (hex) over every header's name, length and text, in order.
std::string HashDeviceHeaders(std::span<const DeviceHeader> headers);

}  // namespace kiln::compiler::gpu

#endif  // KILN_COMPILER_CODEGEN_GPU_DEVICE_HEADER_H_
