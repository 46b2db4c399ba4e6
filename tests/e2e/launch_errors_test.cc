#include "compiler/compile.h"
// Launch errors through the whole path (Compile -> CpuKernel::Load ->
// Launch): wrong dtypes, shapes, ranks, argument counts, strides and failed
// assumptions are InvalidArgument errors whose message names the parameter
// or the assumption, and a rejected launch writes nothing.
#include <string>

#include "compiler/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_harness.h"

namespace kiln::e2e {
namespace {

using runtime::ArgValue;
using ::testing::AllOf;
using ::testing::HasSubstr;

class LaunchErrorsE2eTest : public E2eTest {
 protected:
  // Launches with `args` and expects InvalidArgument; `untouched` must keep
  // its poison (the rejected launch ran no block).
  std::string ExpectRejected(const runtime::CpuKernel& kernel,
                             const std::vector<ArgValue>& args,
                             HostTensor& untouched) {
    untouched.Poison();
    const HostTensor before = untouched;
    absl::Status status = kernel.Launch(args);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_TRUE(untouched.SameBytes(before)) << "a rejected launch wrote";
    return std::string(status.message());
  }
};

TEST_F(LaunchErrorsE2eTest, WrongDtypeNamesTheParameter) {
  KILN_E2E_LOAD(kernel, "transpose.tile", "transpose");
  HostTensor in = Random(DType::kF16, {70, 45}, -1, 1);  // bf16 expected
  HostTensor out(DType::kBF16, {45, 70});
  EXPECT_THAT(ExpectRejected(*kernel, {in.Arg(), out.Arg()}, out),
              HasSubstr("parameter 'In' is f16 but the kernel takes bf16"));
}

TEST_F(LaunchErrorsE2eTest, DisagreeingSymbolNamesBothParameters) {
  KILN_E2E_LOAD(kernel, "transpose.tile", "transpose");
  HostTensor in = Random(DType::kBF16, {70, 45}, -1, 1);
  HostTensor out(DType::kBF16, {40, 70});  // N is 45 from In
  EXPECT_THAT(
      ExpectRejected(*kernel, {in.Arg(), out.Arg()}, out),
      HasSubstr("parameter 'Out' dim 0 is 40 but symbol N is 45 from 'In'"));
}

TEST_F(LaunchErrorsE2eTest, WrongRankArgumentCountAndKind) {
  KILN_E2E_LOAD(kernel, "transpose.tile", "transpose");
  HostTensor in = Random(DType::kBF16, {70, 45}, -1, 1);
  HostTensor out(DType::kBF16, {45, 70});
  HostTensor flat(DType::kBF16, {45 * 70});
  EXPECT_THAT(ExpectRejected(*kernel, {in.Arg(), flat.Arg()}, flat),
              HasSubstr("parameter 'Out' has 2 dims but the argument has 1"));
  EXPECT_THAT(ExpectRejected(*kernel, {in.Arg()}, out),
              HasSubstr("kernel 'transpose' takes 2 arguments; got 1"));
  EXPECT_THAT(
      ExpectRejected(*kernel,
                     {in.Arg(), ArgValue::Scalar(DType::kBF16, uint16_t{0})},
                     out),
      HasSubstr("parameter 'Out' is a tensor but the argument is a scalar"));
}

TEST_F(LaunchErrorsE2eTest, ConstantDimMismatchNamesTheCompiledSize) {
  KILN_E2E_LOAD(kernel, "layernorm.tile", "layernorm");
  HostTensor x = Random(DType::kF16, {4, 1000}, -1, 1);  // 1024 expected
  HostTensor gamma = Random(DType::kF16, {1024}, -1, 1);
  HostTensor beta = Random(DType::kF16, {1024}, -1, 1);
  HostTensor y(DType::kF16, {4, 1024});
  EXPECT_THAT(
      ExpectRejected(*kernel, {x.Arg(), gamma.Arg(), beta.Arg(), y.Arg()}, y),
      HasSubstr("parameter 'X' dim 1 is 1000 but the kernel was compiled for "
                "1024"));
}

TEST_F(LaunchErrorsE2eTest, StridesOtherThanTheKernelsAreRejected) {
  KILN_E2E_LOAD(kernel, "batched_gemm.tile", "batched_gemm");
  HostTensor a = Random(DType::kBF16, {2, 64, 32}, -1, 1);
  HostTensor b = Random(DType::kBF16, {2, 32, 64}, -1, 1);  // row-major
  HostTensor c(DType::kF32, {2, 64, 64});
  EXPECT_THAT(ExpectRejected(*kernel, {a.Arg(), b.Arg(), c.Arg()}, c),
              HasSubstr("parameter 'B' has strides [2048, 64, 1] but the "
                        "kernel expects [0, 64, 1]"));
}

TEST_F(LaunchErrorsE2eTest, OddLastDimOfAnI4Tensor) {
  KILN_E2E_LOAD(kernel, "dequant_int4.tile", "dequant_i4");
  HostTensor wq(DType::kI4, {4, 127});
  HostTensor scales = Random(DType::kF16, {4, 1}, 0.1, 1);
  HostTensor w(DType::kF16, {4, 127});
  EXPECT_THAT(ExpectRejected(*kernel, {wq.Arg(), scales.Arg(), w.Arg()}, w),
              HasSubstr("parameter 'Wq' is i4 (two per byte) with an odd "
                        "last dim 127"));
}

TEST_F(LaunchErrorsE2eTest, FailedAssumptionIsNamedWithItsValues) {
  KILN_E2E_LOAD(kernel, "gemm_int8.tile", "gemm_int8");
  const int64_t m = 64, n = 64, k = 100;  // assume K % 16 == 0
  HostTensor at = Random(DType::kI8, {k, m}, -128, 127);
  HostTensor b = Random(DType::kI8, {k, n}, -128, 127);
  HostTensor sa = Random(DType::kF32, {m}, 0.1, 1);
  HostTensor sb = Random(DType::kF32, {n}, 0.1, 1);
  HostTensor c(DType::kF16, {m, n});
  EXPECT_THAT(ExpectRejected(
                  *kernel, {at.Arg(), b.Arg(), sa.Arg(), sb.Arg(), c.Arg()}, c),
              AllOf(HasSubstr("assumption 'K % 16 == 0' does not hold"),
                    HasSubstr("K = 100")));
}

TEST_F(LaunchErrorsE2eTest, FailedAssumptionOverTwoSymbols) {
  KILN_E2E_LOAD(kernel, "dequant_int4.tile", "dequant_i4");
  HostTensor wq = Random(DType::kI4, {4, 256}, -8, 7);
  HostTensor scales = Random(DType::kF16, {4, 3}, 0.1, 1);  // G * 128 != K
  HostTensor w(DType::kF16, {4, 256});
  EXPECT_THAT(ExpectRejected(*kernel, {wq.Arg(), scales.Arg(), w.Arg()}, w),
              AllOf(HasSubstr("assumption 'G * 128 == K' does not hold"),
                    HasSubstr("G = 3"), HasSubstr("K = 256")));
}

// tile-ir.md §4: assumptions over scalar parameters are checked at launch
// too (gemm_fp8: `assume scale_a > 0.0`).
// An assumption over an integer scalar parameter is checked at launch like
// one over a symbol. (Float facts are rejected at compile time: see
// tests/compiler/invalid/132_assume_over_floats.tile.)
TEST_F(LaunchErrorsE2eTest, FailedScalarAssumptionIsNamed) {
  compiler::CompileOptions options;
  options.filename = "shift.tile";
  auto compiled = compiler::Compile(R"(
kernel shift(X: f32[N], Y: f32[N], k: i32)
  assume k >= 0 && k < N
  grid(1) threads(1) (b) {
  alloc fragment T: f32[4]
  copy X[k:+4] -> T
  copy T -> Y[0:+4]
}
)",
                                    options);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto kernel = runtime::CpuKernel::Load(compiled->binary, compiled->metadata);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  HostTensor x = Random(DType::kF32, {8}, -1, 1);
  HostTensor y(DType::kF32, {8});
  EXPECT_THAT(ExpectRejected(**kernel, {x.Arg(), y.Arg(), ArgValue::I32(9)}, y),
              HasSubstr("k >= 0 && k < N"));
  EXPECT_THAT(
      ExpectRejected(**kernel, {x.Arg(), y.Arg(), ArgValue::I32(-1)}, y),
      HasSubstr("k >= 0 && k < N"));
  // A valid k launches (Y[0:4] = X[2:6]).
  EXPECT_TRUE((*kernel)->Launch({x.Arg(), y.Arg(), ArgValue::I32(2)}).ok());
}

}  // namespace
}  // namespace kiln::e2e
