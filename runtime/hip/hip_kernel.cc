#include "runtime/hip/hip_kernel.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/hip/hip_device.h"

namespace kiln::runtime::hip {
namespace {
// hipFunction_attribute: HIP_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES (static LDS).
constexpr int kFuncAttrSharedSizeBytes = 1;
// hipModuleLaunchKernel computes grid * block per dim in 32 bits.
constexpr int64_t kMaxWorkItemsPerDim = 0xffffffffLL;
}  // namespace

absl::StatusOr<std::unique_ptr<HipKernel>> HipKernel::Load(
    std::string_view code_object, std::string_view metadata_text, int ordinal) {
  absl::StatusOr<KernelMetadata> md = ParseKernelMetadata(metadata_text);
  if (!md.ok()) return md.status();
  return Load(code_object, *std::move(md), ordinal);
}

absl::StatusOr<std::unique_ptr<HipKernel>> HipKernel::Load(
    std::string_view code_object, KernelMetadata metadata, int ordinal) {
  if (!absl::StartsWith(metadata.target, "gfx")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata target '", metadata.target, "' is not a HIP target"));
  }
  absl::StatusOr<const Driver*> d = Driver::Get();
  if (!d.ok()) {
    return absl::Status(d.status().code(),
                        absl::StrCat("no AMD GPU: ", d.status().message()));
  }
  absl::StatusOr<DeviceInfo> dev = UseDevice(ordinal);
  if (!dev.ok()) return dev.status();
  if (metadata.shared_bytes > dev->max_shared_per_block) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel '", metadata.name, "' needs ",
                     metadata.shared_bytes, " bytes of LDS; ", dev->name, " (",
                     dev->arch(), ") allows ", dev->max_shared_per_block));
  }
  std::unique_ptr<HipKernel> k(new HipKernel(*d, std::move(metadata), ordinal));
  k->max_grid_ = dev->max_grid;
  k->image_.assign(code_object);
  const HipApi& api = (*d)->api();
  if (absl::Status s =
          (*d)->Check(api.hipModuleLoadData(&k->module_, k->image_.data()),
                      "hipModuleLoadData");
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " (kernel for ",
                                               k->metadata_.target, ", device ",
                                               dev->gcn_arch_name, ")"));
  }
  if (absl::Status s =
          (*d)->Check(api.hipModuleGetFunction(&k->function_, k->module_,
                                               k->metadata_.entry.c_str()),
                      "hipModuleGetFunction");
      !s.ok()) {
    return s;
  }
  // AMD GPUs need no opt-in for dynamic LDS, but static and dynamic LDS
  // share the per-workgroup limit: refuse now rather than at every launch.
  int static_lds = 0;
  if (api.hipFuncGetAttribute(&static_lds, kFuncAttrSharedSizeBytes,
                              k->function_) == kHipSuccess &&
      static_lds + k->metadata_.shared_bytes > dev->max_shared_per_block) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel '", k->metadata_.name, "' needs ", static_lds,
        " bytes of static and ", k->metadata_.shared_bytes, " of dynamic LDS; ",
        dev->arch(), " allows ", dev->max_shared_per_block));
  }
  return k;
}

HipKernel::~HipKernel() {
  if (module_) driver_->api().hipModuleUnload(module_);
}

absl::Status HipKernel::Launch(absl::Span<const ArgValue> args,
                               hipStream_t stream) const {
  auto check = [&](const std::array<int64_t, 3>& grid,
                   const std::array<int64_t, 3>& block) -> absl::Status {
    for (int i = 0; i < 3; ++i) {
      if (grid[i] > max_grid_[i] || grid[i] * block[i] > kMaxWorkItemsPerDim) {
        return absl::InvalidArgumentError(absl::StrCat(
            "grid (", grid[0], ", ", grid[1], ", ", grid[2], ") with block (",
            block[0], ", ", block[1], ", ", block[2],
            ") exceeds the AMD GPU's limits: grid (", max_grid_[0], ", ",
            max_grid_[1], ", ", max_grid_[2], "), 2^32-1 threads per dim"));
      }
    }
    return absl::OkStatus();
  };
  if (stream == nullptr) {
    // The null stream is the current device's: make it the kernel's.
    if (absl::Status s = driver_->Check(driver_->api().hipSetDevice(ordinal_),
                                        "hipSetDevice");
        !s.ok()) {
      return s;
    }
  }
  auto enqueue = [&](const GpuBinding& b, void** params) {
    return driver_->Check(
        CallLaunchKernel(driver_->api().hipModuleLaunchKernel, function_, b,
                         metadata_.shared_bytes, stream, params),
        "hipModuleLaunchKernel");
  };
  return launcher_.Launch(metadata_, args, check, enqueue);
}

}  // namespace kiln::runtime::hip
