#include "runtime/hip/hip_driver.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

namespace kiln::runtime::hip {
namespace {

// Points `fn` at `lib`'s `name`; the signature is ours to vouch for.
template <typename Fn>
absl::Status Resolve(const SharedLibrary& lib, const char* name, Fn*& fn) {
  absl::StatusOr<Fn*> found = lib.FindFunction<Fn>(name);
  if (!found.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no HIP runtime: ", lib.LoadedPath(), " lacks ", name,
                     " (not libamdhip64, or too old)"));
  }
  fn = *found;
  return absl::OkStatus();
}

}  // namespace

absl::Status Driver::Check(hipError_t rc, const char* call) const {
  if (rc == kHipSuccess) return absl::OkStatus();
  const char* name = api_.hipGetErrorName ? api_.hipGetErrorName(rc) : nullptr;
  const char* text =
      api_.hipGetErrorString ? api_.hipGetErrorString(rc) : nullptr;
  std::string message =
      absl::StrCat(call, ": ", name ? name : "HIP error", " (", rc, ")");
  // ROCm 5 gives the name again as the text.
  if (text != nullptr && (name == nullptr || std::string(text) != name)) {
    absl::StrAppend(&message, ": ", text);
  }
  return absl::InternalError(message);
}

std::string Driver::version_string() const {
  // HIP_VERSION = major * 10^7 + minor * 10^5 + patch.
  return absl::StrCat(version_ / 10000000, ".", (version_ / 100000) % 100);
}

absl::Status Driver::Init() {
  absl::Status s;
  auto need = [&](const char* name, auto*& fn) {
    if (s.ok()) s = Resolve(lib_, name, fn);
  };
  need("hipInit", api_.hipInit);
  need("hipRuntimeGetVersion", api_.hipRuntimeGetVersion);
  need("hipGetDeviceCount", api_.hipGetDeviceCount);
  need("hipDeviceGet", api_.hipDeviceGet);
  need("hipDeviceGetName", api_.hipDeviceGetName);
  need("hipDeviceGetAttribute", api_.hipDeviceGetAttribute);
  need("hipDeviceTotalMem", api_.hipDeviceTotalMem);
  need("hipSetDevice", api_.hipSetDevice);
  need("hipModuleLoadData", api_.hipModuleLoadData);
  need("hipModuleUnload", api_.hipModuleUnload);
  need("hipModuleGetFunction", api_.hipModuleGetFunction);
  need("hipFuncGetAttribute", api_.hipFuncGetAttribute);
  need("hipModuleLaunchKernel", api_.hipModuleLaunchKernel);
  need("hipStreamSynchronize", api_.hipStreamSynchronize);
  need("hipGetErrorName", api_.hipGetErrorName);
  need("hipGetErrorString", api_.hipGetErrorString);
  if (!s.ok()) return s;
  // ROCm 6 renamed the call that fills its new hipDeviceProp_t; the old
  // name there and in ROCm 5 fills the old layout.
  if (Resolve(lib_, "hipGetDevicePropertiesR0600", api_.hipGetDeviceProperties)
          .ok()) {
    props_layout_ = PropsLayout::kR0600;
  } else {
    need("hipGetDeviceProperties", api_.hipGetDeviceProperties);
    if (!s.ok()) return s;
    props_layout_ = PropsLayout::kR0000;
  }
  api_.hipRuntimeGetVersion(&version_);

  // Without a GPU (no /dev/kfd, or no AMD device behind it) ROCm 5.2's
  // hipInit says hipErrorInvalidDevice and hipGetDeviceCount
  // hipErrorNoDevice: a runtime with no devices, not a failure.
  auto no_device = [](hipError_t rc) {
    return rc == kHipErrorNoDevice || rc == kHipErrorInvalidDevice;
  };
  const char* call = "hipInit";
  hipError_t rc = api_.hipInit(0);
  int count = 0;
  if (rc == kHipSuccess) {
    call = "hipGetDeviceCount";
    rc = api_.hipGetDeviceCount(&count);
  }
  if (rc != kHipSuccess && !no_device(rc)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the HIP runtime (", lib_.LoadedPath(),
                     ") cannot be initialised: ", Check(rc, call).message()));
  }
  device_count_ = rc == kHipSuccess ? std::max(count, 0) : 0;
  if (device_count_ == 0) {
    no_device_reason_ = rc == kHipSuccess
                            ? std::string("hipGetDeviceCount found 0 devices")
                            : std::string(Check(rc, call).message());
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<Driver>> Driver::FromLibrary(
    absl::StatusOr<SharedLibrary> lib, absl::string_view tried) {
  if (!lib.ok()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no HIP runtime: cannot load ", tried, ": ", lib.status().message()));
  }
  std::unique_ptr<Driver> d(new Driver(std::move(*lib)));
  if (absl::Status s = d->Init(); !s.ok()) return s;
  return d;
}

absl::StatusOr<std::unique_ptr<Driver>> Driver::LoadFrom(
    const std::string& path) {
  return FromLibrary(SharedLibrary::Open(path), path);
}

absl::StatusOr<const Driver*> Driver::Get() {
  static const auto* const driver =
      new absl::StatusOr<std::unique_ptr<Driver>>([] {
        if (const char* path = std::getenv(kHipLibraryEnv);
            path != nullptr && *path != '\0') {
          return LoadFrom(path);
        }
        const std::vector<std::string> candidates = {
            "libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"};
        return FromLibrary(SharedLibrary::OpenFirst(candidates),
                           "libamdhip64.so.6, .so.5 or .so");
      }());
  if (!driver->ok()) return driver->status();
  return driver->value().get();
}

}  // namespace kiln::runtime::hip
