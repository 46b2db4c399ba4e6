// Vectorised global memory access: 16-byte loads and stores of whole chunks,
// predicated at tensor edges (element-wise for a chunk that straddles an edge
// or a tensor that is not 16-byte aligned), for contiguous rows of tiles.
#ifndef KILN_DEVICE_REGISTER_TO_GLOBAL_CUH_
#define KILN_DEVICE_REGISTER_TO_GLOBAL_CUH_

#include "kiln/shared_layout.cuh"

namespace kiln {

struct alignas(16) Chunk16 {
  u32 w[4];
};

// Stores the shared tile `smem` (Layout) to g[r * row_stride + c], skipping
// rows outside [r_lo, r_hi) and columns outside [c_lo, c_hi). Every thread
// of the block (THREADS threads) calls it.
template <typename T, typename Layout, int THREADS>
__device__ __forceinline__ void s2g_tile(T* g, long long row_stride,
                                         const T* smem, int r_lo, int r_hi,
                                         int c_lo, int c_hi) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  constexpr int kChunks = Layout::kCols / kPer;
  constexpr int kTotal = Layout::kRows * kChunks;
  const bool aligned =
      ((reinterpret_cast<unsigned long long>(g) & 15ull) == 0) &&
      (row_stride % kPer == 0);
  for (int i = threadIdx.x; i < kTotal; i += THREADS) {
    const int r = i / kChunks;
    const int c = (i % kChunks) * kPer;
    if (r < r_lo || r >= r_hi || c + kPer <= c_lo || c >= c_hi) continue;
    const T* src = smem + Layout::offset(r, c);
    if (aligned && c >= c_lo && c + kPer <= c_hi) {
      *reinterpret_cast<Chunk16*>(g + r * row_stride + c) =
          *reinterpret_cast<const Chunk16*>(src);
    } else {
#pragma unroll
      for (int e = 0; e < kPer; ++e) {
        if (c + e >= c_lo && c + e < c_hi) g[r * row_stride + c + e] = src[e];
      }
    }
  }
}

// Two adjacent 32-bit values stored with one 8-byte store when both are in
// range and aligned, else one by one.
template <typename T>
__device__ __forceinline__ void store_pair(T* p, T v0, T v1, bool ok0,
                                           bool ok1) {
  if (sizeof(T) == 4 && ok0 && ok1 &&
      (reinterpret_cast<unsigned long long>(p) & 7ull) == 0) {
    T tmp[2] = {v0, v1};
    *reinterpret_cast<uint2*>(p) = *reinterpret_cast<uint2*>(tmp);
    return;
  }
  if (ok0) p[0] = v0;
  if (ok1) p[1] = v1;
}

}  // namespace kiln

#endif  // KILN_DEVICE_REGISTER_TO_GLOBAL_CUH_
