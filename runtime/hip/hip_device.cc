#include "runtime/hip/hip_device.h"

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "runtime/gpu_sku.h"

namespace kiln::runtime::hip {
namespace {

// hipDeviceAttribute_t values (the same in ROCm 5.2 and 6.x).
constexpr int kAttrMaxGridDimX = 29;  // Y and Z follow
constexpr int kAttrMultiprocessorCount = 63;
constexpr int kAttrMaxSharedMemoryPerBlock = 74;
constexpr int kAttrWarpSize = 87;

// Where hipDeviceProp_t keeps multiProcessorCount and gcnArchName (char[256])
// in each layout: R0000 is ROCm 5's struct (and hipDeviceProp_tR0000 in
// ROCm 6's hip_deprecated.h), R0600 ROCm 6's.
struct PropsOffsets {
  size_t compute_units;
  size_t gcn_arch_name;
};
constexpr PropsOffsets kR0000 = {336, 396};
constexpr PropsOffsets kR0600 = {388, 1160};
constexpr size_t kGcnArchNameSize = 256;

absl::StatusOr<DeviceInfo> Describe(const Driver& d, int ordinal) {
  const HipApi& api = d.api();
  hipDevice_t dev = 0;
  if (absl::Status s = d.Check(api.hipDeviceGet(&dev, ordinal), "hipDeviceGet");
      !s.ok()) {
    return absl::NotFoundError(
        absl::StrCat("no AMD GPU ", ordinal, ": ", s.message()));
  }
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  if (absl::Status s =
          d.Check(api.hipDeviceGetName(name, sizeof(name) - 1, dev),
                  "hipDeviceGetName");
      !s.ok()) {
    return s;
  }
  info.name = name;
  auto attribute = [&](int attr, const char* what) -> absl::StatusOr<int> {
    int v = 0;
    if (absl::Status s = d.Check(api.hipDeviceGetAttribute(&v, attr, ordinal),
                                 "hipDeviceGetAttribute");
        !s.ok()) {
      return absl::Status(s.code(), absl::StrCat(s.message(), " (", what, ")"));
    }
    return v;
  };
  absl::StatusOr<int> cus = attribute(kAttrMultiprocessorCount, "CU count");
  if (!cus.ok()) return cus.status();
  info.compute_units = *cus;
  absl::StatusOr<int> warp = attribute(kAttrWarpSize, "warp size");
  if (!warp.ok()) return warp.status();
  info.warp_size = *warp;
  absl::StatusOr<int> lds =
      attribute(kAttrMaxSharedMemoryPerBlock, "LDS per block");
  if (!lds.ok()) return lds.status();
  info.max_shared_per_block = *lds;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<int> g = attribute(kAttrMaxGridDimX + i, "max grid dim");
    if (!g.ok()) return g.status();
    info.max_grid[i] = *g;
  }
  size_t mem = 0;
  if (absl::Status s =
          d.Check(api.hipDeviceTotalMem(&mem, dev), "hipDeviceTotalMem");
      !s.ok()) {
    return s;
  }
  info.total_memory = static_cast<int64_t>(mem);
  // ROCm 6 has no attribute for the architecture name; read it from the
  // properties struct, whose layout we check rather than trust.
  alignas(16) unsigned char props[kPropsBufferSize] = {};
  if (absl::Status s = d.Check(api.hipGetDeviceProperties(props, ordinal),
                               "hipGetDeviceProperties");
      !s.ok()) {
    return s;
  }
  absl::StatusOr<std::string> arch =
      GcnArchNameFromProps(props, d.props_layout(), info.compute_units);
  if (!arch.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot read the gfx architecture of AMD GPU ", ordinal,
                     " from HIP ", d.version_string(), " (", d.library_path(),
                     "): ", arch.status().message()));
  }
  info.gcn_arch_name = *std::move(arch);
  return info;
}

}  // namespace

std::string GfxArch(absl::string_view gcn_arch_name) {
  return std::string(gcn_arch_name.substr(0, gcn_arch_name.find(':')));
}

std::string HipSku(absl::string_view name, absl::string_view arch,
                   int compute_units) {
  std::string words = absl::StrJoin(
      absl::StrSplit(name, absl::ByAnyChar(" \t\n\r"), absl::SkipEmpty()), " ");
  if (words.empty()) {
    words = absl::StrCat("AMD ", arch);
  } else if (!absl::StartsWith(words, "AMD ")) {
    words = absl::StrCat("AMD ", words);
  }
  return GpuSku(words, compute_units, "CU");
}

absl::StatusOr<std::string> GcnArchNameFromProps(const unsigned char* props,
                                                 PropsLayout layout,
                                                 int compute_units) {
  const PropsOffsets& at = layout == PropsLayout::kR0600 ? kR0600 : kR0000;
  int cus = 0;
  std::memcpy(&cus, props + at.compute_units, sizeof(cus));
  if (cus != compute_units) {
    return absl::InternalError(absl::StrCat(
        "hipDeviceProp_t layout mismatch: multiProcessorCount reads ", cus,
        " but the CU count is ", compute_units));
  }
  const char* arch = reinterpret_cast<const char*>(props + at.gcn_arch_name);
  const size_t len = strnlen(arch, kGcnArchNameSize);
  absl::string_view name(arch, len);
  if (len == kGcnArchNameSize || !absl::StartsWith(name, "gfx")) {
    return absl::InternalError(absl::StrCat(
        "hipDeviceProp_t layout mismatch: gcnArchName is not a gfx name"));
  }
  return std::string(name);
}

std::string DeviceInfo::arch() const { return GfxArch(gcn_arch_name); }

std::string DeviceInfo::sku() const {
  return HipSku(name, arch(), compute_units);
}

absl::StatusOr<std::vector<DeviceInfo>> ListDevices() {
  absl::StatusOr<const Driver*> d = Driver::Get();
  if (!d.ok()) return d.status();
  std::vector<DeviceInfo> out;
  for (int i = 0; i < (*d)->device_count(); ++i) {
    absl::StatusOr<DeviceInfo> info = Describe(**d, i);
    if (!info.ok()) return info.status();
    out.push_back(*std::move(info));
  }
  return out;
}

absl::StatusOr<DeviceInfo> UseDevice(int ordinal) {
  absl::StatusOr<const Driver*> d = Driver::Get();
  if (!d.ok()) return d.status();
  if ((*d)->device_count() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no AMD GPU: the HIP runtime (", (*d)->library_path(),
                     ") sees none: ", (*d)->no_device_reason()));
  }
  if (ordinal < 0 || ordinal >= (*d)->device_count()) {
    return absl::NotFoundError(absl::StrCat(
        "no AMD GPU ", ordinal, " (there ",
        (*d)->device_count() == 1 ? "is " : "are ", (*d)->device_count(), ")"));
  }
  if (absl::Status s =
          (*d)->Check((*d)->api().hipSetDevice(ordinal), "hipSetDevice");
      !s.ok()) {
    return s;
  }
  return Describe(**d, ordinal);
}

}  // namespace kiln::runtime::hip
