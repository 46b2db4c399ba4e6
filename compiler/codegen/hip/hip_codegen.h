// The HIP target's back end: a specialised kernel (tile ops intact, see
// gpu/kernel_source.h) to HIP C++ through the shared GPU lowering with the
// HIP dialect (64-lane wavefronts, MFMA accumulators, LDS), compiled by
// hiprtc to an AMDGPU code object for one gfx architecture, plus its launch
// metadata (compiler/docs/kernel-handle.md, "HIP target ABI": the CUDA ABI).
// hiprtc is loaded with dlopen (hiprtc.h); no AMD GPU needed.
//
// Targets: gfx90a (MI200 series: MI210, MI250, MI250X) and gfx908 (MI100),
// compiled by any hiprtc (Debian 12's ROCm 5.2 included); gfx942 (MI300X,
// MI300A) needs hiprtc from ROCm 6.0 or newer and is refused, before hiprtc
// is called, by an older one.
#ifndef KILN_COMPILER_CODEGEN_HIP_HIP_CODEGEN_H_
#define KILN_COMPILER_CODEGEN_HIP_HIP_CODEGEN_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/codegen/gpu/gpu_dialect.h"
#include "compiler/codegen/gpu/render.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler {

// gfx908, gfx90a and gfx942.
bool IsHipTarget(std::string_view target);

// What the shared GPU lowering needs to know about HIP on gfx9 MFMA targets:
// 64-lane wavefronts, v_mfma_f32_16x16x16 accumulators, no async copies,
// kiln/kiln.hip.h.
const gpu::GpuDialect& HipDialect();

// OK when this host's hiprtc can compile for `target`; FailedPrecondition
// naming the ROCm version needed otherwise ("toolchain too old: gfx942
// (MI300X) needs hiprtc from ROCm 6.0 or newer; this host's hiprtc is
// 5.2.21153"),
// or when hiprtc is not installed.
absl::Status CheckHipToolchain(std::string_view target);

struct HipCodegenOptions {
  std::string target = "gfx90a";
  // The kernel's plan from the pipeline (gpu/render.h); null: planned here.
  const gpu::KernelPlan* plan = nullptr;
};

// The rendered kernel (source: the generated HIP C++; entry, metadata,
// layouts, shared_bytes) and what hiprtc made of it.
struct HipArtifact : gpu::RenderedKernel {
  std::string code_object;  // AMDGPU ELF code object for the target
  std::string hiprtc_log;   // warnings
};

// Compiles `specialized` for `options.target`. InvalidArgument for kernels
// the target cannot hold (LDS over 64 KiB, thread block clusters) and for
// generated source hiprtc rejects (its log, tied to the generated lines);
// FailedPrecondition when hiprtc is not installed or too old for the
// target; Unimplemented for constructs without a GPU lowering.
absl::StatusOr<HipArtifact> GenerateHip(const Kernel& specialized,
                                        const HipCodegenOptions& options);

// The HIP source and metadata only (no hiprtc): for tests and hosts without
// hiprtc.
absl::StatusOr<HipArtifact> GenerateHipSource(const Kernel& specialized,
                                              const HipCodegenOptions& o);

// "hiprtc-5.2.21153 gfx90a kiln-device-<hash>": hiprtc (ROCm) version,
// architecture and
// the HIP device-library hash. CheckHipToolchain's errors.
absl::StatusOr<std::string> HipToolchainIdentity(std::string_view target);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_CODEGEN_HIP_HIP_CODEGEN_H_
