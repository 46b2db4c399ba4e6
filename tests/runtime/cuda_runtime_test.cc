// The CUDA runtime where there is no usable GPU: every entry point returns a
// clean error (never a crash). CI has no driver; the toolkit's stub
// libcuda.so stands for "a driver library but no GPU". Also the `ptxas`
// metadata record that CUDA handles carry.
#include <filesystem>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/cuda_driver.h"
#include "runtime/cuda/cuda_kernel.h"
#include "runtime/kernel_metadata.h"

namespace kiln::runtime::cuda {
namespace {

using ::testing::HasSubstr;

constexpr char kMetadata[] =
    "kiln-kernel 1\n"
    "name k\n"
    "target sm_90\n"
    "entry kiln_k\n"
    "symbols N\n"
    "param X tensor f32 N\n"
    "grid (ceildiv N 128) 1 1\n"
    "block 128 1 1\n"
    "shared-bytes 0\n"
    "ptxas registers 40 spill-stores 8 spill-loads 4 stack 16 "
    "static-shared 0\n";

TEST(CudaDriverTest, MissingLibraryIsNoDriver) {
  auto d = Driver::LoadFrom("/nonexistent/libcuda.so.1");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(d.status().message(), HasSubstr("no NVIDIA driver"));
}

TEST(CudaDriverTest, StubLibraryIsADriverWithoutGpu) {
  const std::string stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (!std::filesystem::exists(stub)) {
    GTEST_SKIP() << "no CUDA toolkit stub at " << stub;
  }
  auto d = Driver::LoadFrom(stub);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(d.status().message(), HasSubstr("cannot be initialised"));
  EXPECT_THAT(d.status().message(), HasSubstr("cuInit"));
}

// On a host without a usable GPU (CI), discovery, loading and allocation
// all fail cleanly; on a GPU host those paths are the GPU tests' job.
TEST(CudaDriverTest, NoGpuMeansCleanErrorsEverywhere) {
  if (Driver::Get().ok()) {
    GTEST_SKIP() << "this host has a usable CUDA driver (tests/gpu covers it)";
  }
  auto devices = ListDevices();
  ASSERT_FALSE(devices.ok());
  EXPECT_EQ(devices.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(UseDevice(0).ok());
  auto buf = DeviceBuffer::Allocate(1024);
  ASSERT_FALSE(buf.ok());
  EXPECT_EQ(buf.status().code(), absl::StatusCode::kFailedPrecondition);
  auto k = CudaKernel::Load(
      "\x7f"
      "ELF",
      std::string_view(kMetadata));
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(CudaKernelTest, CpuMetadataIsRejectedBeforeTouchingTheDriver) {
  std::string md = kMetadata;
  md.replace(md.find("target sm_90"), 12, "target cpu");
  auto k = CudaKernel::Load("", std::string_view(md));
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(k.status().message(), HasSubstr("not a CUDA target"));
}

TEST(CudaMetadataTest, PtxasRecordIsRead) {
  auto md = ParseKernelMetadata(kMetadata);
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_EQ(md->ptxas.registers, 40);
  EXPECT_EQ(md->ptxas.spill_stores, 8);
  EXPECT_EQ(md->ptxas.spill_loads, 4);
  EXPECT_EQ(md->ptxas.stack_bytes, 16);
}

TEST(CudaMetadataTest, BadPtxasRecordIsAnError) {
  std::string md = kMetadata;
  md += "ptxas registers 1\n";  // a second record
  EXPECT_FALSE(ParseKernelMetadata(md).ok());
  std::string bad = kMetadata;
  bad.replace(bad.find("spill-loads"), 11, "spill-louds");
  auto r = ParseKernelMetadata(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("unknown ptxas key"));
}

// sm_90a kernels fed by TMA take one tensor map per `tensormap` record
// (kernel-handle.md): the parameter, the swizzle span and the box.
TEST(CudaMetadataTest, TensorMapRecordsAreReadInOrder) {
  std::string text = kMetadata;
  text += "tensormap X 128 64\n";
  text += "tensormap X 0 32\n";
  auto md = ParseKernelMetadata(text);
  ASSERT_TRUE(md.ok()) << md.status();
  ASSERT_EQ(md->tensor_maps.size(), 2u);
  EXPECT_EQ(md->tensor_maps[0].param, "X");
  EXPECT_EQ(md->tensor_maps[0].swizzle, 128);
  EXPECT_EQ(md->tensor_maps[0].box, std::vector<int64_t>{64});
  EXPECT_EQ(md->tensor_maps[1].swizzle, 0);
}

TEST(CudaMetadataTest, PersistentRecordTakesNoFieldsAndComesOnce) {
  auto md = ParseKernelMetadata(std::string(kMetadata) + "persistent\n");
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_TRUE(md->persistent);
  EXPECT_FALSE(ParseKernelMetadata(kMetadata)->persistent);
  auto twice =
      ParseKernelMetadata(std::string(kMetadata) + "persistent\npersistent\n");
  ASSERT_FALSE(twice.ok());
  EXPECT_THAT(twice.status().message(), HasSubstr("duplicate 'persistent'"));
  auto fields = ParseKernelMetadata(std::string(kMetadata) + "persistent 1\n");
  ASSERT_FALSE(fields.ok());
  EXPECT_THAT(fields.status().message(), HasSubstr("takes no fields"));
}

TEST(CudaMetadataTest, BadTensorMapRecordsNameTheProblem) {
  auto error = [](const std::string& record) {
    auto md = ParseKernelMetadata(std::string(kMetadata) + record + "\n");
    return md.ok() ? std::string("ok") : std::string(md.status().message());
  };
  EXPECT_THAT(error("tensormap Y 128 64"),
              HasSubstr("tensormap of 'Y', which is not a tensor parameter"));
  EXPECT_THAT(error("tensormap X 128 64 8"),
              HasSubstr("has a box of rank 2; the tensor has rank 1"));
  EXPECT_THAT(error("tensormap X 96 64"), HasSubstr("bad tensormap swizzle"));
  EXPECT_THAT(error("tensormap X 128 512"),
              HasSubstr("bad tensormap box dim '512'"));
  EXPECT_THAT(error("tensormap X 128"), HasSubstr("takes a parameter"));
  // The line number is the record's.
  EXPECT_THAT(error("tensormap Y 128 64"), HasSubstr("line 11:"));
}

}  // namespace
}  // namespace kiln::runtime::cuda
