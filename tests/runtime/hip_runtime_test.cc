// The HIP runtime without an AMD GPU (no GPU here or in CI): a missing
// library and a library that sees no GPU are clean results, never crashes;
// the pure pieces of discovery (gfx arch, SKU string, hipDeviceProp_t
// layouts) are checked with fake properties. Tests that need an AMD GPU
// skip, saying so.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/gpu_sku.h"
#include "runtime/hip/hip_device.h"
#include "runtime/hip/hip_driver.h"
#include "runtime/hip/hip_kernel.h"

// ROCm's own header, where installed, to check the layout offsets against.
#if __has_include(<hip/hip_runtime_api.h>)
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>
#define KILN_HAVE_HIP_HEADERS 1
#endif

namespace kiln::runtime::hip {
namespace {

using ::testing::HasSubstr;

constexpr char kMetadata[] =
    "kiln-kernel 1\n"
    "name k\n"
    "target gfx90a\n"
    "entry kiln_k\n"
    "symbols N\n"
    "param X tensor f32 N\n"
    "grid (ceildiv N 256) 1 1\n"
    "block 256 1 1\n"
    "shared-bytes 0\n";

TEST(HipDriverTest, MissingLibraryIsNoHipRuntime) {
  auto d = Driver::LoadFrom("/nonexistent/libamdhip64.so.5");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(d.status().message(), HasSubstr("no HIP runtime"));
  EXPECT_THAT(d.status().message(), HasSubstr("/nonexistent/libamdhip64.so.5"));
}

TEST(HipDriverTest, LibraryWithoutHipIsNoHipRuntime) {
  auto d = Driver::LoadFrom("libc.so.6");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(d.status().message(), HasSubstr("lacks hipInit"));
}

// Driver::Get() is once per process, so the environment variable is tested
// in a fresh one (the threadsafe death-test style re-runs this binary).
TEST(HipDriverDeathTest, EnvironmentVariableChoosesTheLibrary) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv(kHipLibraryEnv, "/nonexistent/libamdhip64-test.so", 1);
        auto devices = ListDevices();
        std::fprintf(stderr, "%s\n", devices.status().ToString().c_str());
        std::exit(!devices.ok() && devices.status().code() ==
                                       absl::StatusCode::kFailedPrecondition
                      ? 0
                      : 1);
      },
      ::testing::ExitedWithCode(0),
      "no HIP runtime: cannot load /nonexistent/libamdhip64-test.so");
}

// A host with libamdhip64 but no AMD GPU (ROCm 5.2 here: hipInit says
// hipErrorInvalidDevice, hipGetDeviceCount hipErrorNoDevice).
TEST(HipDriverTest, RuntimeWithoutGpuListsNoDevices) {
  auto d = Driver::Get();
  if (!d.ok()) GTEST_SKIP() << "no HIP runtime here: " << d.status();
  if ((*d)->device_count() > 0) {
    GTEST_SKIP() << "this host has an AMD GPU (tests/gpu covers it)";
  }
  EXPECT_THAT((*d)->no_device_reason(), HasSubstr("hip"));
  EXPECT_THAT((*d)->version_string(),
              ::testing::MatchesRegex("[0-9]+\\.[0-9]+"));
  auto devices = ListDevices();
  ASSERT_TRUE(devices.ok()) << devices.status();
  EXPECT_TRUE(devices->empty());
  auto dev = UseDevice(0);
  ASSERT_FALSE(dev.ok());
  EXPECT_EQ(dev.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(dev.status().message(), HasSubstr("no AMD GPU"));
}

TEST(HipKernelTest, LoadWithoutGpuIsACleanError) {
  auto d = Driver::Get();
  if (d.ok() && (*d)->device_count() > 0) {
    GTEST_SKIP() << "this host has an AMD GPU (tests/gpu covers it)";
  }
  auto k = HipKernel::Load(
      "\x7f"
      "ELF",
      std::string_view(kMetadata));
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(k.status().message()),
              ::testing::StartsWith("no AMD GPU: "));
}

TEST(HipKernelTest, NonGfxMetadataIsRejectedBeforeTouchingTheRuntime) {
  std::string md = kMetadata;
  md.replace(md.find("target gfx90a"), 13, "target sm_90");
  auto k = HipKernel::Load("", std::string_view(md));
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(k.status().message(), HasSubstr("not a HIP target"));
}

TEST(HipDeviceTest, GfxArchDropsTargetFeatures) {
  EXPECT_EQ(GfxArch("gfx90a:sramecc+:xnack-"), "gfx90a");
  EXPECT_EQ(GfxArch("gfx942"), "gfx942");
  EXPECT_EQ(GfxArch(""), "");
}

TEST(HipDeviceTest, SkuString) {
  struct Case {
    const char* name;
    const char* arch;
    int cus;
    const char* sku;
  };
  const Case cases[] = {
      {"AMD Instinct MI250X", "gfx90a", 110, "AMD-Instinct-MI250X-110CU"},
      {"AMD Instinct MI300X", "gfx942", 304, "AMD-Instinct-MI300X-304CU"},
      {"Radeon RX 7900 XTX", "gfx1100", 96, "AMD-Radeon-RX-7900-XTX-96CU"},
      {"  AMD  Instinct\tMI210 ", "gfx90a", 104, "AMD-Instinct-MI210-104CU"},
      {"", "gfx942", 304, "AMD-gfx942-304CU"},
      {"   ", "gfx90a", 110, "AMD-gfx90a-110CU"},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(HipSku(c.name, c.arch, c.cus), c.sku) << "'" << c.name << "'";
  }
  DeviceInfo info;
  info.name = "AMD Instinct MI250X";
  info.gcn_arch_name = "gfx90a:sramecc+:xnack-";
  info.compute_units = 110;
  EXPECT_EQ(info.arch(), "gfx90a");
  EXPECT_EQ(info.sku(), "AMD-Instinct-MI250X-110CU");
}

TEST(GpuSkuTest, SpacesBecomeDashesThenTheUnitCount) {
  EXPECT_EQ(GpuSku("NVIDIA H200", 132, "SM"), "NVIDIA-H200-132SM");
  EXPECT_EQ(GpuSku("AMD Instinct MI250X", 110, "CU"),
            "AMD-Instinct-MI250X-110CU");
}

// A fake hipDeviceProp_t: `cus` and `arch` where `layout` keeps them
// (offsets from ROCm 5.2's and 6.x's hip_runtime_api.h).
std::string FakeProps(PropsLayout layout, int cus, const char* arch) {
  std::string props(kPropsBufferSize, '\0');
  const size_t cus_at = layout == PropsLayout::kR0600 ? 388 : 336;
  const size_t arch_at = layout == PropsLayout::kR0600 ? 1160 : 396;
  std::memcpy(&props[cus_at], &cus, sizeof(cus));
  std::memcpy(&props[arch_at], arch, std::strlen(arch));
  return props;
}

const unsigned char* Bytes(const std::string& s) {
  return reinterpret_cast<const unsigned char*>(s.data());
}

TEST(HipDeviceTest, GcnArchNameFromEitherPropsLayout) {
  for (PropsLayout layout : {PropsLayout::kR0000, PropsLayout::kR0600}) {
    std::string props = FakeProps(layout, 110, "gfx90a:sramecc+:xnack-");
    auto name = GcnArchNameFromProps(Bytes(props), layout, 110);
    ASSERT_TRUE(name.ok()) << name.status();
    EXPECT_EQ(*name, "gfx90a:sramecc+:xnack-");
  }
}

TEST(HipDeviceTest, PropsOfAnotherLayoutAreRefused) {
  // R0600 props read as R0000: the CU count is not where R0000 keeps it.
  std::string props = FakeProps(PropsLayout::kR0600, 110, "gfx90a");
  auto name = GcnArchNameFromProps(Bytes(props), PropsLayout::kR0000, 110);
  ASSERT_FALSE(name.ok());
  EXPECT_EQ(name.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(name.status().message(), HasSubstr("layout mismatch"));
  // Right CU count, but no gfx name where it should be.
  props = FakeProps(PropsLayout::kR0000, 110, "Vega 20");
  name = GcnArchNameFromProps(Bytes(props), PropsLayout::kR0000, 110);
  ASSERT_FALSE(name.ok());
  EXPECT_THAT(name.status().message(), HasSubstr("not a gfx name"));
}

#ifdef KILN_HAVE_HIP_HEADERS
// The offsets Kiln assumes agree with the installed ROCm's own struct.
TEST(HipDeviceTest, PropsOffsetsMatchTheInstalledHeader) {
  static_assert(sizeof(hipDeviceProp_t) <= kPropsBufferSize);
  std::string props(kPropsBufferSize, '\0');
  auto* p = reinterpret_cast<hipDeviceProp_t*>(props.data());
  p->multiProcessorCount = 104;
  std::strcpy(p->gcnArchName, "gfx90a:sramecc+:xnack-");
  const PropsLayout layout =
      HIP_VERSION_MAJOR >= 6 ? PropsLayout::kR0600 : PropsLayout::kR0000;
  auto name = GcnArchNameFromProps(Bytes(props), layout, 104);
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(*name, "gfx90a:sramecc+:xnack-");
}
#endif

}  // namespace
}  // namespace kiln::runtime::hip
