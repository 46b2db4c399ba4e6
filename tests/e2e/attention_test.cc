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

KILN_E2E_COVERS("flash_attention_varlen.tile", "flash_attention_varlen");

KILN_E2E_COVERS("paged_decode.tile", "paged_decode_split");
KILN_E2E_COVERS("paged_decode.tile", "paged_decode_combine");

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

// Paged decode (split-KV, then the combine): grouped heads fewer than a
// tile's rows, pages in a shuffled order, ragged lengths (one of 0, one of
// a single token, one ending inside a page), chunks smaller and larger than
// a page, and more splits than a short sequence has chunks.
struct PagedCase {
  int64_t bh, bn, page, splits, group;
};

class PagedDecodeE2eTest : public E2eTest {
 protected:
  void Run(const PagedCase& c) {
    SCOPED_TRACE(::testing::Message()
                 << "BH=" << c.bh << " BN=" << c.bn << " PS=" << c.page
                 << " NS=" << c.splits << " G=" << c.group);
    KILN_E2E_LOAD(split, "paged_decode.tile", "paged_decode_split",
                  {{"BH", c.bh}, {"BN", c.bn}, {"STAGES", 2}});
    KILN_E2E_LOAD(combine, "paged_decode.tile", "paged_decode_combine",
                  {{"BH", c.bh}});
    const std::vector<int64_t> lens = {45, 1, 0, 2 * c.page + 3};
    PagedDecodeShape s;
    s.batch = static_cast<int64_t>(lens.size());
    s.kv_heads = 2;
    s.group = c.group;
    s.page_size = c.page;
    s.max_pages = 0;
    for (int64_t n : lens) {
      s.max_pages = std::max(s.max_pages, (n + c.page - 1) / c.page);
    }
    const int64_t pages = s.batch * s.max_pages + 3;
    // Every sequence's pages, distinct, in a shuffled order; unused block
    // table entries name page 0 (never read: past the sequence's length).
    std::vector<int64_t> order(pages);
    for (int64_t i = 0; i < pages; ++i) order[i] = i;
    for (int64_t i = pages - 1; i > 0; --i) {
      std::swap(order[i], order[rng().UniformInt(0, i)]);
    }
    std::vector<int64_t> table(s.batch * s.max_pages, 0);
    HostTensor bt(DType::kI32, {s.batch, s.max_pages});
    HostTensor len_t(DType::kI32, {s.batch});
    for (int64_t b = 0; b < s.batch; ++b) {
      len_t.Set(b, static_cast<double>(lens[b]));
      for (int64_t p = 0; p < s.max_pages; ++p) {
        const int64_t i = b * s.max_pages + p;
        if (p * c.page < lens[b]) table[i] = order[i];
        bt.Set(i, static_cast<double>(table[i]));
      }
    }
    const std::vector<int64_t> qshape = {s.batch, s.kv_heads, s.group, 128};
    HostTensor q = Random(DType::kBF16, qshape, -1, 1);
    HostTensor kc =
        Random(DType::kBF16, {pages, c.page, s.kv_heads, 128}, -1, 1);
    HostTensor vc =
        Random(DType::kBF16, {pages, c.page, s.kv_heads, 128}, -1, 1);
    HostTensor opart(DType::kF32,
                     {s.batch, s.kv_heads, c.splits, s.group, 128});
    HostTensor lpart(DType::kF32, {s.batch, s.kv_heads, c.splits, s.group});
    HostTensor o(DType::kBF16, qshape);
    ASSERT_TRUE(Launch()
                    .In(q)
                    .In(kc)
                    .In(vc)
                    .In(bt)
                    .In(len_t)
                    .Out(opart)
                    .Out(lpart)
                    .Scalar(ArgValue::F32(kSmScale))
                    .Run(*split));
    ASSERT_TRUE(Launch().In(opart).In(lpart).Out(o).Run(*combine));
    const AttentionResult ref = PagedDecodeReference(
        q.Values(), kc.Values(), vc.Values(), table, lens, kSmScale, s);
    // P is rounded to bf16 before the second gemm; the splits add one f32
    // combine each.
    EXPECT_TRUE(AllClose(
        o, ref.out,
        WithIntermediate(OutputTolerance(DType::kBF16, lens[3] + c.splits),
                         DType::kBF16, ref.out_abs)));
  }
};

TEST_F(PagedDecodeE2eTest, OneSplitPageSizedChunks) { Run({16, 16, 16, 1, 3}); }

TEST_F(PagedDecodeE2eTest, SplitsWithChunksSmallerThanAPage) {
  Run({16, 16, 32, 3, 5});
}

TEST_F(PagedDecodeE2eTest, ChunksLargerThanAPageAndMoreSplitsThanChunks) {
  Run({16, 32, 16, 7, 4});
}

TEST_F(PagedDecodeE2eTest, GroupWiderThanATile) { Run({16, 64, 64, 2, 20}); }

// Packed variable-length causal GQA prefill: sequences of equal query and
// key lengths, one with a cached prefix (more keys than queries: chunked
// prefill), one with fewer keys than queries (its first rows see no key and
// are zero), empty ones, one a whole tile; a grid sized by a MaxQ larger
// than the longest sequence (blocks with no rows).
class VarlenE2eTest : public E2eTest {
 protected:
  void Run(const Bindings& fixed, int64_t heads, int64_t kv_heads,
           const std::vector<std::pair<int64_t, int64_t>>& lens,
           int64_t max_q) {
    SCOPED_TRACE(::testing::Message()
                 << "H=" << heads << " HK=" << kv_heads << " MaxQ=" << max_q);
    KILN_E2E_LOAD(kernel, "flash_attention_varlen.tile",
                  "flash_attention_varlen", fixed);
    std::vector<int64_t> cu_q = {0}, cu_k = {0};
    for (auto [q_len, kv_len] : lens) {
      cu_q.push_back(cu_q.back() + q_len);
      cu_k.push_back(cu_k.back() + kv_len);
    }
    const auto nb = static_cast<int64_t>(cu_q.size());
    HostTensor cq(DType::kI32, {nb}), ck(DType::kI32, {nb});
    for (int64_t b = 0; b < nb; ++b) {
      cq.Set(b, static_cast<double>(cu_q[b]));
      ck.Set(b, static_cast<double>(cu_k[b]));
    }
    VarlenShape s{heads, kv_heads, 128};
    HostTensor q = Random(DType::kF16, {cu_q.back(), heads, 128}, -1, 1);
    HostTensor k = Random(DType::kF16, {cu_k.back(), kv_heads, 128}, -1, 1);
    HostTensor v = Random(DType::kF16, {cu_k.back(), kv_heads, 128}, -1, 1);
    HostTensor o(DType::kF16, {cu_q.back(), heads, 128});
    ASSERT_TRUE(Launch()
                    .In(q)
                    .In(k)
                    .In(v)
                    .In(cq)
                    .In(ck)
                    .Out(o)
                    .Scalar(ArgValue::I32(static_cast<int32_t>(max_q)))
                    .Scalar(ArgValue::F32(kSmScale))
                    .Run(*kernel));
    const AttentionResult ref = VarlenAttentionReference(
        q.Values(), k.Values(), v.Values(), cu_q, cu_k, kSmScale, s);
    int64_t longest = 1;
    for (auto [q_len, kv_len] : lens) longest = std::max(longest, kv_len);
    EXPECT_TRUE(AllClose(o, ref.out,
                         WithIntermediate(OutputTolerance(DType::kF16, longest),
                                          DType::kF16, ref.out_abs)));
  }
};

const std::vector<std::pair<int64_t, int64_t>> kVarlenLens = {
    {37, 37}, {1, 1}, {0, 0}, {130, 200}, {20, 5}, {0, 9}, {64, 64}};

TEST_F(VarlenE2eTest, GroupedHeadsRaggedSequences) {
  Run({}, 4, 2, kVarlenLens, 130);
}

TEST_F(VarlenE2eTest, LargeTilesGridLongerThanEverySequence) {
  Run({{"BM", 128}, {"BN", 128}, {"STAGES", 2}}, 3, 1, kVarlenLens, 300);
}

TEST_F(VarlenE2eTest, AnEmptyGridLaunchesNothing) {
  Run({}, 2, 2, {{0, 0}, {0, 4}}, 0);
}

}  // namespace
}  // namespace kiln::e2e
