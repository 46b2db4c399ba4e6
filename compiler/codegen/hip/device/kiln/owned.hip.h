// Thread-owned fragments (fragment_plan.h, step 7): a ROWS x COLS fragment
// held in registers, cut row-major into chunks of VEC adjacent columns;
// chunk g is thread g % THREADS's register chunk g / THREADS, so a thread's
// registers q = VEC * c .. VEC * c + VEC - 1 hold one row's columns
// col(q) .. col(q) + VEC - 1, and a whole chunk moves to or from global
// memory with one vector access (copy_chunk).
#ifndef KILN_DEVICE_OWNED_HIP_H_
#define KILN_DEVICE_OWNED_HIP_H_

#include "kiln/global_to_shared.hip.h"

namespace kiln {

typedef u32 u32x2 __attribute__((ext_vector_type(2)));

template <int ROWS, int COLS, int THREADS, int VEC>
struct OwnLayout {
  static_assert(COLS % VEC == 0 && (ROWS * COLS) % (VEC * THREADS) == 0,
                "chunks must divide the columns and spread evenly");
  static constexpr int kRegs = ROWS * COLS / THREADS;
  // The element (row-major) in register q of this thread.
  __device__ inline static int elem(int q) {
    return ((q / VEC) * THREADS + static_cast<int>(threadIdx.x)) * VEC +
           q % VEC;
  }
  __device__ inline static int row(int q) { return elem(q) / COLS; }
  __device__ inline static int col(int q) { return elem(q) % COLS; }
};

// The rows of an OwnLayout<ROWS, COLS, THREADS, VEC> fragment as a row
// vector in registers: register k of a thread holds the row of its chunk k
// (every lane whose chunk lies in that row holds the same value). A row of
// more chunks than threads (a multiple of them) lies in GROUP consecutive
// chunks of every thread: those share one register.
template <int ROWS, int COLS, int THREADS, int VEC>
struct OwnRowLayout {
  static constexpr int kChunks = COLS / VEC;
  static constexpr int kGroup =
      kChunks > THREADS&& kChunks % THREADS == 0 ? kChunks / THREADS : 1;
  static constexpr int kRegs = ROWS * COLS / THREADS / VEC / kGroup;
  __device__ inline static int row(int k) {
    return ((k * kGroup * THREADS + static_cast<int>(threadIdx.x)) * VEC) /
           COLS;
  }
  // The register holding the row of owned register q.
  __device__ inline static int slot(int q) { return q / (VEC * kGroup); }
  // Whether this thread holds the first chunk of register k's row: one
  // (thread, register) pair per row, the one that stores it to memory.
  __device__ inline static bool lead(int k) {
    return ((k * kGroup * THREADS + static_cast<int>(threadIdx.x)) * VEC) %
               COLS ==
           0;
  }
};

// Copies N elements of type T between a register array (aligned to 16
// bytes) and memory aligned to their whole size when that is 4, 8 or 16
// bytes, or a multiple of 16, in as few accesses: a chunk's load
// (copy_chunk<N>(regs, p)) or store (copy_chunk<N>(p, regs)).
template <int N, typename T>
__device__ inline void copy_chunk(T* dst, const T* src) {
  constexpr int kBytes = N * static_cast<int>(sizeof(T));
  if constexpr (kBytes % 16 == 0) {
#pragma unroll
    for (int i = 0; i < kBytes / 16; ++i) {
      reinterpret_cast<u32x4*>(dst)[i] = reinterpret_cast<const u32x4*>(src)[i];
    }
  } else if constexpr (kBytes == 8) {
    *reinterpret_cast<u32x2*>(dst) = *reinterpret_cast<const u32x2*>(src);
  } else if constexpr (kBytes == 4) {
    *reinterpret_cast<u32*>(dst) = *reinterpret_cast<const u32*>(src);
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) dst[i] = src[i];
  }
}

// The part [first, end) of an N-element chunk at p, the rest outside the
// tensor (an edge chunk): one access for the whole chunk when all of it is
// there and `aligned`, else element by element; a load zeroes the elements
// outside the part. `first` and `end` are run-time values, so an edge path
// of many chunks stays as small as the path without edges.
template <int N, typename T>
__device__ inline void load_chunk_part(T* regs, const T* p, int first, int end,
                                       bool aligned) {
  if (first == 0 && end == N && aligned) {
    copy_chunk<N>(regs, p);
    return;
  }
#pragma unroll
  for (int i = 0; i < N; ++i) regs[i] = first <= i && i < end ? p[i] : T(0);
}
template <int N, typename T>
__device__ inline void store_chunk_part(T* p, const T* regs, int first, int end,
                                        bool aligned) {
  if (first == 0 && end == N && aligned) {
    copy_chunk<N>(p, regs);
    return;
  }
#pragma unroll
  for (int i = 0; i < N; ++i) {
    if (first <= i && i < end) p[i] = regs[i];
  }
}

// Whether a chunk of `bytes` bytes at p may be accessed whole.
__device__ inline bool chunk_aligned(const void* p, int bytes) {
  const int a = bytes % 16 == 0 ? 16 : bytes;
  return (reinterpret_cast<u64>(p) & static_cast<u64>(a - 1)) == 0;
}

}  // namespace kiln

#endif  // KILN_DEVICE_OWNED_HIP_H_
