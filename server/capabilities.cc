#include "server/capabilities.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "compiler/codegen/hip/hip_codegen.h"
#include "compiler/codegen/hip/hiprtc.h"
#include "compiler/target.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/hip/hip_device.h"
#include "runtime/hip/hip_driver.h"
#include "runtime/shared_library.h"
#include "spdlog/spdlog.h"

namespace kiln::server {
namespace {

// NVRTC and the CUDA driver API return 0 for success.
constexpr int kSuccess = 0;

// "12020" style versions (major * 1000 + minor * 10) as "12.2".
std::string CudaVersionString(int version) {
  return absl::StrCat(version / 1000, ".", (version % 1000) / 10);
}

// AMD GPUs (after the NVIDIA ones; their index is the HIP ordinal) and the
// HIP runtime's version. Asking initialises the runtime (hipInit) once.
void AddAmdGpus(HostCapabilities& caps) {
  absl::StatusOr<const runtime::hip::Driver*> hip = runtime::hip::Driver::Get();
  if (!hip.ok()) {
    spdlog::debug("no AMD GPUs: {}", hip.status().ToString());
    return;
  }
  caps.toolchain_versions["hip_runtime"] = (*hip)->version_string();
  absl::StatusOr<std::vector<runtime::hip::DeviceInfo>> devices =
      runtime::hip::ListDevices();
  if (!devices.ok()) {
    // The runtime sees GPUs it cannot describe: worth a look.
    spdlog::warn("AMD GPUs not listed: {}", devices.status().ToString());
    return;
  }
  if (devices->empty()) {
    spdlog::debug("no AMD GPUs: {}", (*hip)->no_device_reason());
  }
  for (const runtime::hip::DeviceInfo& d : *devices) {
    GpuInfo gpu;
    gpu.index = d.ordinal;
    gpu.name = d.name.empty() ? absl::StrCat("AMD ", d.arch()) : d.name;
    gpu.target = d.arch();
    gpu.sku = d.sku();
    gpu.multiprocessors = d.compute_units;
    gpu.memory_bytes = static_cast<uint64_t>(d.total_memory);
    caps.gpus.push_back(std::move(gpu));
  }
}

}  // namespace

std::string ServerVersion() { return KILN_VERSION; }

absl::StatusOr<NvrtcInfo> ProbeNvrtc() {
  const std::vector<std::string> candidates = {
      "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"};
  absl::StatusOr<runtime::SharedLibrary> nvrtc =
      runtime::SharedLibrary::OpenFirst(candidates);
  if (!nvrtc.ok()) return nvrtc.status();

  auto version_fn = nvrtc->FindFunction<int(int*, int*)>("nvrtcVersion");
  auto num_archs_fn =
      nvrtc->FindFunction<int(int*)>("nvrtcGetNumSupportedArchs");
  auto archs_fn = nvrtc->FindFunction<int(int*)>("nvrtcGetSupportedArchs");
  if (!version_fn.ok()) return version_fn.status();
  // The arch queries exist since CUDA 11.2, the oldest NVRTC we accept.
  if (!num_archs_fn.ok()) return num_archs_fn.status();
  if (!archs_fn.ok()) return archs_fn.status();

  int major = 0;
  int minor = 0;
  int count = 0;
  if ((*version_fn)(&major, &minor) != kSuccess ||
      (*num_archs_fn)(&count) != kSuccess || count < 0) {
    return absl::InternalError(
        absl::StrCat(nvrtc->LoadedPath(), ": version query failed"));
  }
  NvrtcInfo info;
  info.version = absl::StrCat(major, ".", minor);
  info.archs.resize(count);
  if (count > 0 && (*archs_fn)(info.archs.data()) != kSuccess) {
    return absl::InternalError(
        absl::StrCat(nvrtc->LoadedPath(), ": arch query failed"));
  }
  std::sort(info.archs.begin(), info.archs.end());
  return info;
}

absl::StatusOr<std::string> ProbeCudaDriverVersion() {
  absl::StatusOr<runtime::SharedLibrary> cuda =
      runtime::SharedLibrary::Open("libcuda.so.1");
  if (!cuda.ok()) return cuda.status();
  // cuDriverGetVersion needs no cuInit, so probing never touches a GPU.
  auto version_fn = cuda->FindFunction<int(int*)>("cuDriverGetVersion");
  if (!version_fn.ok()) return version_fn.status();
  int version = 0;
  if ((*version_fn)(&version) != kSuccess) {
    return absl::InternalError("cuDriverGetVersion failed");
  }
  return CudaVersionString(version);
}

HostCapabilities ProbeHostCapabilities() {
  HostCapabilities caps;
  caps.server_version = ServerVersion();
  caps.targets.push_back({"cpu", Target::Kind::kCpu});

  // CUDA targets: those the back end knows whose architecture the
  // installed NVRTC can compile for.
  if (absl::StatusOr<NvrtcInfo> nvrtc = ProbeNvrtc(); nvrtc.ok()) {
    caps.toolchain_versions["nvrtc"] = nvrtc->version;
    std::vector<std::string> archs;
    for (int arch : nvrtc->archs) archs.push_back(absl::StrCat("sm_", arch));
    caps.toolchain_versions["nvrtc_archs"] = absl::StrJoin(archs, ",");
    for (const compiler::Target& t : compiler::AllTargets()) {
      if (t.kind == compiler::TargetKind::kCuda &&
          std::find(nvrtc->archs.begin(), nvrtc->archs.end(),
                    t.compute_capability) != nvrtc->archs.end()) {
        caps.targets.push_back({std::string(t.name), Target::Kind::kCuda});
      }
    }
  } else {
    spdlog::debug("no CUDA targets: {}", nvrtc.status().ToString());
  }
  // HIP targets: those this host's hiprtc can compile for (Debian 12's
  // ROCm 5.2 builds gfx908 and gfx90a, not gfx942).
  for (const compiler::Target& t : compiler::AllTargets()) {
    if (t.kind != compiler::TargetKind::kHip) continue;
    const std::string target(t.name);
    if (absl::Status s = compiler::CheckHipToolchain(target); s.ok()) {
      caps.targets.push_back({target, Target::Kind::kHip});
    } else {
      spdlog::debug("no HIP target {}: {}", target, s.ToString());
    }
  }
  if (absl::StatusOr<std::string> v = compiler::hip::HiprtcVersion(); v.ok()) {
    caps.toolchain_versions["hiprtc"] = *v;
  }
  // GPUs: asking the driver initialises it, which costs a little once.
  if (absl::StatusOr<std::vector<runtime::cuda::DeviceInfo>> devices =
          runtime::cuda::ListDevices();
      devices.ok()) {
    for (const runtime::cuda::DeviceInfo& d : *devices) {
      GpuInfo gpu;
      gpu.index = d.ordinal;
      gpu.name = d.name;
      // Hopper kernels use the arch-specific features (wgmma, TMA).
      gpu.target = d.cc_major == 9 && d.cc_minor == 0 ? "sm_90a" : d.arch();
      gpu.sku = d.sku();
      gpu.multiprocessors = d.sm_count;
      gpu.memory_bytes = static_cast<uint64_t>(d.total_memory);
      caps.gpus.push_back(std::move(gpu));
    }
  } else {
    spdlog::debug("no CUDA GPUs: {}", devices.status().ToString());
  }
  AddAmdGpus(caps);
  if (absl::StatusOr<std::string> driver = ProbeCudaDriverVersion();
      driver.ok()) {
    caps.toolchain_versions["cuda_driver"] = *driver;
  } else {
    spdlog::debug("no CUDA driver: {}", driver.status().ToString());
  }
  return caps;
}

}  // namespace kiln::server
