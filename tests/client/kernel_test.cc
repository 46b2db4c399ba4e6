// Kernel::Load of GPU handles on a host that cannot run them: a clear
// FailedPrecondition, never a crash. (CPU handles: tests/codegen, tests/e2e.)
#include "client/kernel.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/hip/hip_driver.h"

namespace kiln::client {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A handle for an AMD MI200 (gfx90a); the binary only has to be something:
// nothing loads it without a GPU.
KernelParts Gfx90aHandle() {
  KernelParts parts;
  parts.key = "test-gfx90a";
  parts.binary = std::string(
      "\x7f"
      "ELF",
      4);
  parts.metadata =
      "kiln-kernel 1\n"
      "name fill\n"
      "target gfx90a\n"
      "entry kiln_fill\n"
      "symbols\n"
      "param Y tensor f32 64\n"
      "grid 1 1 1\n"
      "block 64 1 1\n";
  return parts;
}

TEST(KernelLoadTest, HipHandleWithoutAnAmdGpuIsAClearError) {
  auto hip = runtime::hip::Driver::Get();
  if (hip.ok() && (*hip)->device_count() > 0) {
    GTEST_SKIP() << "this host has an AMD GPU (tests/gpu covers it)";
  }
  absl::StatusOr<Kernel> k = Kernel::Load(Gfx90aHandle());
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(k.status().message()), StartsWith("no AMD GPU: "));
}

TEST(KernelLoadTest, UnknownTargetIsRefused) {
  KernelParts parts = Gfx90aHandle();
  parts.metadata.replace(parts.metadata.find("gfx90a"), 6, "tpu_v5");
  absl::StatusOr<Kernel> k = Kernel::Load(parts);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(k.status().message(), HasSubstr("cannot launch"));
}

}  // namespace
}  // namespace kiln::client
