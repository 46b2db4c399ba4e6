// Global to shared tile copies through cp.async (sm_80+): 16-byte chunks,
// zero-filled past the edges of the tensor (cp.async's src-size 0), with an
// element-wise synchronous fallback for chunks that straddle an edge or a
// tensor that is not 16-byte aligned. Commit/wait groups order the stages of
// a pipelined loop.
#ifndef KILN_DEVICE_GLOBAL_TO_SHARED_CUH_
#define KILN_DEVICE_GLOBAL_TO_SHARED_CUH_

#include "kiln/shared_layout.cuh"

namespace kiln {

// One 16-byte cp.async; `src_bytes` 0 zero-fills the destination.
__device__ __forceinline__ void cp_async_16(void* smem, const void* gmem,
                                            int src_bytes) {
  asm volatile(
      "cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(smem)),
      "l"(gmem), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() {
  asm volatile("cp.async.commit_group;\n" ::);
}
// Waits until at most N committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// Whether g2s_tile_async's tile (same arguments) lies wholly inside the
// tensor with every chunk 16-byte aligned: one cp.async per chunk.
template <typename T, typename Layout>
__device__ __forceinline__ bool g2s_tile_whole(const T* g, long long row_stride,
                                               int r_lo, int r_hi, int c_lo,
                                               int c_hi) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  return ((reinterpret_cast<unsigned long long>(g) & 15ull) == 0) &&
         (row_stride % kPer == 0) && r_lo == 0 && r_hi == Layout::kRows &&
         c_lo == 0 && c_hi == Layout::kCols;
}

// Copies the tile g[r * row_stride + c] (r < Layout::kRows, c <
// Layout::kCols) into `smem` laid out by Layout, THREADS threads sharing the
// chunks. Only rows in [r_lo, r_hi) and columns in [c_lo, c_hi) are in the
// tensor; the rest is zero. `gbase` is any valid address (used for zero-fill
// chunks). Every thread of the block calls it; the data is complete after
// cp_async_commit + cp_async_wait + __syncthreads. WHOLE: the caller has
// established g2s_tile_whole (a pipelined loop's whole-tile version), so
// the copy is straight-line code with no test.
template <typename T, typename Layout, int THREADS, bool WHOLE = false>
__device__ __forceinline__ void g2s_tile_async(T* smem, const T* g,
                                               const T* gbase,
                                               long long row_stride, int r_lo,
                                               int r_hi, int c_lo, int c_hi) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  static_assert(Layout::kCols % kPer == 0, "rows must be whole chunks");
  constexpr int kChunks = Layout::kCols / kPer;
  constexpr int kTotal = Layout::kRows * kChunks;
  constexpr int kIters = (kTotal + THREADS - 1) / THREADS;
  const int tid = threadIdx.x;
  const bool aligned =
      ((reinterpret_cast<unsigned long long>(g) & 15ull) == 0) &&
      (row_stride % kPer == 0);
  if (WHOLE ||
      g2s_tile_whole<T, Layout>(g, row_stride, r_lo, r_hi, c_lo, c_hi)) {
    // The whole tile is inside the tensor: one cp.async per chunk.
    constexpr int kRowsPerIt = THREADS / kChunks;
    if constexpr (THREADS % kChunks == 0 &&
                  kRowsPerIt % Layout::kRowPeriod == 0) {
      // Each thread copies the same chunk column of rows kRowsPerIt apart,
      // whose shared offsets (a whole number of layout periods apart) and
      // global addresses differ by constant steps: one address pair per
      // thread, not a swizzle and a 64-bit product per chunk (the main loop
      // of a GEMM has no registers to keep those across iterations).
      const int r0 = tid / kChunks;
      const int c = (tid % kChunks) * kPer;
      T* const s = smem + Layout::offset(r0, c);
      const T* const src = g + r0 * row_stride + c;
      const long long step = kRowsPerIt * row_stride;
#pragma unroll
      for (int it = 0; it < kIters; ++it) {
        if (kTotal % THREADS == 0 || r0 + it * kRowsPerIt < Layout::kRows) {
          cp_async_16(s + it * kRowsPerIt * Layout::kRowPitch, src + it * step,
                      16);
        }
      }
    } else {
#pragma unroll
      for (int it = 0; it < kIters; ++it) {
        const int i = tid + it * THREADS;
        if (kTotal % THREADS == 0 || i < kTotal) {
          const int r = i / kChunks;
          const int c = (i % kChunks) * kPer;
          cp_async_16(smem + Layout::offset(r, c), g + r * row_stride + c, 16);
        }
      }
    }
    return;
  }
  if constexpr (!WHOLE) {
#pragma unroll 1
    for (int i = tid; i < kTotal; i += THREADS) {
      const int r = i / kChunks;
      const int c = (i % kChunks) * kPer;
      T* dst = smem + Layout::offset(r, c);
      const bool row_in = r >= r_lo && r < r_hi;
      if (!row_in || c + kPer <= c_lo || c >= c_hi) {
        cp_async_16(dst, gbase, 0);
      } else if (aligned && c >= c_lo && c + kPer <= c_hi) {
        cp_async_16(dst, g + r * row_stride + c, 16);
      } else {
#pragma unroll
        for (int e = 0; e < kPer; ++e) {
          const int cc = c + e;
          dst[e] = (cc >= c_lo && cc < c_hi) ? g[r * row_stride + cc] : T(0);
        }
      }
    }
  }
}

}  // namespace kiln

#endif  // KILN_DEVICE_GLOBAL_TO_SHARED_CUH_
