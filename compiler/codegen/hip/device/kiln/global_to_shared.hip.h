// Global to LDS tile copies: 16-byte chunks with one vector load and one
// LDS store each, zero-filled past the edges of the tensor, element by
// element for a chunk that straddles an edge or a tensor that is not
// 16-byte aligned. gfx9 has no asynchronous global-to-LDS copy of 16-byte
// chunks (cp.async on CUDA), so the copy completes when g2s_tile_async
// returns; cp_async_commit and cp_async_wait are no-ops kept for the
// emitter's shared API. A pipelined loop still issues the copies for stage
// k + S - 1 before computing stage k, into a ring of S LDS buffers, and
// the barrier each iteration keeps the ring safe.
#ifndef KILN_DEVICE_GLOBAL_TO_SHARED_HIP_H_
#define KILN_DEVICE_GLOBAL_TO_SHARED_HIP_H_

#include "kiln/shared_layout.hip.h"

namespace kiln {

typedef u32 u32x4 __attribute__((ext_vector_type(4)));

__device__ inline void cp_async_commit() {}
template <int N>
__device__ inline void cp_async_wait() {}

// Copies the tile g[r * row_stride + c] (r < Layout::kRows, c <
// Layout::kCols) into `lds` laid out by Layout, THREADS threads sharing the
// chunks. Only rows in [r_lo, r_hi) and columns in [c_lo, c_hi) are in the
// tensor; the rest is zero. `gbase` is unused (CUDA's zero-fill address).
// Every thread of the block calls it; the tile is complete after the next
// __syncthreads.
template <typename T, typename Layout, int THREADS>
__device__ inline void g2s_tile_async(T* lds, const T* g, const T* gbase,
                                      long long row_stride, int r_lo, int r_hi,
                                      int c_lo, int c_hi) {
  (void)gbase;
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  static_assert(Layout::kCols % kPer == 0, "rows must be whole chunks");
  constexpr int kRowChunks = Layout::kCols / kPer;
  constexpr int kChunks = Layout::kRows * kRowChunks;
  const bool vec_ok =
      (reinterpret_cast<u64>(g) % 16 == 0) && (row_stride % kPer == 0);
  const bool whole =
      r_lo == 0 && r_hi == Layout::kRows && c_lo == 0 && c_hi == Layout::kCols;
  if (vec_ok && whole) {
    // Every chunk inside: loads first, then stores, so that a thread's
    // loads are all in flight together.
    constexpr int kRounds = (kChunks + THREADS - 1) / THREADS;
    u32x4 v[kRounds];
#pragma unroll
    for (int k = 0; k < kRounds; ++k) {
      const int i = threadIdx.x + k * THREADS;
      if (kChunks % THREADS == 0 || i < kChunks) {
        const int r = i / kRowChunks, c = (i % kRowChunks) * kPer;
        v[k] = *reinterpret_cast<const u32x4*>(g + r * row_stride + c);
      }
    }
#pragma unroll
    for (int k = 0; k < kRounds; ++k) {
      const int i = threadIdx.x + k * THREADS;
      if (kChunks % THREADS == 0 || i < kChunks) {
        const int r = i / kRowChunks, c = (i % kRowChunks) * kPer;
        *reinterpret_cast<u32x4*>(lds + Layout::offset(r, c)) = v[k];
      }
    }
    return;
  }
  for (int i = threadIdx.x; i < kChunks; i += THREADS) {
    const int r = i / kRowChunks, c = (i % kRowChunks) * kPer;
    T* dst = lds + Layout::offset(r, c);
    const bool row_in = r >= r_lo && r < r_hi;
    if (row_in && vec_ok && c >= c_lo && c + kPer <= c_hi) {
      *reinterpret_cast<u32x4*>(dst) =
          *reinterpret_cast<const u32x4*>(g + r * row_stride + c);
      continue;
    }
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      const bool in = row_in && c + e >= c_lo && c + e < c_hi;
      dst[e] = in ? g[r * row_stride + c + e] : T(0);
    }
  }
}

}  // namespace kiln

#endif  // KILN_DEVICE_GLOBAL_TO_SHARED_HIP_H_
