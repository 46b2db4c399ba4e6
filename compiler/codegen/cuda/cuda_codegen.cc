#include "compiler/codegen/cuda/cuda_codegen.h"

#include "compiler/codegen/cuda/device_headers.h"
#include "compiler/codegen/cuda/nvrtc.h"
#include "compiler/codegen/gpu/kernel_plan.h"
#include "compiler/codegen/gpu/render.h"
#include "compiler/ir/format.h"
#include "compiler/target.h"

namespace kiln::compiler {

bool IsCudaTarget(std::string_view t) {
  const Target* target = FindTarget(t);
  return target != nullptr && target->kind == TargetKind::kCuda;
}

std::string CudaArch(std::string_view t) { return std::string(t); }

const gpu::GpuDialect& CudaDialect(std::string_view target) {
  static const gpu::GpuDialect* d = [] {
    auto* x = new gpu::GpuDialect;
    x->vendor = "CUDA";
    x->wave_size = 32;
    // mma.sync m16n8k16: lane l holds rows l/4 and l/4 + 8, columns
    // 2 * (l % 4) + {0, 1} (kiln/mma.cuh).
    x->acc = gpu::AccumulatorShape{16, 8, 4, 2, 2, 4};
    x->acc_feeds_a_operand = true;
    x->row_group_reduce = "kiln::quad_reduce";
    x->device_include = "kiln/kiln.cuh";
    x->launch_bounds_min_blocks = true;
    x->ring_name = "cp.async";
    x->whole_tile_loops = true;
    x->acc_pair_stores = true;
    return x;
  }();
  // Targets with wgmma and TMA (the target table's sm_90a).
  static const gpu::GpuDialect* hopper = [] {
    auto* x = new gpu::GpuDialect(*d);
    x->warpgroup_mma = true;
    x->tma = true;
    x->max_shared_bytes = FindTarget("sm_90a")->max_shared_bytes;
    return x;
  }();
  const Target* t = FindTarget(target);
  return t != nullptr && t->warpgroup_mma && t->tma ? *hopper : *d;
}

absl::StatusOr<std::string> CudaToolchainIdentity(std::string_view target) {
  auto v = cuda::NvrtcVersion();
  if (!v.ok()) return absl::FailedPreconditionError(v.status().message());
  return StrCat("nvrtc-", *v, " ", CudaArch(target), " kiln-device-",
                cuda::DeviceHeadersHash().substr(0, 16));
}

namespace {

// What GenerateCuda may change in the plan after ptxas spilled.
struct Respill {
  int producer_regs = 0;  // > 0: the warp-specialised producer's registers
  bool warp_specialise = true;
};

// GenerateCudaSource with the plan changed as `respill` says.
absl::StatusOr<CudaArtifact> RenderCuda(const Kernel& k,
                                        const CudaCodegenOptions& o,
                                        const Respill& respill) {
  if (!IsCudaTarget(o.target)) {
    return absl::InvalidArgumentError("not a CUDA target: " + o.target);
  }
  const std::string arch = CudaArch(o.target);
  const Target& t = *FindTarget(o.target);
  gpu::RenderOptions ro;
  ro.target = o.target;
  ro.arch = arch;
  ro.max_shared_bytes = t.max_shared_bytes;
  if (!t.clusters) ro.clusters_need = "thread block clusters (sm_90)";
  ro.plan = o.plan;
  ro.producer_regs = respill.producer_regs;
  ro.warp_specialise = respill.warp_specialise;
  auto r = gpu::RenderKernel(k, CudaDialect(o.target), ro);
  if (!r.ok()) return r.status();
  CudaArtifact out;
  static_cast<gpu::RenderedKernel&>(out) = *std::move(r);
  return out;
}

}  // namespace

absl::StatusOr<CudaArtifact> GenerateCudaSource(const Kernel& k,
                                                const CudaCodegenOptions& o) {
  return RenderCuda(k, o, Respill{});
}

absl::StatusOr<CudaArtifact> GenerateCuda(const Kernel& k,
                                          const CudaCodegenOptions& o) {
  auto out = RenderCuda(k, o, Respill{});
  if (!out.ok()) return out.status();
  auto bin = cuda::CompileToCubin(out->source, out->entry + ".cu",
                                  CudaArch(o.target), o.want_ptx);
  if (!bin.ok()) return bin.status();
  // Where ptxas spilled a warp-specialised kernel, it is compiled again,
  // first with the producer (one thread issuing TMA) giving back all the
  // registers it can (MLA decode: 24 bytes of spills at 232 registers per
  // consumer thread, none at 240), then without the producer (one 128-row
  // attention warpgroup with P in shared memory spills 100 bytes beside
  // its producer, none on its own); the version with the fewest spill
  // stores is kept.
  auto retry = [&](const Respill& r) -> absl::Status {
    auto again = RenderCuda(k, o, r);
    if (!again.ok()) return again.status();
    auto bin2 = cuda::CompileToCubin(again->source, again->entry + ".cu",
                                     CudaArch(o.target), o.want_ptx);
    if (!bin2.ok()) return bin2.status();
    if (bin2->ptxas.spill_stores < bin->ptxas.spill_stores) {
      out = std::move(again);
      bin = std::move(bin2);
    }
    return absl::OkStatus();
  };
  if (bin->ptxas.spill_stores > 0 &&
      out->producer_regs > gpu::kMinProducerRegs) {
    if (absl::Status st = retry(Respill{gpu::kMinProducerRegs, true});
        !st.ok()) {
      return st;
    }
  }
  if (bin->ptxas.spill_stores > 0 && out->warp_specialised) {
    if (absl::Status st = retry(Respill{0, false}); !st.ok()) return st;
  }
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
