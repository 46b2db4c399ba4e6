// End-to-end tests of the normalisation, reduction, scan and loss kernels on
// the CPU: rmsnorm (4097 columns), layernorm (its hidden size is fixed at
// 1024 by the program), softmax, row_stats, col_sum_f64, the scans,
// cross_entropy and huber_loss; each with its first valid tunables and
// another combination, on ragged and tile-multiple shapes.
#include <cmath>

#include "gtest/gtest.h"
#include "tests/e2e/e2e_harness.h"
#include "tests/e2e/references.h"
#include "tests/e2e/tolerance.h"

namespace kiln::e2e {
namespace {

using runtime::ArgValue;

KILN_E2E_COVERS("rmsnorm.tile", "rmsnorm");
KILN_E2E_COVERS("layernorm.tile", "layernorm");
KILN_E2E_COVERS("softmax.tile", "softmax");
KILN_E2E_COVERS("row_reduce.tile", "row_stats");
KILN_E2E_COVERS("row_reduce.tile", "col_sum_f64");
KILN_E2E_COVERS("inclusive_scan.tile", "inclusive_scan");
KILN_E2E_COVERS("inclusive_scan.tile", "segment_suffix_sum");
KILN_E2E_COVERS("losses.tile", "cross_entropy");
KILN_E2E_COVERS("losses.tile", "huber_loss");

struct Mn {
  int64_t m, n;
};

class NormsE2eTest : public E2eTest {
 protected:
  void RunRmsNorm(const Bindings& fixed, Mn s) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n);
    KILN_E2E_LOAD(kernel, "rmsnorm.tile", "rmsnorm", fixed);
    HostTensor x = Random(DType::kBF16, {s.m, s.n}, -2, 2);
    HostTensor w = Random(DType::kBF16, {s.n}, 0.5, 1.5);
    HostTensor y(DType::kBF16, {s.m, s.n});
    const float eps = 1e-6f;
    ASSERT_TRUE(
        Launch().In(x).In(w).Out(y).Scalar(ArgValue::F32(eps)).Run(*kernel));
    EXPECT_TRUE(
        AllClose(y, RmsNormReference(x.Values(), w.Values(), eps, s.m, s.n),
                 OutputTolerance(DType::kBF16, s.n)));
  }

  void RunLayerNorm(const Bindings& fixed, int64_t m) {
    constexpr int64_t kN = 1024;
    SCOPED_TRACE(::testing::Message() << "M=" << m);
    KILN_E2E_LOAD(kernel, "layernorm.tile", "layernorm", fixed);
    HostTensor x = Random(DType::kF16, {m, kN}, -3, 5);
    HostTensor gamma = Random(DType::kF16, {kN}, 0.5, 1.5);
    HostTensor beta = Random(DType::kF16, {kN}, -1, 1);
    HostTensor y(DType::kF16, {m, kN});
    ASSERT_TRUE(Launch().In(x).In(gamma).In(beta).Out(y).Run(*kernel));
    EXPECT_TRUE(AllClose(y,
                         LayerNormReference(x.Values(), gamma.Values(),
                                            beta.Values(), 1e-5f, m, kN),
                         OutputTolerance(DType::kF16, kN)));
  }

  void RunSoftmax(const Bindings& fixed, Mn s) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n);
    KILN_E2E_LOAD(kernel, "softmax.tile", "softmax", fixed);
    HostTensor x = Random(DType::kF16, {s.m, s.n}, -4, 4);
    HostTensor y(DType::kF16, {s.m, s.n});
    ASSERT_TRUE(Launch().In(x).Out(y).Run(*kernel));
    EXPECT_TRUE(AllClose(y, SoftmaxReference(x.Values(), s.m, s.n),
                         OutputTolerance(DType::kF16, s.n)));
  }

  // Rows alternate between all-negative, all-positive and mixed values, so
  // that zero-filled columns past N would show in max, min and absmax.
  void RunRowStats(const Bindings& fixed, Mn s) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n);
    KILN_E2E_LOAD(kernel, "row_reduce.tile", "row_stats", fixed);
    HostTensor x(DType::kF32, {s.m, s.n});
    for (int64_t i = 0; i < s.m; ++i) {
      const double offset = i % 3 == 0 ? -3 : i % 3 == 1 ? 3 : 0;
      for (int64_t j = 0; j < s.n; ++j) {
        x.Set(i * s.n + j, offset + rng().Uniform(-1, 1));
      }
    }
    HostTensor sum(DType::kF32, {s.m}), mx(DType::kF32, {s.m}),
        mn(DType::kF32, {s.m}), amax(DType::kF32, {s.m});
    ASSERT_TRUE(Launch().In(x).Out(sum).Out(mx).Out(mn).Out(amax).Run(*kernel));
    const RowStats ref = RowStatsReference(x.Values(), s.m, s.n);
    EXPECT_TRUE(AllClose(sum, ref.sum, OutputTolerance(DType::kF32, s.n)));
    EXPECT_TRUE(AllClose(mx, ref.max, Exact()));
    EXPECT_TRUE(AllClose(mn, ref.min, Exact()));
    EXPECT_TRUE(AllClose(amax, ref.absmax, Exact()));
  }

  // col_sum_f64 adds into ColSum: start from random values.
  void RunColSum(const Bindings& fixed, Mn s) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n);
    KILN_E2E_LOAD(kernel, "row_reduce.tile", "col_sum_f64", fixed);
    HostTensor x = Random(DType::kF32, {s.m, s.n}, -1, 1);
    HostTensor sums = Random(DType::kF64, {s.n}, -100, 100);
    const Values c0 = sums.Values();
    ASSERT_TRUE(Launch().In(x).InOut(sums).Run(*kernel));
    EXPECT_TRUE(AllClose(sums, ColSumReference(x.Values(), c0, s.m, s.n),
                         OutputTolerance(DType::kF64, s.m)));
  }

  void RunScan(const Bindings& fixed, Mn s) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n);
    KILN_E2E_LOAD(kernel, "inclusive_scan.tile", "inclusive_scan", fixed);
    HostTensor x = Random(DType::kF32, {s.m, s.n}, -1, 1);
    HostTensor y(DType::kF32, {s.m, s.n});
    ASSERT_TRUE(Launch().In(x).Out(y).Run(*kernel));
    EXPECT_TRUE(AllClose(y, ScanReference(x.Values(), s.m, s.n, false),
                         OutputTolerance(DType::kF32, s.n)));
  }

  // Labels: random classes, one row ignore_index and one negative.
  void RunCrossEntropy(const Bindings& fixed, Mn s) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " V=" << s.n);
    KILN_E2E_LOAD(kernel, "losses.tile", "cross_entropy", fixed);
    constexpr int64_t kIgnore = -100;
    HostTensor logits = Random(DType::kBF16, {s.m, s.n}, -8, 8);
    HostTensor labels = Random(DType::kI64, {s.m}, 0, s.n - 1);
    if (s.m > 2) labels.Set(2, kIgnore);
    if (s.m > 4) labels.Set(4, -1);
    HostTensor loss(DType::kF32, {s.m});
    ASSERT_TRUE(Launch()
                    .In(logits)
                    .In(labels)
                    .Out(loss)
                    .Scalar(ArgValue::I64(kIgnore))
                    .Run(*kernel));
    EXPECT_TRUE(AllClose(loss,
                         CrossEntropyReference(logits.Values(), labels.Values(),
                                               kIgnore, s.m, s.n),
                         OutputTolerance(DType::kF32, s.n)));
  }

  // huber_loss adds into Total[0]: start from a random value.
  void RunHuber(const Bindings& fixed, int64_t n) {
    SCOPED_TRACE(::testing::Message() << "N=" << n);
    KILN_E2E_LOAD(kernel, "losses.tile", "huber_loss", fixed);
    HostTensor pred = Random(DType::kF32, {n}, -2, 2);
    HostTensor target = Random(DType::kF32, {n}, -2, 2);
    HostTensor total = Random(DType::kF32, {1}, -10, 10);
    const double total0 = total.Get(0);
    const float delta = 0.75f;
    ASSERT_TRUE(Launch()
                    .In(pred)
                    .In(target)
                    .InOut(total)
                    .Scalar(ArgValue::F32(delta))
                    .Run(*kernel));
    EXPECT_TRUE(AllClose(
        total,
        {HuberLossReference(pred.Values(), target.Values(), delta, total0)},
        OutputTolerance(DType::kF32, n)));
  }
};

// The corpus rmsnorm takes any N (a symbol): 4097 is one past a multiple of
// both BN candidates.
TEST_F(NormsE2eTest, RmsNorm4097Columns) {
  RunRmsNorm({}, {7, 4097});
  RunRmsNorm({}, {3, 1});
  RunRmsNorm({}, {1, 33});
  RunRmsNorm({}, {2, 512});
}

TEST_F(NormsE2eTest, RmsNormFourRowsWideTiles) {
  RunRmsNorm({{"BM", 4}, {"BN", 1024}}, {5, 4097});
  RunRmsNorm({{"BM", 4}, {"BN", 1024}}, {8, 1024});
}

TEST_F(NormsE2eTest, LayerNorm) {
  RunLayerNorm({}, 7);
  RunLayerNorm({}, 1);
}

TEST_F(NormsE2eTest, LayerNormFourRows) {
  RunLayerNorm({{"BM", 4}}, 9);
  RunLayerNorm({{"BM", 4}}, 8);
}

TEST_F(NormsE2eTest, Softmax) {
  for (Mn s : {Mn{5, 1000}, Mn{3, 1}, Mn{2, 256}, Mn{1, 7}}) RunSoftmax({}, s);
}

TEST_F(NormsE2eTest, SoftmaxLargeTiles) {
  for (Mn s : {Mn{9, 3000}, Mn{7, 33}, Mn{8, 1024}}) {
    RunSoftmax({{"BM", 8}, {"BN", 1024}}, s);
  }
}

TEST_F(NormsE2eTest, RowStats) {
  for (Mn s : {Mn{7, 300}, Mn{1, 1}, Mn{8, 256}}) RunRowStats({}, s);
}

TEST_F(NormsE2eTest, RowStatsLargeTiles) {
  RunRowStats({{"BM", 8}, {"BN", 256}}, {13, 1000});
}

TEST_F(NormsE2eTest, ColSumF64) {
  for (Mn s : {Mn{300, 70}, Mn{1, 1}, Mn{64, 64}}) RunColSum({}, s);
}

TEST_F(NormsE2eTest, ColSumF64LargeTiles) {
  RunColSum({{"BM", 128}, {"BN", 128}}, {129, 200});
}

TEST_F(NormsE2eTest, InclusiveScan) {
  for (Mn s : {Mn{5, 1000}, Mn{1, 1}, Mn{3, 256}}) RunScan({}, s);
}

TEST_F(NormsE2eTest, InclusiveScanLargeTiles) {
  RunScan({{"BM", 4}, {"BN", 1024}}, {6, 2500});
}

TEST_F(NormsE2eTest, SegmentSuffixSum) {
  KILN_E2E_LOAD(kernel, "inclusive_scan.tile", "segment_suffix_sum");
  for (int64_t segments : {7, 1}) {
    HostTensor x = Random(DType::kF32, {segments, 512}, -1, 1);
    HostTensor y(DType::kF32, {segments, 512});
    ASSERT_TRUE(Launch().In(x).Out(y).Run(*kernel));
    EXPECT_TRUE(AllClose(y, ScanReference(x.Values(), segments, 512, true),
                         OutputTolerance(DType::kF32, 512)))
        << "NSEG=" << segments;
  }
}

TEST_F(NormsE2eTest, CrossEntropy) {
  RunCrossEntropy({}, {6, 3000});
  RunCrossEntropy({}, {1, 1});
}

TEST_F(NormsE2eTest, CrossEntropyFourRows) {
  RunCrossEntropy({{"BM", 4}, {"BV", 2048}}, {9, 5000});
}

TEST_F(NormsE2eTest, HuberLoss) {
  RunHuber({}, 5000);
  RunHuber({}, 1);
}

TEST_F(NormsE2eTest, HuberLossWideTiles) { RunHuber({{"BN", 4096}}, 10000); }

}  // namespace
}  // namespace kiln::e2e
