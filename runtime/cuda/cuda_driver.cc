#include "runtime/cuda/cuda_driver.h"

#include <memory>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace kiln::runtime::cuda {

absl::Status Driver::Check(CUresult rc, const char* call) const {
  if (rc == 0) return absl::OkStatus();
  const char* name = nullptr;
  const char* text = nullptr;
  if (api_.cuGetErrorName) api_.cuGetErrorName(rc, &name);
  if (api_.cuGetErrorString) api_.cuGetErrorString(rc, &text);
  return absl::InternalError(absl::StrCat(call, ": ",
                                          name ? name : "CUDA error", " (", rc,
                                          "): ", text ? text : ""));
}

absl::Status Driver::Init() {
  absl::Status missing = absl::OkStatus();
  auto bind = [&](auto& fn, const char* name) {
    auto sym = lib_.FindSymbol(name);
    if (!sym.ok()) {
      if (missing.ok()) {
        missing = absl::FailedPreconditionError(
            absl::StrCat(lib_.name(), " lacks ", name, " (driver too old?)"));
      }
      return;
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(*sym);
  };
  bind(api_.cuInit, "cuInit");
  bind(api_.cuDriverGetVersion, "cuDriverGetVersion");
  bind(api_.cuDeviceGetCount, "cuDeviceGetCount");
  bind(api_.cuDeviceGet, "cuDeviceGet");
  bind(api_.cuDeviceGetName, "cuDeviceGetName");
  bind(api_.cuDeviceGetAttribute, "cuDeviceGetAttribute");
  bind(api_.cuDeviceTotalMem, "cuDeviceTotalMem_v2");
  bind(api_.cuDevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  bind(api_.cuDevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  bind(api_.cuCtxSetCurrent, "cuCtxSetCurrent");
  bind(api_.cuCtxSynchronize, "cuCtxSynchronize");
  bind(api_.cuModuleLoadData, "cuModuleLoadData");
  bind(api_.cuModuleUnload, "cuModuleUnload");
  bind(api_.cuModuleGetFunction, "cuModuleGetFunction");
  bind(api_.cuFuncSetAttribute, "cuFuncSetAttribute");
  bind(api_.cuOccupancyMaxActiveBlocksPerMultiprocessor,
       "cuOccupancyMaxActiveBlocksPerMultiprocessor");
  bind(api_.cuLaunchKernel, "cuLaunchKernel");
  bind(api_.cuMemAlloc, "cuMemAlloc_v2");
  bind(api_.cuMemFree, "cuMemFree_v2");
  bind(api_.cuMemcpyHtoD, "cuMemcpyHtoD_v2");
  bind(api_.cuMemcpyDtoH, "cuMemcpyDtoH_v2");
  bind(api_.cuMemsetD8, "cuMemsetD8_v2");
  bind(api_.cuStreamSynchronize, "cuStreamSynchronize");
  bind(api_.cuEventCreate, "cuEventCreate");
  bind(api_.cuEventRecord, "cuEventRecord");
  bind(api_.cuEventSynchronize, "cuEventSynchronize");
  bind(api_.cuEventElapsedTime, "cuEventElapsedTime_v2");
  if (!api_.cuEventElapsedTime) {
    missing = absl::OkStatus();
    bind(api_.cuEventElapsedTime, "cuEventElapsedTime");
  }
  bind(api_.cuEventDestroy, "cuEventDestroy_v2");
  if (auto sym = lib_.FindSymbol("cuTensorMapEncodeTiled"); sym.ok()) {
    api_.cuTensorMapEncodeTiled =
        reinterpret_cast<decltype(api_.cuTensorMapEncodeTiled)>(*sym);
  }
  if (auto sym = lib_.FindSymbol("cuLaunchKernelEx"); sym.ok()) {
    api_.cuLaunchKernelEx =
        reinterpret_cast<decltype(api_.cuLaunchKernelEx)>(*sym);
  }
  if (auto sym = lib_.FindSymbol("cuOccupancyMaxActiveClusters"); sym.ok()) {
    api_.cuOccupancyMaxActiveClusters =
        reinterpret_cast<decltype(api_.cuOccupancyMaxActiveClusters)>(*sym);
  }
  bind(api_.cuGetErrorName, "cuGetErrorName");
  bind(api_.cuGetErrorString, "cuGetErrorString");
  if (!missing.ok()) return missing;
  absl::Status st = Check(api_.cuInit(0), "cuInit");
  if (!st.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("the CUDA driver (", lib_.LoadedPath(),
                     ") cannot be initialised; no usable GPU: ", st.message()));
  }
  api_.cuDriverGetVersion(&version_);
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Driver>> Driver::LoadFrom(
    const std::string& path) {
  absl::StatusOr<SharedLibrary> lib = SharedLibrary::Open(path);
  if (!lib.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no NVIDIA driver: cannot load ", path, ": ", lib.status().message()));
  }
  std::unique_ptr<Driver> d(new Driver(std::move(*lib)));
  absl::Status st = d->Init();
  if (!st.ok()) return st;
  return d;
}

absl::StatusOr<const Driver*> Driver::Get() {
  static absl::StatusOr<std::unique_ptr<Driver>>* driver =
      new absl::StatusOr<std::unique_ptr<Driver>>(LoadFrom("libcuda.so.1"));
  if (!driver->ok()) return driver->status();
  return driver->value().get();
}

}  // namespace kiln::runtime::cuda
