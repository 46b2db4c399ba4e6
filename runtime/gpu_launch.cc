#include "runtime/gpu_launch.h"

#include <cstring>
#include <utility>

namespace kiln::runtime {
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

absl::Status GpuLauncher::Launch(const KernelMetadata& metadata,
                                 absl::Span<const ArgValue> args,
                                 CheckDims check, Enqueue enqueue,
                                 absl::Span<void* const> extra) const {
  std::shared_ptr<const GpuBinding> last;
  {
    absl::MutexLock lock(&mu_);
    last = last_;
  }
  if (last != nullptr && SameShapes(last->args, args)) {
    return EnqueueWith(*last, args, extra, enqueue);
  }

  absl::StatusOr<LaunchPlan> plan = BindLaunch(metadata, args);
  if (!plan.ok()) return plan.status();
  if (plan->num_blocks() == 0) return absl::OkStatus();
  std::array<int64_t, 3> block;
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<int64_t> b = metadata.block[i].Evaluate(plan->values);
    if (!b.ok()) return b.status();
    block[i] = *b;
  }
  if (absl::Status s = check(plan->grid, block); !s.ok()) return s;
  auto bound = std::make_shared<GpuBinding>();
  for (int i = 0; i < 3; ++i) {
    bound->block[i] = static_cast<unsigned>(block[i]);
    bound->grid[i] = static_cast<unsigned>(plan->grid[i]);
  }
  bound->symbols.assign(plan->symbols.begin(), plan->symbols.end());
  bound->args.assign(args.begin(), args.end());
  for (ArgValue& a : bound->args) a.data = nullptr;
  absl::Status status = EnqueueWith(*bound, args, extra, enqueue);
  if (status.ok()) {
    absl::MutexLock lock(&mu_);
    last_ = std::move(bound);
  }
  return status;
}

absl::Status GpuLauncher::EnqueueWith(const GpuBinding& binding,
                                      absl::Span<const ArgValue> args,
                                      absl::Span<void* const> extra,
                                      Enqueue enqueue) const {
  // On the stack when they fit: launches are on the hot path.
  constexpr size_t kInline = 32;
  const size_t count = args.size() + binding.symbols.size() + extra.size();
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
  for (size_t i = 0; i < binding.symbols.size(); ++i) {
    params[args.size() + i] = const_cast<long long*>(&binding.symbols[i]);
  }
  for (size_t i = 0; i < extra.size(); ++i) {
    params[args.size() + binding.symbols.size() + i] = extra[i];
  }
  return enqueue(binding, params);
}

}  // namespace kiln::runtime
