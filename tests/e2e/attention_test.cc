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

KILN_E2E_COVERS("mla_decode.tile", "mla_decode_split");
KILN_E2E_COVERS("mla_decode.tile", "mla_decode_combine");

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
// A block table for sequences of `lens` tokens in pages of `page`: every
// sequence's pages distinct and in a shuffled order among three spare ones;
// unused entries name page 0 (never read: past the sequence's length).
struct PagedTable {
  PagedTable(Rng& rng, const std::vector<int64_t>& lens, int64_t page)
      : max_pages(MaxPages(lens, page)),
        pages(static_cast<int64_t>(lens.size()) * max_pages + 3),
        table(lens.size() * max_pages, 0),
        block_table(DType::kI32,
                    {static_cast<int64_t>(lens.size()), max_pages}),
        lens_t(DType::kI32, {static_cast<int64_t>(lens.size())}) {
    std::vector<int64_t> order(pages);
    for (int64_t i = 0; i < pages; ++i) order[i] = i;
    for (int64_t i = pages - 1; i > 0; --i) {
      std::swap(order[i], order[rng.UniformInt(0, i)]);
    }
    for (size_t b = 0; b < lens.size(); ++b) {
      lens_t.Set(static_cast<int64_t>(b), static_cast<double>(lens[b]));
      for (int64_t p = 0; p < max_pages; ++p) {
        const int64_t i = static_cast<int64_t>(b) * max_pages + p;
        if (p * page < lens[b]) table[i] = order[i];
        block_table.Set(i, static_cast<double>(table[i]));
      }
    }
  }
  static int64_t MaxPages(const std::vector<int64_t>& lens, int64_t page) {
    int64_t m = 0;
    for (int64_t n : lens) m = std::max(m, (n + page - 1) / page);
    return m;
  }
  int64_t max_pages, pages;
  std::vector<int64_t> table;  // [batch, max_pages]
  HostTensor block_table, lens_t;
};

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
    PagedTable t(rng(), lens, c.page);
    PagedDecodeShape s;
    s.batch = static_cast<int64_t>(lens.size());
    s.kv_heads = 2;
    s.group = c.group;
    s.page_size = c.page;
    s.max_pages = t.max_pages;
    const int64_t pages = t.pages;
    const std::vector<int64_t>& table = t.table;
    HostTensor& bt = t.block_table;
    HostTensor& len_t = t.lens_t;
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

// MLA decode (latent KV of 512 + 64 RoPE dims shared by every head, split-KV
// then the combine): the reference is paged decode with one KV head of
// dim 576 whose values are the cache rows with their RoPE dims zeroed (the
// output's first 512 dims). Heads fewer than a tile (16: a TP-8 shard of
// DeepSeek-V3's 128) and more than one (80), ragged lengths as above.
struct MlaCase {
  int64_t bn, stages, page, splits, heads;
};

class MlaDecodeE2eTest : public E2eTest {
 protected:
  void Run(const MlaCase& c) {
    SCOPED_TRACE(::testing::Message()
                 << "BN=" << c.bn << " STAGES=" << c.stages << " PS=" << c.page
                 << " NS=" << c.splits << " H=" << c.heads);
    KILN_E2E_LOAD(split, "mla_decode.tile", "mla_decode_split",
                  {{"BN", c.bn}, {"STAGES", c.stages}});
    KILN_E2E_LOAD(combine, "mla_decode.tile", "mla_decode_combine",
                  {{"BH", 8}});
    constexpr int64_t kLatent = 512, kRow = 576;
    const std::vector<int64_t> lens = {70, 1, 0, 2 * c.page + 5};
    PagedTable t(rng(), lens, c.page);
    const auto batch = static_cast<int64_t>(lens.size());
    HostTensor q = Random(DType::kBF16, {batch, c.heads, kRow}, -1, 1);
    HostTensor kv = Random(DType::kBF16, {t.pages, c.page, kRow}, -1, 1);
    HostTensor opart(DType::kF32, {batch, c.splits, c.heads, kLatent});
    HostTensor lpart(DType::kF32, {batch, c.splits, c.heads});
    HostTensor o(DType::kBF16, {batch, c.heads, kLatent});
    // 576 products per score: a smaller scale keeps the softmax peaked
    // about as much as the 128-dim tests' kSmScale does.
    const float sm_scale = kSmScale * 0.5f;
    ASSERT_TRUE(Launch()
                    .In(q)
                    .In(kv)
                    .In(t.block_table)
                    .In(t.lens_t)
                    .Out(opart)
                    .Out(lpart)
                    .Scalar(ArgValue::F32(sm_scale))
                    .Run(*split));
    ASSERT_TRUE(Launch().In(opart).In(lpart).Out(o).Run(*combine));
    Values values = kv.Values();
    for (size_t i = 0; i < values.size(); ++i) {
      if (static_cast<int64_t>(i) % kRow >= kLatent) values[i] = 0;
    }
    PagedDecodeShape s;
    s.batch = batch;
    s.group = c.heads;
    s.page_size = c.page;
    s.max_pages = t.max_pages;
    s.dim = kRow;
    const AttentionResult full = PagedDecodeReference(
        q.Values(), kv.Values(), values, t.table, lens, sm_scale, s);
    AttentionResult ref;
    for (size_t i = 0; i < full.out.size(); ++i) {
      if (static_cast<int64_t>(i) % kRow >= kLatent) continue;
      ref.out.push_back(full.out[i]);
      ref.out_abs.push_back(full.out_abs[i]);
    }
    EXPECT_TRUE(AllClose(
        o, ref.out,
        WithIntermediate(OutputTolerance(DType::kBF16, lens[3] + c.splits),
                         DType::kBF16, ref.out_abs)));
  }
};

TEST_F(MlaDecodeE2eTest, OneSplitPagesOfOneChunk) { Run({32, 2, 32, 1, 16}); }

TEST_F(MlaDecodeE2eTest, SplitsChunksSmallerThanAPageTwoHeadTiles) {
  Run({32, 1, 64, 3, 80});
}

TEST_F(MlaDecodeE2eTest, ChunksLargerThanAPageMoreSplitsThanChunks) {
  Run({64, 1, 16, 6, 16});
}

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
