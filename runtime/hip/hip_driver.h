// The HIP runtime (ROCm's libamdhip64), reached through dlopen so one build
// runs on hosts with and without ROCm; no HIP header or library is needed to
// build. Only the entry points Kiln needs are declared and resolved; each
// failing call becomes an absl::Status naming the call and HIP's error
// ("hipModuleLoadData: hipErrorNoBinaryForGpu (209): ...").
//
// ABI: checked against ROCm 5.2 and 6.x headers. Device attributes are read
// with hipDeviceGetAttribute (its enum values are the same in both); the
// one value with no attribute in 6.x, the gfx architecture name, comes from
// hipDeviceProp_t, whose layout differs between them (hip_device.cc).
#ifndef KILN_RUNTIME_HIP_HIP_DRIVER_H_
#define KILN_RUNTIME_HIP_HIP_DRIVER_H_

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/shared_library.h"

namespace kiln::runtime::hip {

// HIP handle types (opaque pointers / integers, as in hip_runtime_api.h).
using hipError_t = int;
using hipDevice_t = int;
using hipModule_t = struct ihipModule_t*;
using hipFunction_t = struct ihipModuleSymbol_t*;
using hipStream_t = struct ihipStream_t*;

// hipError_t values Kiln tells apart.
constexpr hipError_t kHipSuccess = 0;
constexpr hipError_t kHipErrorNoDevice = 100;
constexpr hipError_t kHipErrorInvalidDevice = 101;

struct HipApi {
  hipError_t (*hipInit)(unsigned);
  hipError_t (*hipRuntimeGetVersion)(int*);
  hipError_t (*hipGetDeviceCount)(int*);
  hipError_t (*hipDeviceGet)(hipDevice_t*, int);
  hipError_t (*hipDeviceGetName)(char*, int, hipDevice_t);
  hipError_t (*hipDeviceGetAttribute)(int*, int, int);
  hipError_t (*hipDeviceTotalMem)(size_t*, hipDevice_t);
  // hipGetDevicePropertiesR0600 where the library has it (ROCm >= 6), else
  // hipGetDeviceProperties (ROCm 5); `props_layout` says which.
  hipError_t (*hipGetDeviceProperties)(void*, int);
  hipError_t (*hipSetDevice)(int);
  hipError_t (*hipModuleLoadData)(hipModule_t*, const void*);
  hipError_t (*hipModuleUnload)(hipModule_t);
  hipError_t (*hipModuleGetFunction)(hipFunction_t*, hipModule_t, const char*);
  hipError_t (*hipFuncGetAttribute)(int*, int, hipFunction_t);
  hipError_t (*hipModuleLaunchKernel)(hipFunction_t, unsigned, unsigned,
                                      unsigned, unsigned, unsigned, unsigned,
                                      unsigned, hipStream_t, void**, void**);
  hipError_t (*hipStreamSynchronize)(hipStream_t);
  const char* (*hipGetErrorName)(hipError_t);
  const char* (*hipGetErrorString)(hipError_t);
};

// Which hipDeviceProp_t HipApi::hipGetDeviceProperties fills.
enum class PropsLayout { kR0000, kR0600 };

// The library Driver::Get() loads: $KILN_HIP_LIBRARY when set, else the
// first of libamdhip64.so.6, libamdhip64.so.5, libamdhip64.so that loads.
inline constexpr char kHipLibraryEnv[] = "KILN_HIP_LIBRARY";

// The loaded runtime. Thread-safe after loading.
class Driver {
 public:
  // The process-wide runtime, loaded and initialised (hipInit) once.
  // FailedPrecondition "no HIP runtime: ..." naming the library when it
  // cannot be loaded or lacks an entry point. A runtime without a GPU (hipInit
  // or hipGetDeviceCount says hipErrorNoDevice / hipErrorInvalidDevice) is
  // *not* an error: device_count() is 0 and no_device_reason() says why.
  // Any other hipInit failure is FailedPrecondition. Never crashes.
  static absl::StatusOr<const Driver*> Get();

  // A runtime from `path` (a file, or a soname searched for the usual way).
  // Same errors as Get(); the caller owns it.
  static absl::StatusOr<std::unique_ptr<Driver>> LoadFrom(
      const std::string& path);

  const HipApi& api() const { return api_; }
  PropsLayout props_layout() const { return props_layout_; }
  int version() const { return version_; }  // e.g. 50221153 (ROCm 5.2)
  std::string version_string() const;       // "5.2"
  std::string library_path() const { return lib_.LoadedPath(); }

  // Visible AMD GPUs; 0 where the runtime found none.
  int device_count() const { return device_count_; }
  // Why device_count() is 0 ("hipGetDeviceCount: hipErrorNoDevice ...").
  const std::string& no_device_reason() const { return no_device_reason_; }

  // OK for hipSuccess, else Internal "CALL: NAME (CODE): TEXT".
  absl::Status Check(hipError_t rc, const char* call) const;

 private:
  explicit Driver(SharedLibrary lib) : lib_(std::move(lib)) {}
  // A driver from `lib` (`tried` names what was opened, for errors).
  static absl::StatusOr<std::unique_ptr<Driver>> FromLibrary(
      absl::StatusOr<SharedLibrary> lib, absl::string_view tried);
  absl::Status Init();

  SharedLibrary lib_;
  HipApi api_{};
  PropsLayout props_layout_ = PropsLayout::kR0000;
  int version_ = 0;
  int device_count_ = 0;
  std::string no_device_reason_;
};

}  // namespace kiln::runtime::hip

#endif  // KILN_RUNTIME_HIP_HIP_DRIVER_H_
