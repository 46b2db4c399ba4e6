// End-to-end tests of the GEMM-like corpus kernels on the CPU: the first
// valid tunables and at least one other combination each, on shapes that are
// multiples of the tiles and ragged ones, including the 1000^3 GEMM with
// 128 x 128 tiles. Each test uses one compiled configuration (so a failure
// names it).
#include "gtest/gtest.h"
#include "tests/e2e/e2e_harness.h"
#include "tests/e2e/references.h"
#include "tests/e2e/tolerance.h"

namespace kiln::e2e {
namespace {

using runtime::ArgValue;

KILN_E2E_COVERS("gemm.tile", "gemm");
KILN_E2E_COVERS("batched_gemm.tile", "batched_gemm");
KILN_E2E_COVERS("gemm_bias_gelu.tile", "gemm_bias_gelu");
KILN_E2E_COVERS("gemm_fp8.tile", "gemm_fp8");
KILN_E2E_COVERS("gemm_int8.tile", "gemm_int8");
KILN_E2E_COVERS("gemm_splitk.tile", "gemm_splitk");
KILN_E2E_COVERS("gemm_w4a16.tile", "gemm_w4a16");

struct Mnk {
  int64_t m, n, k;
};

class GemmE2eTest : public E2eTest {
 protected:
  // gemm.tile: f16 A [M, K] @ B [K, N] -> f16 C.
  void RunGemm(const Bindings& fixed, Mnk s) {
    SCOPED_TRACE(::testing::Message()
                 << "M=" << s.m << " N=" << s.n << " K=" << s.k);
    KILN_E2E_LOAD(kernel, "gemm.tile", "gemm", fixed);
    HostTensor a = Random(DType::kF16, {s.m, s.k}, -1, 1);
    HostTensor b = Random(DType::kF16, {s.k, s.n}, -1, 1);
    HostTensor c(DType::kF16, {s.m, s.n});
    ASSERT_TRUE(Launch().In(a).In(b).Out(c).Run(*kernel));
    EXPECT_TRUE(AllClose(c,
                         GemmReference(a.Values(), b.Values(), s.m, s.n, s.k),
                         OutputTolerance(DType::kF16, s.k)));
  }

  // batched_gemm.tile: bf16 A [BATCH, M, K] @ B [K, N] (batch stride 0).
  void RunBatchedGemm(const Bindings& fixed, int64_t batch, Mnk s) {
    SCOPED_TRACE(::testing::Message() << "BATCH=" << batch << " M=" << s.m
                                      << " N=" << s.n << " K=" << s.k);
    KILN_E2E_LOAD(kernel, "batched_gemm.tile", "batched_gemm", fixed);
    HostTensor a = Random(DType::kBF16, {batch, s.m, s.k}, -1, 1);
    HostTensor b = Random(DType::kBF16, {batch, s.k, s.n}, -1, 1, {0, s.n, 1});
    HostTensor c(DType::kF32, {batch, s.m, s.n});
    ASSERT_TRUE(Launch().In(a).In(b).Out(c).Run(*kernel));
    EXPECT_TRUE(AllClose(
        c, BatchedGemmReference(a.Values(), b.Values(), batch, s.m, s.n, s.k),
        OutputTolerance(DType::kF32, s.k)));
  }

  void RunGemmBiasGelu(const Bindings& fixed, Mnk s) {
    SCOPED_TRACE(::testing::Message()
                 << "M=" << s.m << " N=" << s.n << " K=" << s.k);
    KILN_E2E_LOAD(kernel, "gemm_bias_gelu.tile", "gemm_bias_gelu", fixed);
    HostTensor a = Random(DType::kF16, {s.m, s.k}, -1, 1);
    HostTensor w = Random(DType::kF16, {s.n, s.k}, -0.5, 0.5);
    HostTensor bias = Random(DType::kF16, {s.n}, -2, 2);
    HostTensor c(DType::kF16, {s.m, s.n});
    ASSERT_TRUE(Launch().In(a).In(w).In(bias).Out(c).Run(*kernel));
    EXPECT_TRUE(AllClose(c,
                         GemmBiasGeluReference(a.Values(), w.Values(),
                                               bias.Values(), s.m, s.n, s.k),
                         OutputTolerance(DType::kF16, s.k)));
  }

  void RunGemmFp8(const Bindings& fixed, Mnk s) {
    SCOPED_TRACE(::testing::Message()
                 << "M=" << s.m << " N=" << s.n << " K=" << s.k);
    KILN_E2E_LOAD(kernel, "gemm_fp8.tile", "gemm_fp8", fixed);
    HostTensor a = Random(DType::kF8E4M3, {s.m, s.k}, -4, 4);
    HostTensor b = Random(DType::kF8E4M3, {s.n, s.k}, -4, 4);
    HostTensor c(DType::kBF16, {s.m, s.n});
    const float scale_a = 0.375f, scale_b = 0.0625f;
    ASSERT_TRUE(Launch()
                    .In(a)
                    .In(b)
                    .Out(c)
                    .Scalar(ArgValue::F32(scale_a))
                    .Scalar(ArgValue::F32(scale_b))
                    .Run(*kernel));
    EXPECT_TRUE(AllClose(c,
                         GemmFp8Reference(a.Values(), b.Values(), scale_a,
                                          scale_b, s.m, s.n, s.k),
                         OutputTolerance(DType::kBF16, s.k)));
  }

  void RunGemmInt8(const Bindings& fixed, Mnk s) {
    SCOPED_TRACE(::testing::Message()
                 << "M=" << s.m << " N=" << s.n << " K=" << s.k);
    KILN_E2E_LOAD(kernel, "gemm_int8.tile", "gemm_int8", fixed);
    HostTensor at = Random(DType::kI8, {s.k, s.m}, -128, 127);
    HostTensor b = Random(DType::kI8, {s.k, s.n}, -128, 127);
    HostTensor scale_a = Random(DType::kF32, {s.m}, 1e-3, 1e-2);
    HostTensor scale_b = Random(DType::kF32, {s.n}, 1e-3, 1e-2);
    HostTensor c(DType::kF16, {s.m, s.n});
    ASSERT_TRUE(
        Launch().In(at).In(b).In(scale_a).In(scale_b).Out(c).Run(*kernel));
    // i32 accumulation is exact: only the f32 scaling and the f16 store round.
    EXPECT_TRUE(
        AllClose(c,
                 GemmInt8Reference(at.Values(), b.Values(), scale_a.Values(),
                                   scale_b.Values(), s.m, s.n, s.k),
                 OutputTolerance(DType::kF16)));
  }

  // gemm_splitk.tile adds into C: start from random values, not zeros.
  void RunGemmSplitK(const Bindings& fixed, Mnk s) {
    SCOPED_TRACE(::testing::Message()
                 << "M=" << s.m << " N=" << s.n << " K=" << s.k);
    KILN_E2E_LOAD(kernel, "gemm_splitk.tile", "gemm_splitk", fixed);
    HostTensor a = Random(DType::kF16, {s.m, s.k}, -1, 1);
    HostTensor b = Random(DType::kF16, {s.k, s.n}, -1, 1);
    HostTensor c = Random(DType::kF32, {s.m, s.n}, -10, 10);
    const Values c0 = c.Values();
    ASSERT_TRUE(Launch().In(a).In(b).InOut(c).Run(*kernel));
    EXPECT_TRUE(AllClose(
        c, GemmSplitKReference(a.Values(), b.Values(), c0, s.m, s.n, s.k),
        OutputTolerance(DType::kF32, s.k)));
  }

  void RunGemmW4A16(const Bindings& fixed, Mnk s) {
    SCOPED_TRACE(::testing::Message()
                 << "M=" << s.m << " N=" << s.n << " K=" << s.k);
    KILN_E2E_LOAD(kernel, "gemm_w4a16.tile", "gemm_w4a16", fixed);
    const int64_t groups = s.k / 128;
    HostTensor a = Random(DType::kF16, {s.m, s.k}, -1, 1);
    HostTensor wq = Random(DType::kU4, {s.n, s.k}, 0, 15);
    HostTensor scales = Random(DType::kF16, {s.n, groups}, 0.01, 0.1);
    HostTensor c(DType::kF16, {s.m, s.n});
    ASSERT_TRUE(Launch().In(a).In(wq).In(scales).Out(c).Run(*kernel));
    EXPECT_TRUE(AllClose(c,
                         GemmW4A16Reference(a.Values(), wq.Values(),
                                            scales.Values(), s.m, s.n, s.k),
                         OutputTolerance(DType::kF16, s.k)));
  }
};

TEST_F(GemmE2eTest, GemmTileMultiples) { RunGemm({}, {128, 192, 256}); }

TEST_F(GemmE2eTest, GemmRaggedShapes) {
  for (Mnk s :
       {Mnk{1, 1, 1}, Mnk{7, 33, 1}, Mnk{33, 7, 65}, Mnk{65, 129, 97}}) {
    RunGemm({}, s);
  }
}

// The required large case: 1000^3 (ragged against 128) with 128 x 128 tiles.
TEST_F(GemmE2eTest, Gemm1000Cubed128x128Tiles) {
  RunGemm({{"BM", 128}, {"BN", 128}}, {1000, 1000, 1000});
}

TEST_F(GemmE2eTest, GemmTallTiles) {
  RunGemm({{"BM", 256}, {"BN", 128}, {"BK", 64}}, {300, 200, 200});
}

TEST_F(GemmE2eTest, GemmWideTilesFourStages) {
  RunGemm({{"BM", 64}, {"BN", 256}, {"BK", 32}, {"STAGES", 4}}, {70, 300, 130});
}

TEST_F(GemmE2eTest, BatchedGemmSharedWeight) {
  RunBatchedGemm({}, 3, {70, 130, 45});
  RunBatchedGemm({}, 1, {64, 64, 64});
}

TEST_F(GemmE2eTest, BatchedGemmLargeTiles) {
  RunBatchedGemm({{"BM", 128}, {"BN", 128}, {"BK", 64}}, 2, {129, 200, 130});
}

TEST_F(GemmE2eTest, GemmBiasGelu) {
  RunGemmBiasGelu({}, {100, 130, 70});
  RunGemmBiasGelu({}, {1, 7, 33});
}

TEST_F(GemmE2eTest, GemmBiasGeluLargeTiles) {
  RunGemmBiasGelu({{"BM", 128}, {"BN", 128}, {"BK", 64}}, {256, 128, 192});
}

TEST_F(GemmE2eTest, GemmFp8) {
  RunGemmFp8({}, {130, 200, 160});
  RunGemmFp8({}, {1, 7, 16});
}

TEST_F(GemmE2eTest, GemmFp8WideTiles) {
  RunGemmFp8({{"BN", 256}, {"STAGES", 4}}, {64, 300, 256});
}

TEST_F(GemmE2eTest, GemmInt8) {
  RunGemmInt8({}, {70, 100, 96});
  RunGemmInt8({}, {1, 7, 16});
}

TEST_F(GemmE2eTest, GemmInt8LargeTiles) {
  RunGemmInt8({{"BM", 128}, {"BN", 128}, {"BK", 128}}, {129, 130, 256});
}

TEST_F(GemmE2eTest, GemmSplitKTallSkinny) {
  RunGemmSplitK({}, {33, 70, 1000});
  RunGemmSplitK({}, {1, 1, 1});
}

// 16 splits of a 2-tile K: most splits are empty and must add nothing.
TEST_F(GemmE2eTest, GemmSplitKMoreSplitsThanTiles) {
  RunGemmSplitK({{"BM", 128}, {"BN", 128}, {"SPLIT", 16}}, {20, 100, 40});
}

TEST_F(GemmE2eTest, GemmW4A16) {
  RunGemmW4A16({}, {5, 100, 256});
  RunGemmW4A16({}, {1, 1, 128});
}

TEST_F(GemmE2eTest, GemmW4A16LargeTiles) {
  RunGemmW4A16({{"BM", 64}, {"BN", 128}, {"BK", 128}, {"STAGES", 3}},
               {70, 130, 384});
}

}  // namespace
}  // namespace kiln::e2e
