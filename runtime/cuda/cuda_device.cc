#include "runtime/cuda/cuda_device.h"

#include <mutex>

#include "absl/strings/str_cat.h"
#include "runtime/gpu_sku.h"

namespace kiln::runtime::cuda {
namespace {

constexpr int kAttrSmCount = 16;
constexpr int kAttrCcMajor = 75;
constexpr int kAttrCcMinor = 76;
constexpr int kAttrMaxSharedOptin = 97;

absl::StatusOr<DeviceInfo> Describe(const Driver& d, int ordinal) {
  const DriverApi& api = d.api();
  CUdevice dev = 0;
  if (absl::Status s = d.Check(api.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
      !s.ok()) {
    return absl::NotFoundError(
        absl::StrCat("no CUDA device ", ordinal, ": ", s.message()));
  }
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  if (absl::Status s = d.Check(api.cuDeviceGetName(name, sizeof(name) - 1, dev),
                               "cuDeviceGetName");
      !s.ok()) {
    return s;
  }
  info.name = name;
  int v = 0;
  api.cuDeviceGetAttribute(&v, kAttrCcMajor, dev);
  info.cc_major = v;
  api.cuDeviceGetAttribute(&v, kAttrCcMinor, dev);
  info.cc_minor = v;
  api.cuDeviceGetAttribute(&v, kAttrSmCount, dev);
  info.sm_count = v;
  api.cuDeviceGetAttribute(&v, kAttrMaxSharedOptin, dev);
  info.max_shared_optin = v;
  size_t mem = 0;
  api.cuDeviceTotalMem(&mem, dev);
  info.total_memory = static_cast<int64_t>(mem);
  return info;
}

}  // namespace

std::string DeviceInfo::arch() const {
  return absl::StrCat("sm_", cc_major, cc_minor);
}

std::string DeviceInfo::sku() const { return GpuSku(name, sm_count, "SM"); }

absl::StatusOr<std::vector<DeviceInfo>> ListDevices() {
  absl::StatusOr<const Driver*> d = Driver::Get();
  if (!d.ok()) return d.status();
  int n = 0;
  if (absl::Status s =
          (*d)->Check((*d)->api().cuDeviceGetCount(&n), "cuDeviceGetCount");
      !s.ok()) {
    return s;
  }
  if (n == 0) {
    return absl::FailedPreconditionError("the CUDA driver sees no GPU");
  }
  std::vector<DeviceInfo> out;
  for (int i = 0; i < n; ++i) {
    absl::StatusOr<DeviceInfo> info = Describe(**d, i);
    if (!info.ok()) return info.status();
    out.push_back(std::move(*info));
  }
  return out;
}

absl::StatusOr<DeviceInfo> UseDevice(int ordinal) {
  absl::StatusOr<const Driver*> d = Driver::Get();
  if (!d.ok()) return d.status();
  absl::StatusOr<DeviceInfo> info = Describe(**d, ordinal);
  if (!info.ok()) return info.status();
  static std::mutex mu;
  static CUcontext contexts[64] = {};
  if (ordinal < 0 || ordinal >= 64) {
    return absl::NotFoundError(absl::StrCat("no CUDA device ", ordinal));
  }
  std::lock_guard<std::mutex> lock(mu);
  const DriverApi& api = (*d)->api();
  if (!contexts[ordinal]) {
    CUdevice dev = 0;
    api.cuDeviceGet(&dev, ordinal);
    if (absl::Status s =
            (*d)->Check(api.cuDevicePrimaryCtxRetain(&contexts[ordinal], dev),
                        "cuDevicePrimaryCtxRetain");
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = (*d)->Check(api.cuCtxSetCurrent(contexts[ordinal]),
                                   "cuCtxSetCurrent");
      !s.ok()) {
    return s;
  }
  return info;
}

absl::StatusOr<DeviceBuffer> DeviceBuffer::Allocate(size_t bytes) {
  absl::StatusOr<const Driver*> d = Driver::Get();
  if (!d.ok()) return d.status();
  DeviceBuffer b;
  if (absl::Status s = (*d)->Check(
          (*d)->api().cuMemAlloc(&b.ptr_, bytes ? bytes : 1), "cuMemAlloc");
      !s.ok()) {
    return s;
  }
  b.size_ = bytes;
  return b;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  if (this != &o) {
    this->~DeviceBuffer();
    ptr_ = o.ptr_;
    size_ = o.size_;
    o.ptr_ = 0;
    o.size_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  if (!ptr_) return;
  absl::StatusOr<const Driver*> d = Driver::Get();
  if (d.ok()) (*d)->api().cuMemFree(ptr_);
  ptr_ = 0;
}

absl::Status DeviceBuffer::CopyFrom(const void* host, size_t bytes) {
  absl::StatusOr<const Driver*> d = Driver::Get();
  if (!d.ok()) return d.status();
  if (bytes > size_) return absl::OutOfRangeError("copy larger than buffer");
  return (*d)->Check((*d)->api().cuMemcpyHtoD(ptr_, host, bytes),
                     "cuMemcpyHtoD");
}

absl::Status DeviceBuffer::CopyTo(void* host, size_t bytes) const {
  absl::StatusOr<const Driver*> d = Driver::Get();
  if (!d.ok()) return d.status();
  if (bytes > size_) return absl::OutOfRangeError("copy larger than buffer");
  return (*d)->Check((*d)->api().cuMemcpyDtoH(host, ptr_, bytes),
                     "cuMemcpyDtoH");
}

absl::Status DeviceBuffer::Fill(unsigned char byte) {
  absl::StatusOr<const Driver*> d = Driver::Get();
  if (!d.ok()) return d.status();
  return (*d)->Check((*d)->api().cuMemsetD8(ptr_, byte, size_), "cuMemsetD8");
}

}  // namespace kiln::runtime::cuda
