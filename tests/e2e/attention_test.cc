// End-to-end tests of the FlashAttention forward kernels (causal, with the
// log-sum-exp output, and full) on the CPU: sequence length 1000 with the
// first valid tunables, small and ragged shapes, and other tile sizes.
#include "gtest/gtest.h"
#include "tests/e2e/e2e_harness.h"
#include "tests/e2e/references.h"
#include "tests/e2e/tolerance.h"

namespace kiln::e2e {
namespace {

using runtime::ArgValue;

KILN_E2E_COVERS("flash_attention_fwd.tile", "flash_attention_fwd_causal");
KILN_E2E_COVERS("flash_attention_fwd.tile", "flash_attention_fwd");

constexpr float kSmScale = 0.3f;  // q.k has std ~3.8: a peaked softmax

class AttentionE2eTest : public E2eTest {
 protected:
  void Run(bool causal, const Bindings& fixed, AttentionShape s) {
    SCOPED_TRACE(::testing::Message()
                 << (causal ? "causal" : "full") << " B=" << s.batch
                 << " S=" << s.seq << " H=" << s.heads);
    KILN_E2E_LOAD(kernel, "flash_attention_fwd.tile",
                  causal ? "flash_attention_fwd_causal" : "flash_attention_fwd",
                  fixed);
    const std::vector<int64_t> bshd = {s.batch, s.seq, s.heads, s.dim};
    HostTensor q = Random(DType::kF16, bshd, -1, 1);
    HostTensor k = Random(DType::kF16, bshd, -1, 1);
    HostTensor v = Random(DType::kF16, bshd, -1, 1);
    HostTensor o(DType::kF16, bshd);
    HostTensor lse(DType::kF32, {s.batch, s.heads, s.seq});
    Launch launch;
    launch.In(q).In(k).In(v).Out(o);
    if (causal) launch.Out(lse);
    launch.Scalar(ArgValue::F32(kSmScale));
    ASSERT_TRUE(launch.Run(*kernel));
    const AttentionResult ref = AttentionReference(
        q.Values(), k.Values(), v.Values(), kSmScale, s, causal);
    // P is rounded to f16 before the second gemm (acc_s_cast): one f16
    // rounding of each p_ij that the reference does not make, bounded by
    // ulp(f16) * sum_j p_ij |v_j|.
    EXPECT_TRUE(AllClose(o, ref.out,
                         WithIntermediate(OutputTolerance(DType::kF16, s.seq),
                                          DType::kF16, ref.out_abs)));
    if (causal) {
      EXPECT_TRUE(AllClose(lse, ref.lse, OutputTolerance(DType::kF32, s.seq)));
    }
  }
};

TEST_F(AttentionE2eTest, CausalSeq1000) { Run(true, {}, {1, 1000, 1}); }

TEST_F(AttentionE2eTest, CausalSmallAndRaggedShapes) {
  for (AttentionShape s : {AttentionShape{1, 1, 1}, AttentionShape{1, 7, 2},
                           AttentionShape{2, 33, 3}, AttentionShape{1, 64, 1},
                           AttentionShape{1, 129, 2}}) {
    Run(true, {}, s);
  }
}

TEST_F(AttentionE2eTest, CausalLargeTilesTwoStages) {
  Run(true, {{"BM", 128}, {"BN", 64}, {"STAGES", 2}}, {2, 257, 2});
}

TEST_F(AttentionE2eTest, FullSeq1000) { Run(false, {}, {1, 1000, 1}); }

TEST_F(AttentionE2eTest, FullSmallAndRaggedShapes) {
  for (AttentionShape s : {AttentionShape{1, 1, 1}, AttentionShape{1, 7, 2},
                           AttentionShape{2, 33, 3}, AttentionShape{1, 64, 1},
                           AttentionShape{1, 129, 2}}) {
    Run(false, {}, s);
  }
}

TEST_F(AttentionE2eTest, FullLargeTilesTwoStages) {
  Run(false, {{"BM", 128}, {"BN", 64}, {"STAGES", 2}}, {2, 257, 2});
}

TEST_F(AttentionE2eTest, FullWideKeyTiles) {
  Run(false, {{"BM", 64}, {"BN", 128}}, {1, 200, 1});
}

}  // namespace
}  // namespace kiln::e2e
