#include "runtime/cuda/cuda_kernel.h"

#include <cstring>
#include <string>
#include <vector>

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

namespace {

// Whether `args` match `bound` in everything but the data pointers (a null
// pointer never matches: the full check explains it).
bool SameShapes(const std::vector<ArgValue>& bound,
                absl::Span<const ArgValue> args) {
  if (bound.size() != args.size()) return false;
  for (size_t i = 0; i < args.size(); ++i) {
    const ArgValue& a = args[i];
    const ArgValue& b = bound[i];
    if (a.is_tensor != b.is_tensor || a.dtype != b.dtype) return false;
    if (a.is_tensor) {
      if (a.data == nullptr || a.shape != b.shape || a.strides != b.strides) {
        return false;
      }
    } else if (std::memcmp(a.scalar, b.scalar, sizeof(a.scalar)) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

absl::Status CudaKernel::Launch(absl::Span<const ArgValue> args,
                                CUstream stream) const {
  std::shared_ptr<const Bound> last;
  {
    absl::MutexLock lock(&bound_mu_);
    last = bound_;
  }
  if (last != nullptr && SameShapes(last->args, args)) {
    return Enqueue(*last, args, stream);
  }

  absl::StatusOr<LaunchPlan> plan = BindLaunch(metadata_, args);
  if (!plan.ok()) return plan.status();
  if (plan->num_blocks() == 0) return absl::OkStatus();
  for (int64_t g : plan->grid) {
    if (g > 0x7fffffff) {
      return absl::InvalidArgumentError(
          absl::StrCat("grid dim ", g, " is too large for CUDA"));
    }
  }
  if (plan->grid[1] > 65535 || plan->grid[2] > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("grid (", plan->grid[0], ", ", plan->grid[1], ", ",
                     plan->grid[2], ") exceeds CUDA's 65535 limit on y and z"));
  }
  auto bound = std::make_shared<Bound>();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<int64_t> b = metadata_.block[i].Evaluate(plan->values);
    if (!b.ok()) return b.status();
    bound->block[i] = static_cast<unsigned>(*b);
    bound->grid[i] = static_cast<unsigned>(plan->grid[i]);
  }
  bound->symbols.assign(plan->symbols.begin(), plan->symbols.end());
  bound->args.assign(args.begin(), args.end());
  for (ArgValue& a : bound->args) a.data = nullptr;
  absl::Status status = Enqueue(*bound, args, stream);
  if (status.ok()) {
    absl::MutexLock lock(&bound_mu_);
    bound_ = std::move(bound);
  }
  return status;
}

absl::Status CudaKernel::Enqueue(const Bound& bound,
                                 absl::Span<const ArgValue> args,
                                 CUstream stream) const {
  // Kernel parameters: a device pointer per tensor, the scalar's bytes,
  // then one 64-bit value per dynamic symbol. On the stack when they fit.
  constexpr size_t kInline = 32;
  const size_t count = args.size() + bound.symbols.size();
  void* inline_params[kInline];
  void* inline_pointers[kInline];
  std::vector<void*> heap_params, heap_pointers;
  void** params = inline_params;
  void** pointers = inline_pointers;
  if (count > kInline) {
    heap_params.resize(count);
    heap_pointers.resize(args.size());
    params = heap_params.data();
    pointers = heap_pointers.data();
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].is_tensor) {
      pointers[i] = args[i].data;
      params[i] = &pointers[i];
    } else {
      params[i] = const_cast<unsigned char*>(args[i].scalar);
    }
  }
  for (size_t i = 0; i < bound.symbols.size(); ++i) {
    params[args.size() + i] = const_cast<long long*>(&bound.symbols[i]);
  }
  return driver_->Check(
      driver_->api().cuLaunchKernel(
          function_, bound.grid[0], bound.grid[1], bound.grid[2],
          bound.block[0], bound.block[1], bound.block[2],
          static_cast<unsigned>(metadata_.shared_bytes), stream, params,
          nullptr),
      "cuLaunchKernel");
}

}  // namespace kiln::runtime::cuda
