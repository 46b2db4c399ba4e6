// The CUDA benchmark device (runtime/cuda: the driver through dlopen): each
// candidate's inputs are copied to device buffers, launches go to the
// default stream, and each timed run is bracketed by CUDA events after an
// L2 flush (a 256 MiB memset), so every run starts from cold caches.
#include "runtime/cuda/cuda_device.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/cuda_kernel.h"
#include "server/bench_worker/bench_device.h"

namespace kiln::bench {
namespace {

namespace cuda = ::kiln::runtime::cuda;

// Larger than any GPU's L2 cache.
constexpr size_t kFlushBytes = size_t{256} << 20;

class CudaBenchKernel final : public BenchKernel {
 public:
  CudaBenchKernel(const cuda::Driver* driver,
                  std::unique_ptr<cuda::CudaKernel> kernel, Inputs& inputs,
                  std::vector<cuda::DeviceBuffer> buffers,
                  std::vector<runtime::ArgValue> args,
                  cuda::DeviceBuffer* flush)
      : driver_(driver),
        kernel_(std::move(kernel)),
        inputs_(inputs),
        buffers_(std::move(buffers)),
        args_(std::move(args)),
        flush_(flush) {}

  ~CudaBenchKernel() override {
    if (start_ != nullptr) driver_->api().cuEventDestroy(start_);
    if (stop_ != nullptr) driver_->api().cuEventDestroy(stop_);
  }

  absl::Status Run() override {
    if (absl::Status s = kernel_->Launch(args_); !s.ok()) return s;
    return driver_->Check(driver_->api().cuCtxSynchronize(),
                          "cuCtxSynchronize");
  }

  absl::StatusOr<double> TimedRunUs() override {
    const cuda::DriverApi& api = driver_->api();
    if (start_ == nullptr) {
      if (absl::Status s =
              driver_->Check(api.cuEventCreate(&start_, 0), "cuEventCreate");
          !s.ok()) {
        return s;
      }
      if (absl::Status s =
              driver_->Check(api.cuEventCreate(&stop_, 0), "cuEventCreate");
          !s.ok()) {
        return s;
      }
    }
    if (flush_ != nullptr) {
      if (absl::Status s = flush_->Fill(++flush_byte_); !s.ok()) return s;
    }
    if (absl::Status s =
            driver_->Check(api.cuEventRecord(start_, nullptr), "cuEventRecord");
        !s.ok()) {
      return s;
    }
    if (absl::Status s = kernel_->Launch(args_); !s.ok()) return s;
    if (absl::Status s =
            driver_->Check(api.cuEventRecord(stop_, nullptr), "cuEventRecord");
        !s.ok()) {
      return s;
    }
    if (absl::Status s =
            driver_->Check(api.cuEventSynchronize(stop_), "cuEventSynchronize");
        !s.ok()) {
      return s;
    }
    float ms = 0;
    if (absl::Status s = driver_->Check(
            api.cuEventElapsedTime(&ms, start_, stop_), "cuEventElapsedTime");
        !s.ok()) {
      return s;
    }
    return ms * 1000.0;
  }

  absl::Status ReadBack() override {
    for (size_t p = 0; p < buffers_.size(); ++p) {
      std::vector<unsigned char>& host = inputs_.buffers[p];
      if (host.empty()) continue;
      if (absl::Status s = buffers_[p].CopyTo(host.data(), host.size());
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  }

 private:
  const cuda::Driver* driver_;
  std::unique_ptr<cuda::CudaKernel> kernel_;
  Inputs& inputs_;
  std::vector<cuda::DeviceBuffer> buffers_;  // one per parameter
  std::vector<runtime::ArgValue> args_;      // tensors point into buffers_
  cuda::DeviceBuffer* flush_;                // may be null
  cuda::CUevent start_ = nullptr;
  cuda::CUevent stop_ = nullptr;
  unsigned char flush_byte_ = 0;
};

class CudaBenchDevice final : public BenchDevice {
 public:
  explicit CudaBenchDevice(int ordinal) : ordinal_(ordinal) {}

  absl::StatusOr<std::unique_ptr<BenchKernel>> Prepare(
      std::string_view binary, std::string_view metadata,
      Inputs& inputs) override {
    absl::StatusOr<const cuda::Driver*> driver = cuda::Driver::Get();
    if (!driver.ok()) return driver.status();
    if (absl::Status s = cuda::UseDevice(ordinal_).status(); !s.ok()) return s;
    absl::StatusOr<std::unique_ptr<cuda::CudaKernel>> kernel =
        cuda::CudaKernel::Load(binary, metadata, ordinal_);
    if (!kernel.ok()) return kernel.status();
    if (flush_ == nullptr) {
      absl::StatusOr<cuda::DeviceBuffer> flush =
          cuda::DeviceBuffer::Allocate(kFlushBytes);
      // Without room for the flush buffer, time without flushing.
      if (flush.ok()) {
        flush_ = std::make_unique<cuda::DeviceBuffer>(*std::move(flush));
      }
    }
    std::vector<cuda::DeviceBuffer> buffers(inputs.args.size());
    std::vector<runtime::ArgValue> args = inputs.args;
    for (size_t p = 0; p < args.size(); ++p) {
      if (!args[p].is_tensor) continue;
      const std::vector<unsigned char>& host = inputs.buffers[p];
      absl::StatusOr<cuda::DeviceBuffer> buffer =
          cuda::DeviceBuffer::Allocate(std::max<size_t>(1, host.size()));
      if (!buffer.ok()) return buffer.status();
      if (absl::Status s = buffer->CopyFrom(host.data(), host.size());
          !s.ok()) {
        return s;
      }
      args[p].data = buffer->data();
      buffers[p] = *std::move(buffer);
    }
    return std::make_unique<CudaBenchKernel>(*driver, *std::move(kernel),
                                             inputs, std::move(buffers),
                                             std::move(args), flush_.get());
  }

 private:
  const int ordinal_;
  std::unique_ptr<cuda::DeviceBuffer> flush_;
};

}  // namespace

std::unique_ptr<BenchDevice> MakeCudaBenchDevice(int ordinal) {
  return std::make_unique<CudaBenchDevice>(ordinal);
}

}  // namespace kiln::bench
