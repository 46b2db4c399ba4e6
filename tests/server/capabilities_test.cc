// Tests of host capabilities and their conversion to the protocol.
#include "server/capabilities.h"

#include <algorithm>

#include "compiler/codegen/hip/hip_codegen.h"
#include "compiler/compile.h"
#include "gtest/gtest.h"
#include "runtime/hip/hip_driver.h"
#include "server/service_core.h"
#include "tests/support/test_kernels.h"

namespace kiln::server {
namespace {

TEST(CapabilitiesTest, AdvertisesOnlyTargetsTheCompilerBuilds) {
  HostCapabilities caps = ProbeHostCapabilities();
  EXPECT_EQ(caps.server_version, KILN_VERSION);
  ASSERT_GE(caps.targets.size(), 1u);
  EXPECT_EQ(caps.targets.front(), (Target{"cpu", Target::Kind::kCpu}));
  // CUDA targets exactly when NVRTC is installed (CI has it), and each one
  // really compiles.
  const bool nvrtc = ProbeNvrtc().ok();
  int cuda = 0;
  for (const Target& t : caps.targets) {
    compiler::CompileOptions options;
    options.target = t.name;
    options.bindings = {{"B", 64}};
    absl::StatusOr<compiler::CompiledKernel> k =
        compiler::Compile(::kiln::testing::kScaleKernel, options);
    EXPECT_TRUE(k.ok()) << t.name << ": " << k.status();
    if (t.kind == Target::Kind::kCuda) ++cuda;
  }
  EXPECT_EQ(cuda > 0, nvrtc);
  // HIP targets exactly when hiprtc can build them (CI: Debian's ROCm 5.2,
  // which knows gfx90a but not gfx942).
  const bool hip = compiler::CheckHipToolchain("gfx90a").ok();
  const auto has = [&](const char* name) {
    return std::find(caps.targets.begin(), caps.targets.end(),
                     Target{name, Target::Kind::kHip}) != caps.targets.end();
  };
  EXPECT_EQ(has("gfx90a"), hip);
  EXPECT_EQ(has("gfx942"), compiler::CheckHipToolchain("gfx942").ok());
  if (nvrtc) {
    EXPECT_NE(std::find(caps.targets.begin(), caps.targets.end(),
                        Target{"sm_90a", Target::Kind::kCuda}),
              caps.targets.end());
  }
}

TEST(CapabilitiesTest, AutoTargetIsTheFirstGpusElseTheCpu) {
  HostCapabilities caps;
  caps.targets = {{"cpu", Target::Kind::kCpu}, {"sm_90a", Target::Kind::kCuda}};
  EXPECT_EQ(ResolveTarget(caps, "auto"), "cpu");
  EXPECT_EQ(ResolveTarget(caps, ""), "cpu");
  caps.gpus.push_back({.index = 0, .name = "NVIDIA H200", .target = "sm_90a"});
  EXPECT_EQ(ResolveTarget(caps, "auto"), "sm_90a");
  EXPECT_EQ(ResolveTarget(caps, "cpu"), "cpu");
  // A GPU the compiler has no target for does not count.
  caps.gpus.front().target = "sm_120";
  EXPECT_EQ(ResolveTarget(caps, "auto"), "cpu");
}

TEST(CapabilitiesTest, NvrtcIsReportedAsAToolchain) {
  HostCapabilities caps = ProbeHostCapabilities();
  absl::StatusOr<NvrtcInfo> nvrtc = ProbeNvrtc();
  EXPECT_EQ(caps.toolchain_versions.count("nvrtc") == 1, nvrtc.ok());
  if (nvrtc.ok() && !nvrtc->archs.empty()) {
    const std::string& archs = caps.toolchain_versions["nvrtc_archs"];
    EXPECT_EQ(archs.rfind("sm_", 0), 0u) << archs;
  }
}

// With libamdhip64 but no AMD GPU (here and in CI): the runtime's version
// is reported, no AMD GPU is.
TEST(CapabilitiesTest, HipRuntimeIsReportedAndItsGpus) {
  HostCapabilities caps = ProbeHostCapabilities();
  absl::StatusOr<const runtime::hip::Driver*> hip = runtime::hip::Driver::Get();
  EXPECT_EQ(caps.toolchain_versions.count("hip_runtime") == 1, hip.ok());
  const int amd_gpus = hip.ok() ? (*hip)->device_count() : 0;
  int gfx = 0;
  for (const GpuInfo& gpu : caps.gpus) {
    if (gpu.target.rfind("gfx", 0) == 0) {
      ++gfx;
      EXPECT_EQ(gpu.sku.rfind("AMD-", 0), 0u) << gpu.sku;
    }
  }
  EXPECT_EQ(gfx, amd_gpus);
}

TEST(CapabilitiesTest, ConvertsToProto) {
  HostCapabilities caps;
  caps.server_version = "1.2.3";
  caps.targets = {{"cpu", Target::Kind::kCpu}, {"sm_90", Target::Kind::kCuda}};
  caps.toolchain_versions = {{"nvrtc", "12.4"}};
  kiln::v1::CapabilitiesResponse response;
  response.set_server_version("stale");
  CapabilitiesToProto(caps, &response);
  EXPECT_EQ(response.server_version(), "1.2.3");
  ASSERT_EQ(response.targets_size(), 2);
  EXPECT_EQ(response.targets(0).name(), "cpu");
  EXPECT_EQ(response.targets(0).kind(), kiln::v1::TARGET_KIND_CPU);
  EXPECT_EQ(response.targets(1).name(), "sm_90");
  EXPECT_EQ(response.targets(1).kind(), kiln::v1::TARGET_KIND_CUDA);
  ASSERT_EQ(response.toolchain_versions().count("nvrtc"), 1u);
  EXPECT_EQ(response.toolchain_versions().at("nvrtc"), "12.4");
}

}  // namespace
}  // namespace kiln::server
