// End-to-end tests of the FlashAttention backward kernels
// (flash_attention_bwd.tile: Delta, then dQ, dK, dV, full and causal, MHA
// and GQA) on the CPU against an f64 reference, with ragged lengths.
#include "gtest/gtest.h"
#include "tests/e2e/e2e_harness.h"
#include "tests/e2e/references.h"
#include "tests/e2e/tolerance.h"

namespace kiln::e2e {
namespace {

using runtime::ArgValue;

KILN_E2E_COVERS("flash_attention_bwd.tile", "flash_attention_bwd_preprocess");
KILN_E2E_COVERS("flash_attention_bwd.tile", "flash_attention_bwd");
KILN_E2E_COVERS("flash_attention_bwd.tile", "flash_attention_bwd_causal");

constexpr double kScale = 0.125;  // 1 / sqrt(64)

class AttentionBwdE2eTest : public E2eTest {
 protected:
  void Run(bool causal, int64_t groups, const Bindings& fixed,
           AttentionShape s) {
    SCOPED_TRACE(::testing::Message()
                 << (causal ? "causal" : "full") << " B=" << s.batch
                 << " S=" << s.seq << " H=" << s.heads << " G=" << groups);
    s.dim = 64;
    const int64_t hk = s.heads / groups;
    const std::vector<int64_t> q_shape = {s.batch, s.seq, s.heads, 64};
    const std::vector<int64_t> kv_shape = {s.batch, s.seq, hk, 64};
    const std::vector<int64_t> rows = {s.batch, s.heads, s.seq};
    HostTensor q = Random(DType::kF16, q_shape, -1, 1);
    HostTensor k = Random(DType::kF16, kv_shape, -1, 1);
    HostTensor v = Random(DType::kF16, kv_shape, -1, 1);
    HostTensor d_o = Random(DType::kF16, q_shape, -1, 1);
    const AttentionGrads ref =
        AttentionBwdReference(q.Values(), k.Values(), v.Values(), d_o.Values(),
                              kScale, s, groups, causal);

    // Delta from O (the forward's output, rounded to f16 as the forward
    // stores it) and dO.
    HostTensor o(DType::kF16, q_shape);
    o.SetValues(ref.out);
    std::vector<double> delta_ref(ref.delta.size(), 0.0);
    const std::vector<double> ov = o.Values(), gv = d_o.Values();
    for (size_t r = 0; r < delta_ref.size(); ++r) {
      const int64_t b = static_cast<int64_t>(r) / (s.heads * s.seq);
      const int64_t h = static_cast<int64_t>(r) / s.seq % s.heads;
      const int64_t i = static_cast<int64_t>(r) % s.seq;
      for (int64_t c = 0; c < 64; ++c) {
        const int64_t e = ((b * s.seq + i) * s.heads + h) * 64 + c;
        delta_ref[r] += ov[e] * gv[e];
      }
    }
    HostTensor delta(DType::kF32, rows);
    {
      KILN_E2E_LOAD(prep, "flash_attention_bwd.tile",
                    "flash_attention_bwd_preprocess", {});
      Launch launch;
      launch.In(o).In(d_o).Out(delta);
      ASSERT_TRUE(launch.Run(*prep));
      EXPECT_TRUE(AllClose(delta, delta_ref, OutputTolerance(DType::kF32, 64)));
    }

    // The gradients from the reference's Lse and Delta.
    HostTensor lse(DType::kF32, rows);
    lse.SetValues(ref.lse);
    delta.SetValues(ref.delta);
    HostTensor dq(DType::kF32, q_shape);
    dq.SetValues(std::vector<double>(dq.num_elements(), 0.0));
    HostTensor dk(DType::kF16, kv_shape), dv(DType::kF16, kv_shape);
    KILN_E2E_LOAD(kernel, "flash_attention_bwd.tile",
                  causal ? "flash_attention_bwd_causal" : "flash_attention_bwd",
                  fixed);
    Launch launch;
    launch.In(q).In(k).In(v).In(d_o).In(lse).In(delta).InOut(dq).Out(dk).Out(
        dv);
    launch.Scalar(ArgValue::F32(kScale)).Scalar(ArgValue::I32(groups));
    ASSERT_TRUE(launch.Run(*kernel));
    // P and dS are rounded to f16 before the gemms that use them: one f16
    // rounding of each term, bounded by the sum of the terms' magnitudes.
    const int64_t terms = s.seq * groups;
    EXPECT_TRUE(AllClose(dq, ref.dq,
                         WithIntermediate(OutputTolerance(DType::kF32, terms),
                                          DType::kF16, ref.dq_abs)));
    EXPECT_TRUE(AllClose(dk, ref.dk,
                         WithIntermediate(OutputTolerance(DType::kF16, terms),
                                          DType::kF16, ref.dk_abs)));
    EXPECT_TRUE(AllClose(dv, ref.dv,
                         WithIntermediate(OutputTolerance(DType::kF16, terms),
                                          DType::kF16, ref.dv_abs)));
  }
};

TEST_F(AttentionBwdE2eTest, FullMhaRagged) { Run(false, 1, {}, {2, 150, 2}); }

TEST_F(AttentionBwdE2eTest, CausalGqaRagged) {
  Run(true, 3, {{"BN", 64}, {"STAGES", 2}}, {1, 200, 6});
}

TEST_F(AttentionBwdE2eTest, CausalShortSequences) {
  for (int64_t seq : {1, 33, 64}) Run(true, 2, {}, {1, seq, 2});
}

}  // namespace
}  // namespace kiln::e2e
