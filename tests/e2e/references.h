// Straightforward f64 references of the corpus kernels, one function per
// kernel, split by family: references_gemm.cc, references_attention.cc,
// references_norms.cc (norms, reductions, scans, losses) and
// references_elementwise.cc (element-wise and data-movement kernels).
//
// Inputs are the decoded values of the tensors the kernel received
// (row-major vectors); outputs are the exact f64 results, except where the
// program itself rounds an intermediate to a narrow dtype in a way a test
// can model exactly (each such place says so). Shapes are passed explicitly.
#ifndef KILN_TESTS_E2E_REFERENCES_H_
#define KILN_TESTS_E2E_REFERENCES_H_

#include <cstdint>
#include <vector>

namespace kiln::e2e {

using Values = std::vector<double>;

// ------------------------------------------------------------- gemm-like

// C[m, n] = sum_k op(A)[m, k] * op(B)[k, n]; A is [M, K] ([K, M] when
// transpose_a), B is [K, N] ([N, K] when transpose_b).
Values GemmReference(const Values& a, const Values& b, int64_t m, int64_t n,
                     int64_t k, bool transpose_a = false,
                     bool transpose_b = false);
// C[b] = A[b] @ B for every batch entry (B shared: its batch stride is 0).
Values BatchedGemmReference(const Values& a, const Values& b, int64_t batch,
                            int64_t m, int64_t n, int64_t k);
// gelu(A @ W^T + bias), exact erf GELU; W is [N, K].
Values GemmBiasGeluReference(const Values& a, const Values& w,
                             const Values& bias, int64_t m, int64_t n,
                             int64_t k);
// (A @ B^T) * scale_a * scale_b; B is [N, K].
Values GemmFp8Reference(const Values& a, const Values& b, double scale_a,
                        double scale_b, int64_t m, int64_t n, int64_t k);
// (AT^T @ B)[m, n] * scale_a[m] * scale_b[n]; AT is [K, M].
Values GemmInt8Reference(const Values& at, const Values& b,
                         const Values& scale_a, const Values& scale_b,
                         int64_t m, int64_t n, int64_t k);
// c0 + A @ B (split-K adds into the caller's C).
Values GemmSplitKReference(const Values& a, const Values& b, const Values& c0,
                           int64_t m, int64_t n, int64_t k);
// A @ W^T with W[n, k] = f16((Wq[n, k] - 8) * Scales[n, k / 128]): the
// program rounds each dequantised weight to f16 (a shared f16 tile), and so
// does the reference.
Values GemmW4A16Reference(const Values& a, const Values& wq,
                          const Values& scales, int64_t m, int64_t n,
                          int64_t k);

// ------------------------------------------------------------- attention

struct AttentionShape {
  int64_t batch = 1, seq = 1, heads = 1, dim = 128;
};
struct AttentionResult {
  Values out;      // [B, S, H, D]
  Values out_abs;  // [B, S, H, D]: sum_j p_ij |v_j|, the scale of P's rounding
  Values lse;      // [B, H, S], log2 of sum_j exp2(q.k_j * scale * log2(e))
};
// softmax(Q K^T * sm_scale) V over BSHD tensors; `causal` masks key j > i.
AttentionResult AttentionReference(const Values& q, const Values& k,
                                   const Values& v, double sm_scale,
                                   const AttentionShape& shape, bool causal);

// The FlashAttention backward (flash_attention_bwd.tile): Q and dO
// [B, S, H, D], K and V [B, S, H / groups, D] (query head h uses KV head
// h / groups). From f64 softmax attention: O, the base-2 Lse (as
// AttentionReference), Delta = rowsum(dO * O) [B, H, S], dQ [B, S, H, D]
// and dK, dV [B, S, H / groups, D] (summed over each group's heads), and
// per element the sums of the magnitudes of their terms (the scale of the
// kernel's f16 roundings of P and dS).
struct AttentionGrads {
  Values out, lse, delta, dq, dk, dv;
  Values dq_abs, dk_abs, dv_abs;
};
AttentionGrads AttentionBwdReference(const Values& q, const Values& k,
                                     const Values& v, const Values& d_o,
                                     double sm_scale, const AttentionShape& s,
                                     int64_t groups, bool causal);

// Decode attention over a paged KV cache: Q and the result [B, HKV, G, D],
// caches [pages, PS, HKV, D], block_table [B, max_pages], lens[b] tokens of
// sequence b (0: the output is zero). `lse` is unused (empty).
struct PagedDecodeShape {
  int64_t batch = 1, kv_heads = 1, group = 1, page_size = 16, max_pages = 1;
  int64_t dim = 128;
};
AttentionResult PagedDecodeReference(const Values& q, const Values& kc,
                                     const Values& vc,
                                     const std::vector<int64_t>& block_table,
                                     const std::vector<int64_t>& lens,
                                     double sm_scale,
                                     const PagedDecodeShape& shape);

// Packed variable-length causal attention with grouped KV heads: Q and the
// result [TQ, H, D], K and V [TK, HK, D], sequence b's queries at rows
// cu_q[b]..cu_q[b+1] and keys at cu_k[b]..cu_k[b+1]. The causal mask is
// aligned at the bottom right (query i of q_len sees keys up to
// kv_len - q_len + i); a query that sees no key is zero. `lse` is unused.
struct VarlenShape {
  int64_t heads = 1, kv_heads = 1, dim = 128;
};
AttentionResult VarlenAttentionReference(const Values& q, const Values& k,
                                         const Values& v,
                                         const std::vector<int64_t>& cu_q,
                                         const std::vector<int64_t>& cu_k,
                                         double sm_scale,
                                         const VarlenShape& shape);

// ------------------------------------------------- norms and reductions

// X * rsqrt(mean(X^2) + eps) * W per row of X [M, N].
Values RmsNormReference(const Values& x, const Values& w, double eps, int64_t m,
                        int64_t n);
// (X - mean) * rsqrt(var + eps) * gamma + beta per row (biased variance).
Values LayerNormReference(const Values& x, const Values& gamma,
                          const Values& beta, double eps, int64_t m, int64_t n);
Values SoftmaxReference(const Values& x, int64_t m, int64_t n);
struct RowStats {
  Values sum, max, min, absmax;
};
RowStats RowStatsReference(const Values& x, int64_t m, int64_t n);
// c0 + column sums of X [M, N].
Values ColSumReference(const Values& x, const Values& c0, int64_t m, int64_t n);
// Inclusive prefix sums (reverse: suffix sums) along each row.
Values ScanReference(const Values& x, int64_t m, int64_t n, bool reverse);
// logsumexp(row) - row[label], 0 where label == ignore_index or < 0.
Values CrossEntropyReference(const Values& logits, const Values& labels,
                             int64_t ignore_index, int64_t m, int64_t v);
// total0 + sum of the Huber losses.
double HuberLossReference(const Values& pred, const Values& target,
                          double delta, double total0);

// ------------------------------------------ element-wise and data movement

struct AdamState {
  Values p, m, v;
};
struct AdamHyper {
  double lr, beta1, beta2, eps, weight_decay, c1, c2;
};
AdamState AdamStepReference(const AdamState& s, const Values& g,
                            const AdamHyper& h);
// W[n, k] = f16(q[n, k] * Scales[n, k / 128]) (one correctly rounded f16
// product, as the program computes it). `q` holds the signed nibble values.
Values DequantReference(const Values& q, const Values& scales, int64_t n,
                        int64_t k);
// The signed nibbles of bytes [N, K / 2], low nibble first.
Values UnpackI4Bytes(const Values& packed, int64_t n, int64_t k);
struct DropoutResult {
  Values y, keep;
};
// The program's murmur3-finaliser mask; kept values scaled by
// f32(1 / (1 - p)) in f32 and rounded to f16.
DropoutResult DropoutReference(const Values& x, int64_t m, int64_t n,
                               uint32_t seed, float p, bool training);
// alpha * act(X * col_scale[n] + row_bias[m]) + R; act 0 ReLU, 1 tanh-GELU,
// otherwise SiLU.
Values ElementwiseBroadcastReference(const Values& x, const Values& col_scale,
                                     const Values& row_bias, const Values& r,
                                     double alpha, int act, int64_t m,
                                     int64_t n);
struct QuantizeResult {
  Values q;      // dequantisable values (already rounded to the fp8 grid)
  Values scale;  // [M]
};
// Per-row absmax scaling to +-448 and rounding to f8e4m3.
QuantizeResult QuantizeFp8E4M3Reference(const Values& x, int64_t m, int64_t n);
// f8e5m2(g * inv_scale).
Values QuantizeFp8E5M2Reference(const Values& g, double inv_scale);
// Saturating Q15 with rounding half away from zero, computed in f32 as the
// program does (the integer result depends on the f32 roundings).
Values QuantizeQ15Reference(const Values& x);
// Y[m, n] = sum_u taps[u] * X[m, n + u - 2], zero padded.
Values StencilBlurReference(const Values& x, const Values& taps, int64_t m,
                            int64_t n);
Values TransposeReference(const Values& x, int64_t m, int64_t n);
struct TopKResult {
  Values values, indices, selected;  // [T, 8], [T, 8], [T, E]
};
// The 8 largest of each row of E logits (ties: lowest index first); with
// `normalize` the values become their softmax.
TopKResult TopKReference(const Values& logits, int64_t t, int64_t e,
                         bool normalize);

}  // namespace kiln::e2e

#endif  // KILN_TESTS_E2E_REFERENCES_H_
