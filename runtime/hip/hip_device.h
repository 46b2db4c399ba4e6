// AMD GPU discovery through the HIP runtime: name, gfx architecture, compute
// units, memory, LDS and grid limits, and the SKU string that the tuning key
// uses ("AMD-Instinct-MI250X-110CU"). The pure pieces (architecture name,
// SKU, reading hipDeviceProp_t) are exposed for tests.
#ifndef KILN_RUNTIME_HIP_HIP_DEVICE_H_
#define KILN_RUNTIME_HIP_HIP_DEVICE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/hip/hip_driver.h"

namespace kiln::runtime::hip {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;           // "AMD Instinct MI250X"; some ROCm say ""
  std::string gcn_arch_name;  // "gfx90a:sramecc+:xnack-"
  int compute_units = 0;
  int warp_size = 0;                 // 64 on CDNA (Instinct), 32 on RDNA
  int64_t total_memory = 0;          // bytes
  int64_t max_shared_per_block = 0;  // LDS bytes per workgroup
  std::array<int64_t, 3> max_grid = {0, 0, 0};  // blocks per grid dim
  std::string arch() const;                     // "gfx90a"
  std::string sku() const;                      // "AMD-Instinct-MI250X-110CU"
};

// "gfx90a:sramecc+:xnack-" -> "gfx90a": the compile target, without the
// target features after the first ':'.
std::string GfxArch(absl::string_view gcn_arch_name);

// The SKU of an AMD GPU: its name (whitespace runs as one '-', "AMD" put in
// front when missing; "AMD <arch>" when the runtime gives no name), then
// the compute units: ("AMD Instinct MI250X", "gfx90a", 110) ->
// "AMD-Instinct-MI250X-110CU"; ("", "gfx942", 304) -> "AMD-gfx942-304CU".
std::string HipSku(absl::string_view name, absl::string_view arch,
                   int compute_units);

// Size of the buffer to hand hipGetDeviceProperties: larger than every
// hipDeviceProp_t layout Kiln knows.
inline constexpr size_t kPropsBufferSize = 4096;

// The gcnArchName field of a hipDeviceProp_t of `layout` in `props`
// (kPropsBufferSize bytes), checked against what hipDeviceGetAttribute said
// (`compute_units` must be the struct's multiProcessorCount) and for shape
// (a NUL-terminated name starting "gfx"). Internal when the check fails,
// which means the library's layout is not the one Kiln assumed.
absl::StatusOr<std::string> GcnArchNameFromProps(const unsigned char* props,
                                                 PropsLayout layout,
                                                 int compute_units);

// Every visible AMD GPU; an empty list where the runtime is there but sees
// no GPU. FailedPrecondition without a HIP runtime (see Driver::Get).
absl::StatusOr<std::vector<DeviceInfo>> ListDevices();

// Makes `ordinal` the calling thread's current HIP device and describes it.
// FailedPrecondition "no AMD GPU: ..." where the runtime sees none, NotFound
// for an ordinal that does not exist.
absl::StatusOr<DeviceInfo> UseDevice(int ordinal);

}  // namespace kiln::runtime::hip

#endif  // KILN_RUNTIME_HIP_HIP_DEVICE_H_
