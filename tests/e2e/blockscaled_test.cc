// The block-scaled FP8 GEMM (gemm_fp8_blockscaled.tile, issue 26) against an
// f64 reference of DeepSeek-V3's recipe: per-row scales for every 128
// columns of A, one scale per 128 x 128 block of B. Ragged shapes: M and N
// not multiples of the tile, K not a multiple of 128 (a last group of 32
// columns), and scales that differ per group, so a kernel that applied one
// group's scale to another's products, or scaled once after the K loop,
// fails.
#include <algorithm>
#include <cstdint>

#include "gtest/gtest.h"
#include "tests/e2e/e2e_harness.h"
#include "tests/e2e/references.h"
#include "tests/e2e/tolerance.h"

namespace kiln::e2e {
namespace {

KILN_E2E_COVERS("gemm_fp8_blockscaled.tile", "gemm_fp8_blockscaled");

constexpr int64_t kGroup = 128;

int64_t Groups(int64_t n) { return (n + kGroup - 1) / kGroup; }

// C[i, j] = sum_g (sum_{q in g} A[i, q] B[j, q]) * SA[i, g] * SB[j / 128, g].
Values BlockScaledReference(const Values& a, const Values& b, const Values& sa,
                            const Values& sb, int64_t m, int64_t n, int64_t k) {
  const int64_t kg = Groups(k);
  Values c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t g = 0; g < kg; ++g) {
        double part = 0;
        for (int64_t q = g * kGroup; q < std::min(k, (g + 1) * kGroup); ++q) {
          part += a[i * k + q] * b[j * k + q];
        }
        acc += part * sa[i * kg + g] * sb[(j / kGroup) * kg + g];
      }
      c[i * n + j] = acc;
    }
  }
  return c;
}

class BlockScaledE2eTest : public E2eTest {};

TEST_F(BlockScaledE2eTest, EveryGroupIsScaledByItsOwnRowAndBlockScales) {
  struct Shape {
    int64_t m, n, k;
  };
  for (int64_t bm : {64, 128}) {
    for (Shape s : {Shape{150, 200, 288}, Shape{64, 128, 128}}) {
      SCOPED_TRACE(::testing::Message() << "BM=" << bm << " M=" << s.m
                                        << " N=" << s.n << " K=" << s.k);
      KILN_E2E_LOAD(kernel, "gemm_fp8_blockscaled.tile", "gemm_fp8_blockscaled",
                    {{"BM", bm}});
      HostTensor a = Random(DType::kF8E4M3, {s.m, s.k}, -4, 4);
      HostTensor b = Random(DType::kF8E4M3, {s.n, s.k}, -4, 4);
      HostTensor sa = Random(DType::kF32, {s.m, Groups(s.k)}, 0.01, 1);
      HostTensor sb = Random(DType::kF32, {Groups(s.n), Groups(s.k)}, 0.01, 1);
      HostTensor c(DType::kBF16, {s.m, s.n});
      ASSERT_TRUE(Launch().In(a).In(b).In(sa).In(sb).Out(c).Run(*kernel));
      EXPECT_TRUE(
          AllClose(c,
                   BlockScaledReference(a.Values(), b.Values(), sa.Values(),
                                        sb.Values(), s.m, s.n, s.k),
                   OutputTolerance(DType::kBF16, s.k)));
    }
  }
}

}  // namespace
}  // namespace kiln::e2e
