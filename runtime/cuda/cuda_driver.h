// The CUDA driver API, reached through dlopen("libcuda.so.1") so one build
// runs on hosts with and without NVIDIA drivers. Only the entry points Kiln
// needs are resolved; each failing call becomes an absl::Status naming the
// call and the driver's error name and text ("cuModuleLoadData:
// CUDA_ERROR_NO_BINARY_FOR_GPU: no kernel image is available ...").
#ifndef KILN_RUNTIME_CUDA_CUDA_DRIVER_H_
#define KILN_RUNTIME_CUDA_CUDA_DRIVER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/shared_library.h"

namespace kiln::runtime::cuda {

// Driver handle types (opaque pointers / integers, as in cuda.h).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;

// cuLaunchKernelEx's configuration (cuda.h's CUlaunchConfig and
// CUlaunchAttribute, of which Kiln sets the cluster dimension only).
inline constexpr int kLaunchAttributeClusterDimension = 4;
struct LaunchAttribute {
  int id = 0;
  char pad[4] = {};
  union {
    char raw[64];
    struct {
      unsigned x, y, z;
    } cluster;
  } value = {};
};
struct LaunchConfig {
  unsigned grid_x = 1, grid_y = 1, grid_z = 1;
  unsigned block_x = 1, block_y = 1, block_z = 1;
  unsigned shared_bytes = 0;
  CUstream stream = nullptr;
  LaunchAttribute* attrs = nullptr;
  unsigned num_attrs = 0;
};

static_assert(sizeof(LaunchAttribute) == 72, "CUlaunchAttribute's layout");
static_assert(offsetof(LaunchConfig, stream) == 32 &&
                  offsetof(LaunchConfig, num_attrs) == 48,
              "CUlaunchConfig's layout");

struct DriverApi {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDriverGetVersion)(int*);
  CUresult (*cuDeviceGetCount)(int*);
  CUresult (*cuDeviceGet)(CUdevice*, int);
  CUresult (*cuDeviceGetName)(char*, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*cuDeviceTotalMem)(size_t*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*cuDevicePrimaryCtxRelease)(CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuModuleLoadData)(CUmodule*, const void*);
  CUresult (*cuModuleUnload)(CUmodule);
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*cuFuncSetAttribute)(CUfunction, int, int);
  CUresult (*cuOccupancyMaxActiveBlocksPerMultiprocessor)(int*, CUfunction, int,
                                                          size_t);
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned,
                             unsigned, unsigned, unsigned, CUstream, void**,
                             void**);
  CUresult (*cuMemAlloc)(CUdeviceptr*, size_t);
  CUresult (*cuMemFree)(CUdeviceptr);
  CUresult (*cuMemcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult (*cuMemcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult (*cuMemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*cuStreamSynchronize)(CUstream);
  CUresult (*cuEventCreate)(CUevent*, unsigned);
  CUresult (*cuEventRecord)(CUevent, CUstream);
  CUresult (*cuEventSynchronize)(CUevent);
  CUresult (*cuEventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*cuEventDestroy)(CUevent);
  // Optional (drivers for CUDA 12+): null when the driver lacks it.
  CUresult (*cuTensorMapEncodeTiled)(void* map, int dtype, unsigned rank,
                                     void* address, const uint64_t* dims,
                                     const uint64_t* strides,
                                     const unsigned* box,
                                     const unsigned* element_strides,
                                     int interleave, int swizzle,
                                     int l2_promotion, int oob_fill);
  // Optional (CUDA 12+): thread-block clusters.
  CUresult (*cuLaunchKernelEx)(const LaunchConfig*, CUfunction, void**, void**);
  CUresult (*cuOccupancyMaxActiveClusters)(int*, CUfunction,
                                           const LaunchConfig*);
  CUresult (*cuGetErrorName)(CUresult, const char**);
  CUresult (*cuGetErrorString)(CUresult, const char**);
};

// The loaded driver. Thread-safe after Load().
class Driver {
 public:
  // The process-wide driver from libcuda.so.1, loaded and initialised
  // (cuInit) once. FailedPrecondition, saying why, when the library is
  // absent ("no NVIDIA driver"), lacks an entry point, or cuInit fails
  // (e.g. CUDA_ERROR_NO_DEVICE: a driver but no GPU). Never crashes.
  static absl::StatusOr<const Driver*> Get();

  // A driver from a specific library path (tests point this at the
  // toolkit's stub library). Same errors as Get(); the caller owns it.
  static absl::StatusOr<std::unique_ptr<Driver>> LoadFrom(
      const std::string& path);

  const DriverApi& api() const { return api_; }
  int version() const { return version_; }  // e.g. 13000

  // OK for CUDA_SUCCESS, else Internal "CALL: NAME: TEXT".
  absl::Status Check(CUresult rc, const char* call) const;

 private:
  Driver(SharedLibrary lib) : lib_(std::move(lib)) {}
  absl::Status Init();

  SharedLibrary lib_;
  DriverApi api_{};
  int version_ = 0;
};

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_CUDA_DRIVER_H_
