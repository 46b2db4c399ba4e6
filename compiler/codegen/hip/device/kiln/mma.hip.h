// Matrix cores on registers: v_mfma_f32_16x16x16f16 and
// v_mfma_f32_16x16x16bf16_1k (gfx90a, gfx942; gfx908 has no bf16_1k and
// runs two v_mfma_f32_16x16x8bf16 instead), f32 accumulators, and the
// block-level tile GEMM that feeds them from swizzled LDS tiles.
//
// Accumulator layout (AccLayout): the block's M x N tile is split over
// WARPS_M x WARPS_N wavefronts; a wavefront owns a (M / WARPS_M) x
// (N / WARPS_N) tile made of 16 x 16 MFMA tiles; of each, lane l holds
// rows 4 * (l / 16) + i of column l % 16 in registers i = 0..3 (the MFMA
// D layout). So the 16 lanes l / 16 == g share rows 4g..4g+3, and a row
// reduction combines lanes differing in their low 4 bits
// (row_group_reduce, kiln/reduce.hip.h).
//
// An accumulator cannot feed the next GEMM's A operand in registers as on
// CUDA (the D layout is the transpose of the A layout): the code generator
// never plans it (gpu_dialect.h, acc_feeds_a_operand), so gemm_rs and
// acc_to_a_operand do not exist here.
#ifndef KILN_DEVICE_MMA_HIP_H_
#define KILN_DEVICE_MMA_HIP_H_

#include "kiln/shared_to_register.hip.h"

namespace kiln {

typedef float f32x4 __attribute__((ext_vector_type(4)));
typedef _Float16 f16x4 __attribute__((ext_vector_type(4)));
typedef short s16x2 __attribute__((ext_vector_type(2)));

// d += a (16 x 16) * b (16 x 16) for one MFMA tile, operands in the
// shared_to_register.hip.h layouts.
template <typename T>
__device__ inline void mfma_16x16x16(float* d, s16x4 a, s16x4 b);
template <>
__device__ inline void mfma_16x16x16<f16_t>(float* d, s16x4 a, s16x4 b) {
  f32x4 c = {d[0], d[1], d[2], d[3]};
  c = __builtin_amdgcn_mfma_f32_16x16x16f16(
      __builtin_bit_cast(f16x4, a), __builtin_bit_cast(f16x4, b), c, 0, 0, 0);
  d[0] = c[0];
  d[1] = c[1];
  d[2] = c[2];
  d[3] = c[3];
}
template <>
__device__ inline void mfma_16x16x16<bf16_t>(float* d, s16x4 a, s16x4 b) {
  f32x4 c = {d[0], d[1], d[2], d[3]};
#if defined(__gfx908__)
  // Two K = 8 steps: lane group g gives k 4g, 4g+1, then 4g+2, 4g+3, in
  // the x8 instruction's k slots 2g, 2g+1 for A and B alike.
  const s16x2 a0 = {a[0], a[1]}, a1 = {a[2], a[3]};
  const s16x2 b0 = {b[0], b[1]}, b1 = {b[2], b[3]};
  c = __builtin_amdgcn_mfma_f32_16x16x8bf16(a0, b0, c, 0, 0, 0);
  c = __builtin_amdgcn_mfma_f32_16x16x8bf16(a1, b1, c, 0, 0, 0);
#else
  c = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(a, b, c, 0, 0, 0);
#endif
  d[0] = c[0];
  d[1] = c[1];
  d[2] = c[2];
  d[3] = c[3];
}

template <int M, int N, int WARPS_M, int WARPS_N>
struct AccLayout {
  enum : int { kWm = M / WARPS_M, kWn = N / WARPS_N };
  static_assert(M % WARPS_M == 0 && kWm % 16 == 0,
                "each wavefront's rows must be whole 16-row MFMA tiles");
  static_assert(N % WARPS_N == 0 && kWn % 16 == 0,
                "each wavefront's columns must be whole 16-column MFMA tiles");
  enum : int { kTm = kWm / 16, kTn = kWn / 16 };
  enum : int { kRegs = kTm * kTn * 4 };  // per thread
  // The per-thread registers. (A parameter `float (&acc)[AccLayout<M, N,
  // ...>::kRegs]` trips clang's parser on the commas: name the type.)
  typedef float Regs[kRegs];
  // Register q: MFMA tile q / 4 (row-major over kTm x kTn), row i = q % 4.
  __device__ static inline int row(int q) {
    const int wave = threadIdx.x / 64, lane = threadIdx.x % 64;
    const int mi = (q / 4) / kTn;
    return (wave / WARPS_N) * kWm + mi * 16 + 4 * (lane / 16) + q % 4;
  }
  __device__ static inline int col(int q) {
    const int wave = threadIdx.x / 64, lane = threadIdx.x % 64;
    const int ni = (q / 4) % kTn;
    return (wave % WARPS_N) * kWn + ni * 16 + lane % 16;
  }
  // The index, in RowLayout<M, WARPS_M, WARPS_N>, of register q's row.
  __device__ static inline int row_reg(int q) {
    return ((q / 4) / kTn) * 4 + q % 4;
  }
};

// A vector over the rows of an AccLayout<M, *, WARPS_M, WARPS_N>: each
// thread holds its own rows (4 per 16-row MFMA tile), the 16 lanes of a row
// group holding the same values.
template <int M, int WARPS_M, int WARPS_N>
struct RowLayout {
  enum : int { kWm = M / WARPS_M };
  static_assert(M % WARPS_M == 0 && kWm % 16 == 0,
                "each wavefront's rows must be whole 16-row MFMA tiles");
  enum : int { kRegs = kWm / 16 * 4 };
  __device__ static inline int row(int q) {
    const int wave = threadIdx.x / 64, lane = threadIdx.x % 64;
    return (wave / WARPS_N) * kWm + (q / 4) * 16 + 4 * (lane / 16) + q % 4;
  }
  // This thread's wavefront holds the copy of its rows that is stored (the
  // WARPS_N wavefronts of a row slice each hold one).
  __device__ static inline bool first_slice() {
    return (threadIdx.x / 64) % WARPS_N == 0;
  }
};

// acc += op(A) @ op(B) for the block tile, A and B 16-bit LDS tiles laid out
// by LA / LB. A is [M, K] ([K, M] when TRANS_A), B is [K, N] ([N, K] when
// TRANS_B). Wavefronts beyond WARPS_M * WARPS_N do nothing. Per 16-deep
// step a wavefront loads the A operands of its row tiles once and reuses
// each B operand over them.
template <typename T, int M, int N, int K, int WARPS_M, int WARPS_N,
          bool TRANS_A, bool TRANS_B, typename LA, typename LB>
__device__ inline void gemm_ss(
    typename AccLayout<M, N, WARPS_M, WARPS_N>::Regs& acc, const u16* As,
    const u16* Bs) {
  typedef AccLayout<M, N, WARPS_M, WARPS_N> L;
  static_assert(K % 16 == 0, "gemm_ss needs K in whole 16-element steps");
  const int wave = threadIdx.x / 64, lane = threadIdx.x % 64;
  if (wave >= WARPS_M * WARPS_N) return;
  const int m_base = (wave / WARPS_N) * L::kWm;
  const int n_base = (wave % WARPS_N) * L::kWn;
#pragma unroll
  for (int k0 = 0; k0 < K; k0 += 16) {
    s16x4 a[L::kTm];
#pragma unroll
    for (int mi = 0; mi < L::kTm; ++mi) {
      a[mi] = load_a_operand<TRANS_A, LA>(As, m_base + mi * 16, k0, lane);
    }
#pragma unroll
    for (int ni = 0; ni < L::kTn; ++ni) {
      const s16x4 b =
          load_b_operand<TRANS_B, LB>(Bs, k0, n_base + ni * 16, lane);
#pragma unroll
      for (int mi = 0; mi < L::kTm; ++mi) {
        mfma_16x16x16<T>(&acc[(mi * L::kTn + ni) * 4], a[mi], b);
      }
    }
  }
}

}  // namespace kiln

#endif  // KILN_DEVICE_MMA_HIP_H_
