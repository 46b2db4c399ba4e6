#include "compiler/codegen/cuda/cuda_codegen.h"

#include "compiler/codegen/cuda/device_headers.h"
#include "compiler/codegen/cuda/fragment_plan.h"
#include "compiler/codegen/cuda/kernel_source.h"
#include "compiler/codegen/cuda/nvrtc.h"
#include "compiler/codegen/metadata_writer.h"
#include "compiler/ir/const_fold.h"
#include "compiler/ir/format.h"

namespace kiln::compiler {
namespace {

// Opt-in dynamic shared memory per block, by architecture.
int64_t MaxSharedBytes(std::string_view arch) {
  if (arch == "sm_80") return 163 * 1024;
  if (arch == "sm_90") return 227 * 1024;
  return 99 * 1024;  // sm_86, sm_89
}

}  // namespace

bool IsCudaTarget(std::string_view t) {
  return t == "sm_80" || t == "sm_86" || t == "sm_89" || t == "sm_90" ||
         t == "sm_90a";
}

std::string CudaArch(std::string_view t) {
  return t == "sm_90a" ? "sm_90" : std::string(t);
}

absl::StatusOr<std::string> CudaToolchainIdentity(std::string_view target) {
  auto v = cuda::NvrtcVersion();
  if (!v.ok()) return absl::FailedPreconditionError(v.status().message());
  return StrCat("nvrtc-", *v, " ", CudaArch(target), " kiln-device-",
                cuda::DeviceHeadersHash().substr(0, 16));
}

absl::StatusOr<CudaArtifact> GenerateCudaSource(const Kernel& k,
                                                const CudaCodegenOptions& o) {
  if (!IsCudaTarget(o.target)) {
    return absl::InvalidArgumentError("not a CUDA target: " + o.target);
  }
  auto threads = FoldInt(k.threads);
  if (!threads) {
    return absl::InvalidArgumentError("threads(...) is not a constant");
  }
  const std::string arch = CudaArch(o.target);
  for (const Expr& c : k.cluster) {
    auto v = FoldInt(c);
    if ((!v || *v != 1) && arch != "sm_90") {
      return absl::InvalidArgumentError(
          StrCat(k.loc.line, ":", k.loc.col,
                 ": cluster(...) needs thread "
                 "block clusters (sm_90); the target is ",
                 o.target));
    }
  }
  cuda::FragmentPlan plan = cuda::PlanFragments(k, *threads);
  auto src = cuda::EmitKernelSource(k, plan);
  if (!src.ok()) return src.status();
  if (src->shared_bytes > MaxSharedBytes(arch)) {
    return absl::InvalidArgumentError(
        StrCat("the kernel needs ", src->shared_bytes,
               " bytes of shared memory per block; ", arch, " allows ",
               MaxSharedBytes(arch), " (choose smaller tiles)"));
  }
  CudaArtifact out;
  out.source = std::move(src->source);
  out.entry = src->entry;
  out.shared_bytes = src->shared_bytes;
  for (const auto& [tile, layout] : plan.Describe()) {
    StrAppend(&out.layouts, tile, ": ", layout, "\n");
  }
  MetadataOptions mo;
  mo.target = o.target;
  mo.entry = out.entry;
  mo.shared_bytes = out.shared_bytes;
  auto md = WriteKernelMetadata(k, mo);
  if (!md.ok()) return md.status();
  out.metadata = std::move(*md);
  return out;
}

absl::StatusOr<CudaArtifact> GenerateCuda(const Kernel& k,
                                          const CudaCodegenOptions& o) {
  auto out = GenerateCudaSource(k, o);
  if (!out.ok()) return out.status();
  auto bin = cuda::CompileToCubin(out->source, out->entry + ".cu",
                                  CudaArch(o.target), o.want_ptx);
  if (!bin.ok()) return bin.status();
  out->cubin = std::move(bin->cubin);
  out->ptx = std::move(bin->ptx);
  out->nvrtc_log = std::move(bin->log);
  out->registers = bin->ptxas.registers;
  out->spill_stores = bin->ptxas.spill_stores;
  out->spill_loads = bin->ptxas.spill_loads;
  StrAppend(&out->metadata, "ptxas registers ",
            bin->ptxas.registers < 0 ? 0 : bin->ptxas.registers,
            " spill-stores ", bin->ptxas.spill_stores, " spill-loads ",
            bin->ptxas.spill_loads, " stack ", bin->ptxas.stack_bytes,
            " static-shared ", bin->ptxas.static_shared_bytes, "\n");
  return out;
}

}  // namespace kiln::compiler
