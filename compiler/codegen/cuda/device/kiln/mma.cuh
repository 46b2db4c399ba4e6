// Tensor-core multiply-accumulate on registers: mma.sync m16n8k16 with f16 or
// bf16 inputs and f32 accumulators (sm_80+), and the warp-level tile GEMM
// that feeds it from swizzled shared tiles through ldmatrix.
//
// Accumulator layout (AccLayout): the block's M x N tile is split over
// WARPS_M x WARPS_N warps; a warp owns a (M / WARPS_M) x (N / WARPS_N) tile
// made of 16 x 8 mma tiles; lane l holds, of each, rows l/4 and l/4 + 8 at
// columns 2 * (l % 4) and 2 * (l % 4) + 1 (registers e = 0..3 in the order
// (row, col), (row, col+1), (row+8, col), (row+8, col+1)).
#ifndef KILN_DEVICE_MMA_CUH_
#define KILN_DEVICE_MMA_CUH_

#include "kiln/register_to_global.cuh"
#include "kiln/shared_to_register.cuh"

namespace kiln {

template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const u32 (&a)[4],
                                          u32 b0, u32 b1);
template <>
__device__ __forceinline__ void mma_16816<f16_t>(float (&d)[4],
                                                 const u32 (&a)[4], u32 b0,
                                                 u32 b1) {
  // Not volatile: a pure register operation that the compiler may
  // schedule around the (volatile) shared-memory loads.
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
template <>
__device__ __forceinline__ void mma_16816<bf16_t>(float (&d)[4],
                                                  const u32 (&a)[4], u32 b0,
                                                  u32 b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
      "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <int M, int N, int WARPS_M, int WARPS_N>
struct AccLayout {
  enum : int { kWm = M / WARPS_M, kWn = N / WARPS_N };
  static_assert(M % WARPS_M == 0 && kWm % 16 == 0,
                "each warp's rows must be whole 16-row mma tiles");
  static_assert(N % WARPS_N == 0 && kWn % 8 == 0,
                "each warp's columns must be whole 8-column mma tiles");
  enum : int { kTm = kWm / 16, kTn = kWn / 8 };
  enum : int { kRegs = kTm * kTn * 4 };  // per thread
  __device__ __forceinline__ static int row(int q) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wm = warp / WARPS_N;
    const int mi = (q / 4) / kTn, e = q % 4;
    return wm * kWm + mi * 16 + lane / 4 + (e / 2) * 8;
  }
  __device__ __forceinline__ static int col(int q) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int wn = warp % WARPS_N;
    const int ni = (q / 4) % kTn, e = q % 4;
    return wn * kWn + ni * 8 + (lane % 4) * 2 + (e % 2);
  }
  // The index, in RowLayout<M, WARPS_M, WARPS_N>, of register q's row.
  __device__ __forceinline__ static int row_reg(int q) {
    return ((q / 4) / kTn) * 2 + (q % 4) / 2;
  }
};

// A vector over the rows of an AccLayout<M, *, WARPS_M, WARPS_N>: each
// thread holds its own rows (2 per 16-row mma tile), the 4 lanes of a row
// group holding the same values.
template <int M, int WARPS_M, int WARPS_N>
struct RowLayout {
  enum : int { kWm = M / WARPS_M };
  static_assert(M % WARPS_M == 0 && kWm % 16 == 0,
                "each warp's rows must be whole 16-row mma tiles");
  enum : int { kRegs = kWm / 16 * 2 };
  __device__ __forceinline__ static int row(int q) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    return (warp / WARPS_N) * kWm + (q / 2) * 16 + lane / 4 + (q % 2) * 8;
  }
  // This thread's warp holds the copy of its rows that is stored (the
  // WARPS_N warps of a row slice each hold one).
  __device__ __forceinline__ static bool first_slice() {
    return (threadIdx.x / 32) % WARPS_N == 0;
  }
};

// acc += op(A) @ op(B) for the block tile, A and B 16-bit tiles in shared
// memory laid out by LA / LB. A is [M, K] ([K, M] when TRANS_A), B is [K, N]
// ([N, K] when TRANS_B). Warps beyond WARPS_M * WARPS_N do nothing.
template <typename T, int M, int N, int K, int WARPS_M, int WARPS_N,
          bool TRANS_A, bool TRANS_B, typename LA, typename LB>
__device__ __forceinline__ void gemm_ss(
    float (&acc)[AccLayout<M, N, WARPS_M, WARPS_N>::kRegs], const u16* As,
    const u16* Bs) {
  typedef AccLayout<M, N, WARPS_M, WARPS_N> L;
  static_assert(K % 16 == 0, "gemm_ss needs K in whole 16-element steps");
  static_assert(L::kTn % 2 == 0, "gemm_ss loads B 16 columns at a time");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= WARPS_M * WARPS_N) return;
  const int m_base = (warp / WARPS_N) * L::kWm;
  const int n_base = (warp % WARPS_N) * L::kWn;
  const int q = lane / 8, r = lane % 8;
  // Fragments of one 16-deep step: A for every row tile, B for every pair
  // of column tiles. Two sets, so that the loads of step k + 1 are in
  // flight while step k's mma.sync run.
  u32 a[2][L::kTm][4];
  u32 b[2][L::kTn / 2][4];
  // ldmatrix rows (LdmRows): the warp's base row is part of the lane's
  // fixed position; so is its base column when the warp tile's width is a
  // power of two (its chunk bits then miss every step's), else each step
  // adds it.
  constexpr bool kWmPow2 = (L::kWm & (L::kWm - 1)) == 0;
  constexpr bool kWnPow2 = (L::kWn & (L::kWn - 1)) == 0;
  const int a_step_col = TRANS_A && !kWmPow2 ? m_base : 0;
  const int b_step_col = !TRANS_B && !kWnPow2 ? n_base : 0;
  const LdmRows<LA> ra(
      As, TRANS_A ? r + (q / 2) * 8 : m_base + r + (q % 2) * 8,
      TRANS_A ? (kWmPow2 ? m_base : 0) + (q % 2) * 8 : (q / 2) * 8);
  const LdmRows<LB> rb(
      Bs, TRANS_B ? n_base + r + (q / 2) * 8 : r + (q % 2) * 8,
      TRANS_B ? (q % 2) * 8 : (kWnPow2 ? n_base : 0) + (q / 2) * 8);
  auto load = [&](int buf, int k0) {
#pragma unroll
    for (int mi = 0; mi < L::kTm; ++mi) {
      if (!TRANS_A) {
        ldmatrix_x4(a[buf][mi], ra.at(mi * 16, k0));
      } else {
        ldmatrix_x4_trans(a[buf][mi], ra.at(k0, a_step_col + mi * 16));
      }
    }
#pragma unroll
    for (int nj = 0; nj < L::kTn / 2; ++nj) {
      if (TRANS_B) {
        ldmatrix_x4(b[buf][nj], rb.at(nj * 16, k0));
      } else {
        ldmatrix_x4_trans(b[buf][nj], rb.at(k0, b_step_col + nj * 16));
      }
    }
  };
  load(0, 0);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    const int cur = kk % 2;
    if (kk + 1 < K / 16) load(cur ^ 1, (kk + 1) * 16);
#pragma unroll
    for (int nj = 0; nj < L::kTn / 2; ++nj) {
#pragma unroll
      for (int mi = 0; mi < L::kTm; ++mi) {
        float* c0 = &acc[(mi * L::kTn + 2 * nj) * 4];
        float* c1 = &acc[(mi * L::kTn + 2 * nj + 1) * 4];
        mma_16816<T>(*reinterpret_cast<float(*)[4]>(c0), a[cur][mi],
                     b[cur][nj][0], b[cur][nj][1]);
        mma_16816<T>(*reinterpret_cast<float(*)[4]>(c1), a[cur][mi],
                     b[cur][nj][2], b[cur][nj][3]);
      }
    }
  }
}

// Two f32 values rounded to 16-bit floats and packed (lo in the low half).
template <typename T>
__device__ __forceinline__ u32 pack2(float lo, float hi);
template <>
__device__ __forceinline__ u32 pack2<f16_t>(float lo, float hi) {
  u32 r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <>
__device__ __forceinline__ u32 pack2<bf16_t>(float lo, float hi) {
  u32 r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}

// A register accumulator (layout L: AccLayout or WgAccLayout, one warp
// per row block) rounded to T and repacked as A operands for a following
// GEMM with K = N, in registers: the C layout of two adjacent 16x8 tiles is
// the A layout of one 16x16 tile (mma.sync m16n8k16, and each warp's slice
// of wgmma's register A). `a` holds L::kTm * (N / 16) * 4 registers.
template <typename T, typename L>
__device__ __forceinline__ void pack_a_operands(u32* a, const float* acc) {
#pragma unroll
  for (int mi = 0; mi < L::kTm; ++mi) {
#pragma unroll
    for (int kk = 0; kk < L::kTn / 2; ++kk) {
      const float* c0 = &acc[(mi * L::kTn + 2 * kk) * 4];
      const float* c1 = &acc[(mi * L::kTn + 2 * kk + 1) * 4];
      u32* d = &a[(mi * (L::kTn / 2) + kk) * 4];
      d[0] = pack2<T>(c0[0], c0[1]);
      d[1] = pack2<T>(c0[2], c0[3]);
      d[2] = pack2<T>(c1[0], c1[1]);
      d[3] = pack2<T>(c1[2], c1[3]);
    }
  }
}

// The mma.sync accumulator (AccLayout<M, N, WARPS_M, 1>) as A operands.
template <typename T, int M, int N, int WARPS_M>
__device__ __forceinline__ void acc_to_a_operand(
    u32* a, const float (&acc)[AccLayout<M, N, WARPS_M, 1>::kRegs]) {
  pack_a_operands<T, AccLayout<M, N, WARPS_M, 1>>(a, acc);
}

// Two adjacent accumulator values stored at p: rounded to T (f16_t,
// bf16_t) and packed into one 4-byte store, or kept f32 (T = float) as one
// 8-byte store (store_pair), when both are in range and p is aligned;
// element by element otherwise.
template <typename T>
__device__ __forceinline__ void store_acc_pair(u16* p, float v0, float v1,
                                               bool ok0, bool ok1) {
  const u32 both = pack2<T>(v0, v1);
  if (ok0 && ok1 && (reinterpret_cast<unsigned long long>(p) & 3ull) == 0) {
    *reinterpret_cast<u32*>(p) = both;
    return;
  }
  if (ok0) p[0] = static_cast<u16>(both & 0xffffu);
  if (ok1) p[1] = static_cast<u16>(both >> 16);
}
template <typename T>
__device__ __forceinline__ void store_acc_pair(float* p, float v0, float v1,
                                               bool ok0, bool ok1) {
  store_pair(p, v0, v1, ok0, ok1);
}

// Stores a register accumulator (layout L: AccLayout or WgAccLayout, whose
// registers q and q + 1 hold adjacent columns of one row for even q) to
// g[r * row_stride + c] (g: u16 for T = f16_t / bf16_t, float for T =
// float), rows in [r_lo, r_hi) and columns in [c_lo, c_hi) of the tile, a
// pair of columns per store where it can (store_acc_pair).
template <typename T, typename L, int REGS, typename S>
__device__ __forceinline__ void r2g_acc(S* g, long long row_stride,
                                        const float (&acc)[REGS], int r_lo,
                                        int r_hi, int c_lo, int c_hi) {
#pragma unroll
  for (int q = 0; q < REGS; q += 2) {
    const int r = L::row(q), c = L::col(q);
    if (r < r_lo || r >= r_hi) continue;
    store_acc_pair<T>(g + r * row_stride + c, acc[q], acc[q + 1],
                      c >= c_lo && c < c_hi, c + 1 >= c_lo && c + 1 < c_hi);
  }
}

// acc += A @ op(B) with A already in registers (acc_to_a_operand's layout,
// K / 16 steps) and B a 16-bit shared tile laid out by LB ([K, N], or
// [N, K] when TRANS_B). One warp per row block (WARPS_N == 1).
template <typename T, int M, int N, int K, int WARPS_M, bool TRANS_B,
          typename LB>
__device__ __forceinline__ void gemm_rs(
    float (&acc)[AccLayout<M, N, WARPS_M, 1>::kRegs], const u32* a,
    const u16* Bs) {
  typedef AccLayout<M, N, WARPS_M, 1> L;
  static_assert(K % 16 == 0, "gemm_rs needs K in whole 16-element steps");
  static_assert(L::kTn % 2 == 0, "gemm_rs loads B 16 columns at a time");
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (warp >= WARPS_M) return;
  const int q = lane / 8, r = lane % 8;
  const LdmRows<LB> rb(Bs, TRANS_B ? r + (q / 2) * 8 : r + (q % 2) * 8,
                       TRANS_B ? (q % 2) * 8 : (q / 2) * 8);
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    const int k0 = kk * 16;
#pragma unroll
    for (int nj = 0; nj < L::kTn / 2; ++nj) {
      const int n0 = nj * 16;
      u32 b[4];
      if (TRANS_B) {
        ldmatrix_x4(b, rb.at(n0, k0));
      } else {
        ldmatrix_x4_trans(b, rb.at(k0, n0));
      }
#pragma unroll
      for (int mi = 0; mi < L::kTm; ++mi) {
        const u32(&am)[4] =
            *reinterpret_cast<const u32(*)[4]>(&a[(mi * (K / 16) + kk) * 4]);
        mma_16816<T>(
            *reinterpret_cast<float(*)[4]>(&acc[(mi * L::kTn + 2 * nj) * 4]),
            am, b[0], b[1]);
        mma_16816<T>(*reinterpret_cast<float(*)[4]>(
                         &acc[(mi * L::kTn + 2 * nj + 1) * 4]),
                     am, b[2], b[3]);
      }
    }
  }
}

}  // namespace kiln

#endif  // KILN_DEVICE_MMA_CUH_
