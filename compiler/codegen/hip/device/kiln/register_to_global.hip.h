// Vectorised global stores: an LDS tile to a global region in 16-byte
// chunks (one LDS read, one global store each), predicated at the tensor's
// edges (element by element for a chunk that straddles an edge or a tensor
// that is not 16-byte aligned).
#ifndef KILN_DEVICE_REGISTER_TO_GLOBAL_HIP_H_
#define KILN_DEVICE_REGISTER_TO_GLOBAL_HIP_H_

#include "kiln/global_to_shared.hip.h"

namespace kiln {

// Stores the LDS tile `lds` (Layout) to g[r * row_stride + c], skipping rows
// outside [r_lo, r_hi) and columns outside [c_lo, c_hi). Every thread of the
// block (THREADS threads) calls it.
template <typename T, typename Layout, int THREADS>
__device__ inline void s2g_tile(T* g, long long row_stride, const T* lds,
                                int r_lo, int r_hi, int c_lo, int c_hi) {
  constexpr int kPer = 16 / static_cast<int>(sizeof(T));
  constexpr int kRowChunks = Layout::kCols / kPer;
  constexpr int kChunks = Layout::kRows * kRowChunks;
  const bool vec_ok =
      (reinterpret_cast<u64>(g) % 16 == 0) && (row_stride % kPer == 0);
  for (int i = threadIdx.x; i < kChunks; i += THREADS) {
    const int r = i / kRowChunks, c = (i % kRowChunks) * kPer;
    if (r < r_lo || r >= r_hi || c >= c_hi || c + kPer <= c_lo) continue;
    const T* src = lds + Layout::offset(r, c);
    T* dst = g + r * row_stride + c;
    if (vec_ok && c >= c_lo && c + kPer <= c_hi) {
      *reinterpret_cast<u32x4*>(dst) = *reinterpret_cast<const u32x4*>(src);
      continue;
    }
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
      if (c + e >= c_lo && c + e < c_hi) dst[e] = src[e];
    }
  }
}

}  // namespace kiln

#endif  // KILN_DEVICE_REGISTER_TO_GLOBAL_HIP_H_
