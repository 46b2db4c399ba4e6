// The device library (compiler/codegen/cuda/device/kiln/*.cuh), embedded in
// the binary at build time: NVRTC gets the headers from memory, and their
// hash is part of the CUDA toolchain identity (so of every binary key).
#ifndef KILN_COMPILER_CODEGEN_CUDA_DEVICE_HEADERS_H_
#define KILN_COMPILER_CODEGEN_CUDA_DEVICE_HEADERS_H_

#include <span>
#include <string>

#include "compiler/codegen/gpu/device_header.h"

namespace kiln::compiler::cuda {

using gpu::DeviceHeader;  // include name ("kiln/mma.cuh") and text

// Every header, sorted by name (defined in the generated
// device_headers_data.cc, embed_headers.cmake).
std::span<const DeviceHeader> DeviceHeaders();

// SHA-256 (hex) over every header's name and text.
const std::string& DeviceHeadersHash();

}  // namespace kiln::compiler::cuda

#endif  // KILN_COMPILER_CODEGEN_CUDA_DEVICE_HEADERS_H_
