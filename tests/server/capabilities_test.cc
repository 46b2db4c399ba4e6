// Tests of host capabilities and their conversion to the protocol.
#include "server/capabilities.h"

#include "gtest/gtest.h"
#include "server/service_core.h"

namespace kiln::server {
namespace {

TEST(CapabilitiesTest, AdvertisesOnlyTargetsTheCompilerBuilds) {
  HostCapabilities caps = ProbeHostCapabilities();
  EXPECT_EQ(caps.server_version, KILN_VERSION);
  // The CPU back end is the only one so far; CUDA targets must not be
  // advertised before a client can compile for them.
  ASSERT_EQ(caps.targets.size(), 1u);
  EXPECT_EQ(caps.targets.front(), (Target{"cpu", Target::Kind::kCpu}));
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
