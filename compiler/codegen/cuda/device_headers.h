// The device library (compiler/codegen/cuda/device/kiln/*.cuh), embedded in
// the binary at build time: NVRTC gets the headers from memory, and their
// hash is part of the CUDA toolchain identity (so of every binary key).
#ifndef KILN_COMPILER_CODEGEN_CUDA_DEVICE_HEADERS_H_
#define KILN_COMPILER_CODEGEN_CUDA_DEVICE_HEADERS_H_

#include <span>
#include <string>

namespace kiln::compiler::cuda {

struct DeviceHeader {
  const char* name;  // include name, e.g. "kiln/mma.cuh"
  const char* text;
};

// Every header, sorted by name.
std::span<const DeviceHeader> DeviceHeaders();

// SHA-256 (hex) over every header's name and text.
const std::string& DeviceHeadersHash();

namespace internal {
extern const DeviceHeader kDeviceHeaders[];
extern const int kNumDeviceHeaders;
}  // namespace internal

}  // namespace kiln::compiler::cuda

#endif  // KILN_COMPILER_CODEGEN_CUDA_DEVICE_HEADERS_H_
