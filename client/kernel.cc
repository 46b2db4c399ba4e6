#include "client/kernel.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/cpu/cpu_kernel.h"
#include "runtime/cuda/cuda_kernel.h"
#include "runtime/hip/hip_kernel.h"

namespace kiln::client {

struct Kernel::State {
  KernelParts parts;
  runtime::KernelMetadata metadata;
  std::unique_ptr<runtime::CpuKernel> cpu;          // target "cpu"
  std::unique_ptr<runtime::cuda::CudaKernel> cuda;  // targets "sm_*"
  std::unique_ptr<runtime::hip::HipKernel> hip;     // targets "gfx*"
};

Kernel::Kernel(std::shared_ptr<const State> state) : state_(std::move(state)) {}

absl::StatusOr<Kernel> Kernel::Load(KernelParts parts) {
  absl::StatusOr<runtime::KernelMetadata> metadata =
      runtime::ParseKernelMetadata(parts.metadata);
  if (!metadata.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("kernel ", parts.key,
                     " has bad metadata: ", metadata.status().message()));
  }
  auto state = std::make_shared<State>();
  state->metadata = *metadata;
  if (metadata->target == "cpu") {
    absl::StatusOr<std::unique_ptr<runtime::CpuKernel>> cpu =
        runtime::CpuKernel::Load(parts.binary, *std::move(metadata));
    if (!cpu.ok()) return cpu.status();
    state->cpu = *std::move(cpu);
  } else if (absl::StartsWith(metadata->target, "sm_")) {
    absl::StatusOr<std::unique_ptr<runtime::cuda::CudaKernel>> cuda =
        runtime::cuda::CudaKernel::Load(parts.binary, *std::move(metadata),
                                        parts.device);
    if (!cuda.ok()) return cuda.status();
    state->cuda = *std::move(cuda);
  } else if (absl::StartsWith(metadata->target, "gfx")) {
    absl::StatusOr<std::unique_ptr<runtime::hip::HipKernel>> hip =
        runtime::hip::HipKernel::Load(parts.binary, *std::move(metadata),
                                      parts.device);
    if (!hip.ok()) return hip.status();
    state->hip = *std::move(hip);
  } else {
    return absl::FailedPreconditionError(
        absl::StrCat("kernel ", metadata->name, " is for target ",
                     metadata->target, ", which this client cannot launch"));
  }
  state->parts = std::move(parts);
  return Kernel(std::move(state));
}

absl::Status Kernel::Launch(absl::Span<const runtime::ArgValue> args,
                            void* stream) const {
  if (state_->cpu != nullptr) return state_->cpu->Launch(args);
  if (state_->cuda != nullptr) {
    return state_->cuda->Launch(args,
                                static_cast<runtime::cuda::CUstream>(stream));
  }
  if (state_->hip != nullptr) {
    return state_->hip->Launch(args,
                               static_cast<runtime::hip::hipStream_t>(stream));
  }
  return absl::FailedPreconditionError("kernel has no loaded binary");
}

const std::string& Kernel::key() const { return state_->parts.key; }
const std::string& Kernel::name() const { return metadata().name; }
const std::string& Kernel::target() const { return metadata().target; }
const std::string& Kernel::tier() const { return state_->parts.tier; }
double Kernel::compile_ms() const { return state_->parts.compile_ms; }
const std::string& Kernel::binary() const { return state_->parts.binary; }
const std::string& Kernel::metadata_text() const {
  return state_->parts.metadata;
}
const std::string& Kernel::compile_log() const {
  return state_->parts.compile_log;
}
const runtime::KernelMetadata& Kernel::metadata() const {
  return state_->metadata;
}

}  // namespace kiln::client
