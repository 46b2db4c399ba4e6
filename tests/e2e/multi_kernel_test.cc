// Several kernels loaded at the same time in one process, the way a server
// or a test binary holds them: each must run its own code. Regression tests
// for CpuKernel::Load opening every shared object as /proc/self/fd/N, a path
// that dlopen() matches by name against a library already loaded from the
// same descriptor number (the second kernel then resolves to the first).
#include "gtest/gtest.h"
#include "tests/e2e/e2e_harness.h"
#include "tests/e2e/references.h"
#include "tests/e2e/tolerance.h"

namespace kiln::e2e {
namespace {

class MultiKernelE2eTest : public E2eTest {};

TEST_F(MultiKernelE2eTest, TwoDifferentKernelsLoadedTogether) {
  KILN_E2E_LOAD(transpose, "transpose.tile", "transpose");
  KILN_E2E_LOAD(scan, "inclusive_scan.tile", "segment_suffix_sum");
  HostTensor in = Random(DType::kBF16, {40, 70}, -1, 1);
  HostTensor out(DType::kBF16, {70, 40});
  ASSERT_TRUE(Launch().In(in).Out(out).Run(*transpose));
  EXPECT_TRUE(AllClose(out, TransposeReference(in.Values(), 40, 70), Exact()));
  HostTensor x = Random(DType::kF32, {3, 512}, -1, 1);
  HostTensor y(DType::kF32, {3, 512});
  ASSERT_TRUE(Launch().In(x).Out(y).Run(*scan));
  EXPECT_TRUE(AllClose(y, ScanReference(x.Values(), 3, 512, true),
                       OutputTolerance(DType::kF32, 512)));
}

// The same kernel with two tile sizes: same entry symbol, different code and
// grids. Running the wrong binary leaves blocks of C unwritten.
TEST_F(MultiKernelE2eTest, TwoTuningsOfOneKernelLoadedTogether) {
  KILN_E2E_LOAD(small, "gemm.tile", "gemm", {{"BM", 64}, {"BN", 64}});
  KILN_E2E_LOAD(large, "gemm.tile", "gemm", {{"BM", 128}, {"BN", 128}});
  const int64_t m = 200, n = 200, k = 64;
  HostTensor a = Random(DType::kF16, {m, k}, -1, 1);
  HostTensor b = Random(DType::kF16, {k, n}, -1, 1);
  const Values ref = GemmReference(a.Values(), b.Values(), m, n, k);
  for (const runtime::CpuKernel* kernel : {small, large}) {
    HostTensor c(DType::kF16, {m, n});
    ASSERT_TRUE(Launch().In(a).In(b).Out(c).Run(*kernel));
    EXPECT_TRUE(AllClose(c, ref, OutputTolerance(DType::kF16, k)))
        << (kernel == small ? "BM=BN=64" : "BM=BN=128");
  }
}

}  // namespace
}  // namespace kiln::e2e
