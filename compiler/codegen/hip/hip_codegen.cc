#include "compiler/codegen/hip/hip_codegen.h"

#include <cstdlib>

#include "compiler/codegen/gpu/render.h"
#include "compiler/codegen/hip/device_headers.h"
#include "compiler/codegen/hip/hiprtc.h"
#include "compiler/ir/format.h"
#include "compiler/target.h"

namespace kiln::compiler {
namespace {

// A HIP target of the target table, or nullptr.
const Target* FindArch(std::string_view name) {
  const Target* t = FindTarget(name);
  return t != nullptr && t->kind == TargetKind::kHip ? t : nullptr;
}

// "5.2.21153" -> {5, 2}; {0, 0} when unparsable.
std::pair<int, int> ParseVersion(const std::string& v) {
  char* end = nullptr;
  const long major = std::strtol(v.c_str(), &end, 10);
  long minor = 0;
  if (end && *end == '.') minor = std::strtol(end + 1, nullptr, 10);
  return {static_cast<int>(major), static_cast<int>(minor)};
}

}  // namespace

bool IsHipTarget(std::string_view t) { return FindArch(t) != nullptr; }

const gpu::GpuDialect& HipDialect() {
  static const gpu::GpuDialect* d = [] {
    auto* x = new gpu::GpuDialect;
    x->vendor = "HIP";
    x->wave_size = 64;
    // v_mfma_f32_16x16x16{f16,bf16_1k}: lane l holds rows 4 * (l / 16) + i
    // (i = 0..3) of column l % 16 (kiln/mma.hip.h).
    x->acc = gpu::AccumulatorShape{16, 16, 4, 4, 1, 16};
    x->acc_feeds_a_operand = false;
    x->row_group_reduce = "kiln::row_group_reduce";
    x->device_include = "kiln/kiln.hip.h";
    x->launch_bounds_min_blocks = false;
    x->ring_name = "LDS";
    return x;
  }();
  return *d;
}

absl::Status CheckHipToolchain(std::string_view target) {
  const Target* a = FindArch(target);
  if (!a) {
    return absl::InvalidArgumentError(StrCat("not a HIP target: ", target));
  }
  auto v = hip::HiprtcVersion();
  const std::string needed = StrCat("ROCm ", a->rocm_major, ".", a->rocm_minor);
  if (!v.ok()) {
    return absl::FailedPreconditionError(
        StrCat(v.status().message(), "; ", target, " (", a->products,
               ") needs hiprtc from ", needed, " or newer"));
  }
  const auto [major, minor] = ParseVersion(*v);
  if (major < a->rocm_major ||
      (major == a->rocm_major && minor < a->rocm_minor)) {
    return absl::FailedPreconditionError(
        StrCat("toolchain too old: ", target, " (", a->products,
               ") needs hiprtc from ", needed,
               " or newer; this host's hiprtc is ", *v));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> HipToolchainIdentity(std::string_view target) {
  absl::Status st = CheckHipToolchain(target);
  if (!st.ok()) return st;
  auto v = hip::HiprtcVersion();
  if (!v.ok()) return v.status();
  return StrCat("hiprtc-", *v, " ", target, " kiln-device-",
                hip::DeviceHeadersHash().substr(0, 16));
}

absl::StatusOr<HipArtifact> GenerateHipSource(const Kernel& k,
                                              const HipCodegenOptions& o) {
  if (!IsHipTarget(o.target)) {
    return absl::InvalidArgumentError("not a HIP target: " + o.target);
  }
  gpu::RenderOptions ro;
  ro.target = o.target;
  ro.arch = o.target;
  ro.max_shared_bytes = FindArch(o.target)->max_shared_bytes;
  ro.clusters_need = "thread block clusters, which HIP targets do not have";
  ro.plan = o.plan;
  auto r = gpu::RenderKernel(k, HipDialect(), ro);
  if (!r.ok()) return r.status();
  HipArtifact out;
  static_cast<gpu::RenderedKernel&>(out) = *std::move(r);
  return out;
}

absl::StatusOr<HipArtifact> GenerateHip(const Kernel& k,
                                        const HipCodegenOptions& o) {
  auto out = GenerateHipSource(k, o);
  if (!out.ok()) return out.status();
  // hiprtc 5.2 crashes on architectures it does not know: check first.
  absl::Status st = CheckHipToolchain(o.target);
  if (!st.ok()) return st;
  auto bin =
      hip::CompileToCodeObject(out->source, out->entry + ".hip", o.target);
  if (!bin.ok()) return bin.status();
  out->code_object = std::move(bin->code_object);
  out->hiprtc_log = std::move(bin->log);
  return out;
}

}  // namespace kiln::compiler
