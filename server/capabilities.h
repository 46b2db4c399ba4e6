// HostCapabilities: what this daemon is and what it can compile for, found by
// probing the host once at start-up. Transport-free: the gRPC service
// (kiln_service.h) only copies it into a CapabilitiesResponse.
#ifndef KILN_SERVER_CAPABILITIES_H_
#define KILN_SERVER_CAPABILITIES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::server {

// The daemon's version, "MAJOR.MINOR.PATCH" (the CMake project version).
std::string ServerVersion();

struct Target {
  enum class Kind { kCpu, kCuda, kHip };
  std::string name;  // "cpu", "sm_90", ...
  Kind kind = Kind::kCpu;
  bool operator==(const Target&) const = default;
};

// A GPU attached to the host.
struct GpuInfo {
  int index = 0;            // the CUDA or HIP device ordinal
  std::string name;         // "NVIDIA H200", "AMD Instinct MI250X"
  std::string target;       // "sm_90a", "gfx90a"
  std::string sku;          // "NVIDIA-H200-132SM", "AMD-Instinct-MI250X-110CU"
  int multiprocessors = 0;  // SMs or CUs
  uint64_t memory_bytes = 0;
};

struct HostCapabilities {
  std::string server_version;
  std::vector<Target> targets;  // "cpu" first, then GPU archs by number
  std::vector<GpuInfo> gpus;    // in device order
  std::map<std::string, std::string> toolchain_versions;  // "nvrtc" -> "12.2"
};

// What NVRTC, loaded with dlopen, says about itself.
struct NvrtcInfo {
  std::string version;     // "12.2"
  std::vector<int> archs;  // compute capabilities it can target: 75, 80, 90
};

// Loads NVRTC (libnvrtc.so.13, .so.12, .so.11.2, .so, the first that loads)
// and asks its version and supported architectures. NotFound when no NVRTC
// is installed; Internal when it loads but an API call fails.
absl::StatusOr<NvrtcInfo> ProbeNvrtc();

// The CUDA driver's version ("12.4") from libcuda.so.1. NotFound when there is
// no driver (no NVIDIA GPU, or a container without one mapped in).
absl::StatusOr<std::string> ProbeCudaDriverVersion();

// The targets this build can compile for (the CPU today; CUDA targets join
// with the CUDA back end) and the toolchain versions that were found (with
// NVRTC's architectures as "nvrtc_archs" and the HIP runtime's version as
// "hip_runtime"), and the NVIDIA GPUs, then the AMD ones. Never fails: an
// absent toolchain is only missing from the map. Logs what it found at
// debug level.
HostCapabilities ProbeHostCapabilities();

}  // namespace kiln::server

#endif  // KILN_SERVER_CAPABILITIES_H_
