// Hopper warpgroup MMA (sm_90a): `wgmma.mma_async` from shared-memory
// operand tiles described by 64-bit matrix descriptors, accumulating f32 in
// registers. Included only by kernels the compiler lowers to the Hopper path
// (wgmma needs the `sm_90a` target).
//
// Shared operand layout (WgmmaTile): a ROWS x COLS tile (COLS contiguous)
// is stored as column panels SPAN bytes wide (128, 64 or 32: the widest
// that divides a row), each panel ROWS x SPAN bytes and contiguous; inside a
// panel the 16-byte chunks of row r are XOR-permuted by a function of r, the
// pattern the hardware's 128/64/32-byte swizzle modes expect. Panels start
// at multiples of 1024 bytes from a 1024-byte-aligned base, so the
// descriptor's base offset is 0.
//
// Accumulator layout (WgAccLayout): the block's WGS_M x WGS_N warpgroups
// split the M x N tile into WGS_M row slices of Wm = M / WGS_M rows (whole
// 64-row wgmma tiles) and WGS_N column slices of Wn = N / WGS_N columns;
// warpgroup g owns row slice g / WGS_N and column slice g % WGS_N (WGS_N = 1:
// every column). Warp w of the warpgroup holds rows 16 w .. 16 w + 15 of
// each 64-row tile, in the same per-lane pattern as mma.sync's 16 x 8 C tile
// (kiln/mma): register q = (mi * Wn / 8 + ni) * 4 + e holds row row0 + mi *
// 64 + 16 w + lane / 4 + (e / 2) * 8, column col0 + ni * 8 + 2 * (lane % 4)
// + e % 2 (row0, col0: the slice's origin). Registers [mi * Wn / 2, (mi +
// 1) * Wn / 2) are exactly one m64nWnk16 instruction's accumulator operand.
// A column split is how an accumulator too wide for one warpgroup's
// registers (MLA's 64 x 512 output) still runs on wgmma; its row
// reductions meet across warpgroups in shared memory, and every column
// slice keeps a copy of the row vectors (WgRowLayout).
#ifndef KILN_DEVICE_WGMMA_CUH_
#define KILN_DEVICE_WGMMA_CUH_

#include "kiln/shared_layout.cuh"
#include "kiln/wgmma_instr.cuh"

namespace kiln {

// From kiln/mma.cuh, which generated kernels include first.
template <typename T, typename L>
__device__ __forceinline__ void pack_a_operands(u32* a, const float* acc);

template <int ROWS, int COLS, int ELEM_BYTES>
struct WgmmaTile {
  enum : int { kRows = ROWS, kCols = COLS, kElems = ROWS * COLS };
  enum : int { kRowBytes = COLS * ELEM_BYTES };
  static_assert(kRowBytes % 32 == 0,
                "a wgmma operand tile needs rows of a multiple of 32 bytes");
  static_assert(ROWS % 8 == 0, "a wgmma operand tile needs rows in eights");
  enum : int {
    kSpan = kRowBytes % 128 == 0  ? 128
            : kRowBytes % 64 == 0 ? 64
                                  : 32
  };
  enum : int { kPanel = kSpan / ELEM_BYTES };  // elements per panel row
  enum : int { kPerChunk = 16 / ELEM_BYTES };
  enum : int { kChunks = kSpan / 16 };         // chunks per panel row
  enum : int { kRowsPerPhase = 8 / kChunks };  // rows sharing one xor
  // offset(r + kRowPeriod, c) == offset(r, c) + kRowPeriod * kRowPitch.
  enum : int { kRowPeriod = 8, kRowPitch = kPanel };
  // Descriptor layout field: 1 = 128-byte, 2 = 64-byte, 3 = 32-byte swizzle.
  enum : int { kMode = kSpan == 128 ? 1 : kSpan == 64 ? 2 : 3 };
  __device__ __forceinline__ static int offset(int r, int c) {
    const int chunk = (c % kPanel) / kPerChunk;
    return (c / kPanel) * (ROWS * kPanel) + r * kPanel +
           (chunk ^ ((r / kRowsPerPhase) % kChunks)) * kPerChunk +
           c % kPerChunk;
  }
  // ldmatrix addressing (see Swizzled::Cursor), for an mma.sync GEMM that
  // reads a tile laid out for wgmma (an accumulator too short for a
  // warpgroup sharing an operand with wgmma GEMMs). A step may cross
  // panels, so it takes the whole offset; R and C are compile-time, so
  // most of it folds.
  struct Cursor {
    int r, c;
  };
  __device__ __forceinline__ static Cursor cursor(int r, int c) {
    return {r, c};
  }
  __device__ __forceinline__ static int step(Cursor cu, int R, int C) {
    return offset(cu.r + R, cu.c + C);
  }
  __device__ __forceinline__ static u64 encode(u32 bytes) {
    return static_cast<u64>((bytes & 0x3FFFF) >> 4);
  }
  // The operand whose K runs along the columns (K-major): rows r0 .. of the
  // M (or N) dimension, the 16-deep K step starting at column k0.
  __device__ __forceinline__ static u64 desc_k_major(const void* base, int r0,
                                                     int k0) {
    const u32 addr = smem_addr(base) + (k0 / kPanel) * (ROWS * kSpan) +
                     r0 * kSpan + (k0 % kPanel) * ELEM_BYTES;
    return encode(addr) | (encode(16) << 16) | (encode(8 * kSpan) << 32) |
           (static_cast<u64>(kMode) << 62);
  }
  // The operand whose M (or N) runs along the columns (MN-major): columns
  // c0 .. (c0 a multiple of the panel width), the K step starting at row k0;
  // successive panels are ROWS * SPAN bytes apart (the leading offset).
  __device__ __forceinline__ static u64 desc_mn_major(const void* base, int c0,
                                                      int k0) {
    const u32 addr =
        smem_addr(base) + (c0 / kPanel) * (ROWS * kSpan) + k0 * kSpan;
    return encode(addr) | (encode(ROWS * kSpan) << 16) |
           (encode(8 * kSpan) << 32) | (static_cast<u64>(kMode) << 62);
  }
};

template <int M, int N, int WGS_M, int WGS_N = 1>
struct WgAccLayout {
  enum : int { kWm = M / WGS_M, kWn = N / WGS_N };
  static_assert(M % WGS_M == 0 && kWm % 64 == 0,
                "each warpgroup's rows must be whole 64-row wgmma tiles");
  static_assert(N % WGS_N == 0 && kWn % 8 == 0 && kWn <= 256,
                "each warpgroup's wgmma N is 8..256 in eights");
  enum : int { kTm = kWm / 64, kTn = kWn / 8 };
  enum : int { kRegs = kTm * kTn * 4 };  // per thread
  // This thread's warpgroup's row and column slice, and their origins.
  __device__ __forceinline__ static int wg_m() {
    return (threadIdx.x / 128) / WGS_N;
  }
  __device__ __forceinline__ static int wg_n() {
    return (threadIdx.x / 128) % WGS_N;
  }
  __device__ __forceinline__ static int row0() { return wg_m() * kWm; }
  __device__ __forceinline__ static int col0() { return wg_n() * kWn; }
  __device__ __forceinline__ static int row(int q) {
    const int warp = (threadIdx.x / 32) % 4, lane = threadIdx.x % 32;
    const int mi = (q / 4) / kTn, e = q % 4;
    return row0() + mi * 64 + warp * 16 + lane / 4 + (e / 2) * 8;
  }
  __device__ __forceinline__ static int col(int q) {
    const int lane = threadIdx.x % 32;
    const int ni = (q / 4) % kTn, e = q % 4;
    return col0() + ni * 8 + (lane % 4) * 2 + (e % 2);
  }
  // The index, in WgRowLayout<M, WGS_M, WGS_N>, of register q's row.
  __device__ __forceinline__ static int row_reg(int q) {
    return ((q / 4) / kTn) * 2 + (q % 4) / 2;
  }
};

// A vector over the rows of a WgAccLayout<M, *, WGS_M, WGS_N>: each thread
// holds its own rows (2 per 64-row tile), the 4 lanes of a row group
// holding the same values; the WGS_N warpgroups of a row slice (its column
// slices) each hold a copy, and the first one's stores it.
template <int M, int WGS_M, int WGS_N = 1>
struct WgRowLayout {
  enum : int { kWm = M / WGS_M };
  static_assert(M % WGS_M == 0 && kWm % 64 == 0,
                "each warpgroup's rows must be whole 64-row wgmma tiles");
  enum : int { kRegs = kWm / 64 * 2 };
  __device__ __forceinline__ static int row(int q) {
    const int wg = (threadIdx.x / 128) / WGS_N, warp = (threadIdx.x / 32) % 4;
    const int lane = threadIdx.x % 32;
    return wg * kWm + (q / 2) * 64 + warp * 16 + lane / 4 + (q % 2) * 8;
  }
  // This thread's warpgroup holds the copy that is stored.
  __device__ __forceinline__ static bool first_slice() {
    return (threadIdx.x / 128) % WGS_N == 0;
  }
};

// Orders this thread's earlier register writes (accumulators, A operands)
// before the wgmma that follow.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most N committed wgmma groups are in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Makes this thread's generic-proxy shared-memory writes (st.shared,
// cp.async) visible to the async proxy (wgmma, TMA); each writing thread
// issues it before the barrier that publishes the data.
__device__ __forceinline__ void fence_proxy_async() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Pins the accumulator registers at this point of the program: the
// compiler may not move, copy or rematerialise them across it. Around an
// asynchronous wgmma group this keeps other instructions from defining
// them while the group runs (which ptxas would answer by serialising the
// wgmma, warning C7515).
template <int N>
__device__ __forceinline__ void wgmma_fence_operands(float (&acc)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}
// The same for register A operands (packed pairs).
template <int N>
__device__ __forceinline__ void wgmma_fence_operands(u32 (&a)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// Issues the wgmma of acc (+)= op(A) @ op(B) over the block tile, K in
// steps of KSTEP (32 bytes: 16 for 16-bit types, 32 for fp8); the first
// step accumulates onto acc only when ACCUMULATE (else it overwrites acc,
// which need not be initialised: INSTR::mma_first). A is [M, K] ([K, M] when
// TRANS_A), B is [K, N] ([N, K] when TRANS_B), both WgmmaTile layouts;
// the product covers B's N columns (or rows) from n0 (a column chunk of a
// wider B tile). INSTR is the m64nNkKSTEP instruction for this N, dtype
// and operand majorness (`static void mma(float (&)[N / 2], u64 desc_a,
// u64 desc_b, int scale_d)`, generated with the kernel).
template <typename INSTR, int M, int N, int K, int KSTEP, int WGS_M,
          bool TRANS_A, bool TRANS_B, bool ACCUMULATE, typename LA, typename LB>
__device__ __forceinline__ void wgmma_tile(
    float (&acc)[(WgAccLayout<M, N, WGS_M>::kRegs)], const void* As,
    const void* Bs, int wg, int n0 = 0) {
  typedef WgAccLayout<M, N, WGS_M> L;
  static_assert(K % KSTEP == 0, "the tile's K is not whole wgmma steps");
#pragma unroll
  for (int kk = 0; kk < K / KSTEP; ++kk) {
    const u64 db = TRANS_B ? LB::desc_k_major(Bs, n0, kk * KSTEP)
                           : LB::desc_mn_major(Bs, n0, kk * KSTEP);
#pragma unroll
    for (int mi = 0; mi < L::kTm; ++mi) {
      const int m0 = wg * L::kWm + mi * 64;
      const u64 da = TRANS_A ? LA::desc_mn_major(As, m0, kk * KSTEP)
                             : LA::desc_k_major(As, m0, kk * KSTEP);
      float(&d)[N / 2] = *reinterpret_cast<float(*)[N / 2]>(&acc[mi * (N / 2)]);
      if constexpr (!ACCUMULATE) {
        if (kk == 0) {
          INSTR::mma_first(d, da, db);  // writes d without reading it
          continue;
        }
      }
      INSTR::mma(d, da, db, 1);
    }
  }
}

// acc += op(A) @ op(B) over the block tile with wgmma, issued and committed
// as one group (the caller waits); the block's WGS_M x WGS_N warpgroups each
// own a 64-row-tiled slice (WgAccLayout), reading their rows of A and their
// columns of B.
template <typename INSTR, int M, int N, int K, int KSTEP, int WGS_M,
          bool TRANS_A, bool TRANS_B, typename LA, typename LB, int WGS_N = 1>
__device__ __forceinline__ void gemm_wg(
    float (&acc)[(WgAccLayout<M, N, WGS_M, WGS_N>::kRegs)], const void* As,
    const void* Bs) {
  typedef WgAccLayout<M, N, WGS_M, WGS_N> L;
  // (Every consumer warpgroup owns a slice: WGS_M * WGS_N is the program's
  // threads / 128, so no thread branches here; a branch would put the
  // accumulator's setup on a divergent path and serialise the wgmma.)
  wgmma_fence_operands(acc);
  wgmma_fence();
  wgmma_tile<INSTR, M, L::kWn, K, KSTEP, WGS_M, TRANS_A, TRANS_B, true, LA, LB>(
      acc, As, Bs, L::wg_m(), L::col0());
  wgmma_commit();
  wgmma_fence_operands(acc);
}

// The wgmma accumulator (WgAccLayout<M, N, WGS_M>) rounded to T and
// repacked as register A operands for a following GEMM with K = N (per
// 64-row tile and 16-deep step, each warp's 16 x 16 slice).
template <typename T, int M, int N, int WGS_M>
__device__ __forceinline__ void acc_to_a_operand_wg(
    u32* a, const float (&acc)[(WgAccLayout<M, N, WGS_M>::kRegs)]) {
  pack_a_operands<T, WgAccLayout<M, N, WGS_M>>(a, acc);
}

// acc += A @ op(B) with wgmma, A from registers (acc_to_a_operand_wg's
// layout, K / 16 steps) and B a WgmmaTile ([K, N], or [N, K] when
// TRANS_B); one committed group (the caller waits). INSTR is the register-A
// m64nNk16 instruction (`static void mma(float (&)[N / 2], const u32* a,
// u64 desc_b, int scale_d)`).
template <typename INSTR, int M, int N, int K, int WGS_M, bool TRANS_B,
          typename LB>
__device__ __forceinline__ void gemm_wg_rs(
    float (&acc)[(WgAccLayout<M, N, WGS_M>::kRegs)], const u32* a,
    const void* Bs) {
  typedef WgAccLayout<M, N, WGS_M> L;
  static_assert(K % 16 == 0, "gemm_wg_rs needs K in whole 16-element steps");
  // (No warpgroup branch: see gemm_wg. The register A operand is the
  // warpgroup's own.)
  wgmma_fence_operands(acc);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < K / 16; ++kk) {
    const u64 db = TRANS_B ? LB::desc_k_major(Bs, 0, kk * 16)
                           : LB::desc_mn_major(Bs, 0, kk * 16);
#pragma unroll
    for (int mi = 0; mi < L::kTm; ++mi) {
      INSTR::mma(*reinterpret_cast<float(*)[N / 2]>(&acc[mi * (N / 2)]),
                 &a[(mi * (K / 16) + kk) * 4], db, 1);
    }
  }
  wgmma_commit();
  wgmma_fence_operands(acc);
}

// The fp8 form of gemm_wg: the tile's product is accumulated by wgmma in a
// fresh register tile and added to acc in f32 once its group completes
// (FP8 wgmma accumulates with about 14 bits of mantissa; promoting every
// tile keeps long K accurate). Waits for its group.
//
// The product is taken NC columns at a time (INSTR is the m64nNCk32
// instruction), so that a wide tile's accumulator and one chunk's product
// fit the registers together (128 x 256 tiles: 128 accumulator registers
// and a 64-register chunk, where a whole product would need 128 more).
// Each chunk reads the warpgroup's A tile again, so a tile whose whole
// product fits takes it at once (NC = N).
//
// Two consumer warpgroups issue independently: while one waits for its
// product and adds it, the tensor cores run the other's. (Taking turns on
// named barriers, warpgroup 0 then 1, measured 1-8% slower on the H200.)
template <typename INSTR, int M, int N, int K, int KSTEP, int WGS_M,
          bool TRANS_A, bool TRANS_B, typename LA, typename LB, int NC = N>
__device__ __forceinline__ void gemm_wg_promoted(
    float (&acc)[(WgAccLayout<M, N, WGS_M>::kRegs)], const void* As,
    const void* Bs) {
  typedef WgAccLayout<M, N, WGS_M> L;
  static_assert(N % NC == 0 && NC % 8 == 0, "whole column chunks");
  // (No warpgroup branch: see gemm_wg.)
  const int wg = threadIdx.x / 128;
#pragma unroll
  for (int c = 0; c < N / NC; ++c) {
    // The chunk's product, in the layout of an NC-column tile: per 64-row
    // tile, NC / 2 registers (the wgmma accumulator layout keeps each
    // 8-column group's 4 values together, so the chunk is registers
    // [c * NC / 2, (c + 1) * NC / 2) of a tile of acc).
    // (Not zeroed: the first wgmma step overwrites it.)
    float part[WgAccLayout<M, NC, WGS_M>::kRegs];
    wgmma_fence();
    wgmma_tile<INSTR, M, NC, K, KSTEP, WGS_M, TRANS_A, TRANS_B, false, LA, LB>(
        part, As, Bs, wg, c * NC);
    wgmma_commit();
    wgmma_wait<0>();
    wgmma_fence_operands(part);
#pragma unroll
    for (int mi = 0; mi < L::kTm; ++mi) {
#pragma unroll
      for (int i = 0; i < NC / 2; ++i) {
        acc[mi * (N / 2) + c * (NC / 2) + i] += part[mi * (NC / 2) + i];
      }
    }
  }
}

}  // namespace kiln

#endif  // KILN_DEVICE_WGMMA_CUH_
