#include "runtime/cuda/cuda_kernel.h"

#include <array>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/cuda/cuda_device.h"

namespace kiln::runtime::cuda {
namespace {
constexpr int kFuncMaxDynamicShared = 8;
constexpr int64_t kDefaultShared = 48 * 1024;
}  // namespace

absl::StatusOr<std::unique_ptr<CudaKernel>> CudaKernel::Load(
    std::string_view cubin, std::string_view metadata_text, int ordinal) {
  absl::StatusOr<KernelMetadata> md = ParseKernelMetadata(metadata_text);
  if (!md.ok()) return md.status();
  return Load(cubin, std::move(*md), ordinal);
}

absl::StatusOr<std::unique_ptr<CudaKernel>> CudaKernel::Load(
    std::string_view cubin, KernelMetadata metadata, int ordinal) {
  if (metadata.target.rfind("sm_", 0) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata target '", metadata.target, "' is not a CUDA target"));
  }
  absl::StatusOr<const Driver*> d = Driver::Get();
  if (!d.ok()) return d.status();
  absl::StatusOr<DeviceInfo> dev = UseDevice(ordinal);
  if (!dev.ok()) return dev.status();
  if (metadata.shared_bytes > dev->max_shared_optin) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel '", metadata.name, "' needs ",
                     metadata.shared_bytes, " bytes of shared memory; ",
                     dev->name, " allows ", dev->max_shared_optin));
  }
  std::unique_ptr<CudaKernel> k(new CudaKernel(*d, std::move(metadata)));
  const DriverApi& api = (*d)->api();
  // The cubin must outlive nothing: the driver copies it.
  std::string image(cubin);
  if (absl::Status s = (*d)->Check(
          api.cuModuleLoadData(&k->module_, image.data()), "cuModuleLoadData");
      !s.ok()) {
    return absl::Status(s.code(), absl::StrCat(s.message(), " (kernel for ",
                                               k->metadata_.target, ", device ",
                                               dev->arch(), ")"));
  }
  if (absl::Status s =
          (*d)->Check(api.cuModuleGetFunction(&k->function_, k->module_,
                                              k->metadata_.entry.c_str()),
                      "cuModuleGetFunction");
      !s.ok()) {
    return s;
  }
  if (k->metadata_.shared_bytes > kDefaultShared) {
    if (absl::Status s = (*d)->Check(
            api.cuFuncSetAttribute(k->function_, kFuncMaxDynamicShared,
                                   static_cast<int>(k->metadata_.shared_bytes)),
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)");
        !s.ok()) {
      return s;
    }
  }
  return k;
}

CudaKernel::~CudaKernel() {
  if (module_) driver_->api().cuModuleUnload(module_);
}

absl::Status CudaKernel::Launch(absl::Span<const ArgValue> args,
                                CUstream stream) const {
  auto check = [](const std::array<int64_t, 3>& grid,
                  const std::array<int64_t, 3>&) -> absl::Status {
    for (int64_t g : grid) {
      if (g > 0x7fffffff) {
        return absl::InvalidArgumentError(
            absl::StrCat("grid dim ", g, " is too large for CUDA"));
      }
    }
    if (grid[1] > 65535 || grid[2] > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("grid (", grid[0], ", ", grid[1], ", ", grid[2],
                       ") exceeds CUDA's 65535 limit on y and z"));
    }
    return absl::OkStatus();
  };
  auto enqueue = [&](const GpuBinding& b, void** params) {
    return driver_->Check(
        CallLaunchKernel(driver_->api().cuLaunchKernel, function_, b,
                         metadata_.shared_bytes, stream, params),
        "cuLaunchKernel");
  };
  return launcher_.Launch(metadata_, args, check, enqueue);
}

}  // namespace kiln::runtime::cuda
