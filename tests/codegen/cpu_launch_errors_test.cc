// Launch-time checks of the CPU runtime against a compiled kernel: every
// mismatch between the arguments and the metadata is an InvalidArgument that
// names the parameter, the dim and the values; loading rejects what is not a
// CPU kernel.
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cpu/cpu_kernel.h"
#include "tests/codegen/cpu_test_util.h"

namespace kiln {
namespace {

using runtime::ArgValue;
using runtime::DType;
using ::testing::HasSubstr;

constexpr char kKernel[] = R"(
kernel mm(A: f16[M, K], B: f16[K, N], C: f32[M, 64], alpha: f32, k2: i32)
  assume K % 64 == 0, k2 > 0
  grid(ceildiv(N, 16), ceildiv(M, 16)) threads(128) (bx, by) {
  if bx == 0 && by == 0 {
    C[0, 0] = alpha * f32(k2) + f32(K)
  }
}
)";

class CpuLaunchErrorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto k = testing::CompileAndLoad(kKernel, {}, &artifact_);
    ASSERT_TRUE(k.ok()) << k.status();
    kernel_ = std::move(*k);
  }

  // A valid launch for M = 32, K = 64, N = 48, to be broken by each test.
  std::vector<ArgValue> Args() {
    return {ArgValue::Tensor(a_.data(), DType::kF16, {32, 64}),
            ArgValue::Tensor(b_.data(), DType::kF16, {64, 48}),
            ArgValue::Tensor(c_.data(), DType::kF32, {32, 64}),
            ArgValue::F32(2.0f), ArgValue::I32(3)};
  }

  std::string Error(const std::vector<ArgValue>& args) {
    absl::Status st = kernel_->Launch(args);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    return std::string(st.message());
  }

  compiler::CpuArtifact artifact_;
  std::unique_ptr<runtime::CpuKernel> kernel_;
  std::vector<uint16_t> a_ = std::vector<uint16_t>(32 * 64);
  std::vector<uint16_t> b_ = std::vector<uint16_t>(64 * 64);
  std::vector<float> c_ = std::vector<float>(64 * 64);
};

TEST_F(CpuLaunchErrorsTest, ValidLaunchRuns) {
  ASSERT_TRUE(kernel_->Launch(Args()).ok());
  EXPECT_EQ(c_[0], 2.0f * 3 + 64);
}

TEST_F(CpuLaunchErrorsTest, EmptyGridRunsNothing) {
  std::vector<ArgValue> args = Args();
  args[0].shape = {0, 64};
  args[2].shape = {0, 64};
  c_[0] = -1;
  ASSERT_TRUE(kernel_->Launch(args).ok());
  EXPECT_EQ(c_[0], -1);
}

TEST_F(CpuLaunchErrorsTest, WrongArgumentCount) {
  std::vector<ArgValue> args = Args();
  args.pop_back();
  EXPECT_EQ(Error(args), "kernel 'mm' takes 5 arguments; got 4");
}

TEST_F(CpuLaunchErrorsTest, WrongDtype) {
  std::vector<ArgValue> args = Args();
  args[0].dtype = DType::kF32;
  EXPECT_EQ(Error(args), "parameter 'A' is f32 but the kernel takes f16");
}

TEST_F(CpuLaunchErrorsTest, WrongRank) {
  std::vector<ArgValue> args = Args();
  args[1].shape = {64 * 48};
  EXPECT_EQ(Error(args), "parameter 'B' has 2 dims but the argument has 1");
}

TEST_F(CpuLaunchErrorsTest, SymbolsMustAgreeAcrossTensors) {
  std::vector<ArgValue> args = Args();
  args[1].shape = {100, 48};
  EXPECT_EQ(Error(args),
            "parameter 'B' dim 0 is 100 but symbol K is 64 from 'A'");
  args = Args();
  args[2].shape = {31, 64};
  EXPECT_EQ(Error(args),
            "parameter 'C' dim 0 is 31 but symbol M is 32 from 'A'");
}

TEST_F(CpuLaunchErrorsTest, ConstantDimsMustMatch) {
  std::vector<ArgValue> args = Args();
  args[2].shape = {32, 32};
  EXPECT_EQ(Error(args),
            "parameter 'C' dim 1 is 32 but the kernel was compiled for 64");
}

TEST_F(CpuLaunchErrorsTest, AssumptionsAreChecked) {
  std::vector<ArgValue> args = Args();
  args[0].shape = {32, 100};
  args[1].shape = {100, 48};
  EXPECT_EQ(Error(args), "assumption 'K % 64 == 0' does not hold: K = 100");
  args = Args();
  args[4] = ArgValue::I32(0);
  EXPECT_EQ(Error(args), "assumption 'k2 > 0' does not hold: k2 = 0");
}

TEST_F(CpuLaunchErrorsTest, TensorAndScalarKindsMustMatch) {
  std::vector<ArgValue> args = Args();
  args[3] = ArgValue::Tensor(c_.data(), DType::kF32, {1});
  EXPECT_EQ(Error(args),
            "parameter 'alpha' is a scalar but the argument is a tensor");
  args = Args();
  args[0] = ArgValue::Scalar(DType::kF16, uint16_t{0});
  EXPECT_EQ(Error(args),
            "parameter 'A' is a tensor but the argument is a scalar");
}

TEST_F(CpuLaunchErrorsTest, NullDataNegativeDimsAndStrides) {
  std::vector<ArgValue> args = Args();
  args[0].data = nullptr;
  EXPECT_THAT(Error(args),
              HasSubstr("parameter 'A' has 2048 elements but no data"));
  args = Args();
  args[1].shape = {64, -1};
  EXPECT_EQ(Error(args), "parameter 'B' dim 1 is -1");
  args = Args();
  args[0].strides = {1, 32};  // column-major: the kernel wants row-major
  EXPECT_EQ(Error(args),
            "parameter 'A' has strides [1, 32] but the kernel expects [64, 1]");
  args = Args();
  args[0].strides = {64, 1};  // row-major, spelled out: fine
  EXPECT_TRUE(kernel_->Launch(args).ok());
}

TEST_F(CpuLaunchErrorsTest, LoadRejectsWhatIsNotACpuKernel) {
  auto not_elf = runtime::CpuKernel::Load("not an elf",
                                          std::string_view(artifact_.metadata));
  EXPECT_EQ(not_elf.status().code(), absl::StatusCode::kInvalidArgument);
  std::string gpu = artifact_.metadata;
  gpu.replace(gpu.find("target cpu"), 10, "target sm_90");
  auto wrong_target =
      runtime::CpuKernel::Load(artifact_.shared_object, std::string_view(gpu));
  EXPECT_EQ(wrong_target.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(wrong_target.status().message(), HasSubstr("'sm_90'"));
  std::string bad_entry = artifact_.metadata;
  bad_entry.replace(bad_entry.find("entry kiln_mm"), 13, "entry nope");
  auto missing = runtime::CpuKernel::Load(artifact_.shared_object,
                                          std::string_view(bad_entry));
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  auto bad_metadata = runtime::CpuKernel::Load(
      artifact_.shared_object, std::string_view("kiln-kernel 2\n"));
  EXPECT_THAT(bad_metadata.status().message(), HasSubstr("version 2"));
}

}  // namespace
}  // namespace kiln
