// The HIP device library (compiler/codegen/hip/device/kiln/*.hip.h),
// embedded in the binary at build time: hiprtc gets the headers from memory,
// and their hash is part of the HIP toolchain identity (so of every binary
// key).
#ifndef KILN_COMPILER_CODEGEN_HIP_DEVICE_HEADERS_H_
#define KILN_COMPILER_CODEGEN_HIP_DEVICE_HEADERS_H_

#include <span>
#include <string>

#include "compiler/codegen/gpu/device_header.h"

namespace kiln::compiler::hip {

using gpu::DeviceHeader;  // include name ("kiln/mma.hip.h") and text

// Every header, sorted by name (defined in the generated
// device_headers_data.cc, embed_headers.cmake).
std::span<const DeviceHeader> DeviceHeaders();

// SHA-256 (hex) over every header's name and text.
const std::string& DeviceHeadersHash();

}  // namespace kiln::compiler::hip

#endif  // KILN_COMPILER_CODEGEN_HIP_DEVICE_HEADERS_H_
