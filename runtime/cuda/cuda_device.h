// CUDA device discovery and the per-device state a launch needs: name,
// compute capability, SM count, memory and the SKU string that the tuning
// key uses ("NVIDIA-H200-132SM"), plus the device's primary context.
#ifndef KILN_RUNTIME_CUDA_CUDA_DEVICE_H_
#define KILN_RUNTIME_CUDA_CUDA_DEVICE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cuda/cuda_driver.h"

namespace kiln::runtime::cuda {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;  // "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  int64_t total_memory = 0;      // bytes
  int64_t max_shared_optin = 0;  // dynamic shared memory per block
  std::string arch() const;      // "sm_90"
  std::string sku() const;       // "NVIDIA-H200-132SM"
};

// Every visible device. FailedPrecondition when there is no driver or no
// GPU (see Driver::Get); an empty list never comes back.
absl::StatusOr<std::vector<DeviceInfo>> ListDevices();

// Makes `ordinal`'s primary context current on this thread (retained for
// the life of the process). NotFound for an ordinal that does not exist.
absl::StatusOr<DeviceInfo> UseDevice(int ordinal);

// Device memory owned by this object (freed on destruction).
class DeviceBuffer {
 public:
  static absl::StatusOr<DeviceBuffer> Allocate(size_t bytes);
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& o) noexcept { *this = std::move(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  ~DeviceBuffer();
  CUdeviceptr ptr() const { return ptr_; }
  void* data() const { return reinterpret_cast<void*>(ptr_); }
  size_t size() const { return size_; }
  absl::Status CopyFrom(const void* host, size_t bytes);
  absl::Status CopyTo(void* host, size_t bytes) const;
  absl::Status Fill(unsigned char byte);

 private:
  CUdeviceptr ptr_ = 0;
  size_t size_ = 0;
};

}  // namespace kiln::runtime::cuda

#endif  // KILN_RUNTIME_CUDA_CUDA_DEVICE_H_
