// Shared-memory tile layouts. `Swizzled<ROWS, COLS, ELEM_BYTES>` permutes the
// 16-byte chunks of each row (chunk ^= a function of the row) so that the
// eight 16-byte rows one ldmatrix phase reads, and the chunks one cp.async
// wave writes, fall in eight different bank groups: no bank conflicts for
// tensor-core operand tiles. `RowMajor` (optionally padded) is the plain
// layout every other tile uses.
#ifndef KILN_DEVICE_SHARED_LAYOUT_CUH_
#define KILN_DEVICE_SHARED_LAYOUT_CUH_

#include "kiln/scalar.cuh"

namespace kiln {

template <int ROWS, int COLS, int PAD = 0>
struct RowMajor {
  enum : int { kRows = ROWS, kCols = COLS };
  enum : int { kElems = ROWS * (COLS + PAD) };
  // offset(r + kRowPeriod, c) == offset(r, c) + kRowPeriod * kRowPitch.
  enum : int { kRowPeriod = 1, kRowPitch = COLS + PAD };
  __device__ __forceinline__ static int offset(int r, int c) {
    return r * (COLS + PAD) + c;
  }
  // ldmatrix addressing: see Swizzled::Cursor.
  struct Cursor {
    int off;
  };
  __device__ __forceinline__ static Cursor cursor(int r, int c) {
    return {offset(r, c)};
  }
  __device__ __forceinline__ static int step(Cursor cu, int R, int C) {
    return cu.off + R * (COLS + PAD) + C;
  }
};

template <int ROWS, int COLS, int ELEM_BYTES>
struct Swizzled {
  static_assert((COLS * ELEM_BYTES) % 16 == 0,
                "a swizzled tile needs rows of whole 16-byte chunks");
  enum : int { kRows = ROWS, kCols = COLS };
  enum : int { kElems = ROWS * COLS };
  enum : int { kPerChunk = 16 / ELEM_BYTES };  // elements
  enum : int { kChunks = COLS / kPerChunk };   // per row
  // The xor range: the largest power of two (at most 8) dividing the chunk
  // count, so that a chunk stays inside its row (with 6 or 12 chunks, an
  // xor by up to 7 would reach chunks the row does not have).
  enum : int {
    kGroup = kChunks % 8 == 0   ? 8
             : kChunks % 4 == 0 ? 4
             : kChunks % 2 == 0 ? 2
                                : 1
  };
  enum : int { kRowsPerPhase = 8 / kGroup };  // rows sharing an xor
  // offset(r + kRowPeriod, c) == offset(r, c) + kRowPeriod * kRowPitch.
  enum : int { kRowPeriod = 8, kRowPitch = COLS };
  __device__ __forceinline__ static int chunk_of(int r, int chunk) {
    return chunk ^ ((r / kRowsPerPhase) % kGroup);
  }
  __device__ __forceinline__ static int offset(int r, int c) {
    const int chunk = c / kPerChunk;
    return r * COLS + chunk_of(r, chunk) * kPerChunk + (c % kPerChunk);
  }
  // ldmatrix addressing for the tile GEMMs: a lane reads at (r + R, c + C),
  // where (r, c) is fixed for the whole GEMM (the lane's and its warp's
  // part) and (R, C) are the unrolled loops' compile-time steps. When R is
  // a multiple of kRowPeriod and the chunk indices of c and C share no bit
  // (so their sum is their xor), offset(r + R, c + C) == step(cursor(r, c),
  // R, C): the swizzle of (r, c) is taken once, and each step is one xor
  // with a constant and a constant add, instead of the swizzle per load.
  struct Cursor {
    int row;    // r * COLS + c % kPerChunk
    int chunk;  // the swizzled chunk of (r, c)
  };
  __device__ __forceinline__ static Cursor cursor(int r, int c) {
    return {r * COLS + c % kPerChunk, chunk_of(r, c / kPerChunk)};
  }
  __device__ __forceinline__ static int step(Cursor cu, int R, int C) {
    return cu.row + R * COLS + ((C / kPerChunk) ^ cu.chunk) * kPerChunk;
  }
};

__device__ __forceinline__ u32 smem_addr(const void* p) {
  return static_cast<u32>(__cvta_generic_to_shared(p));
}

}  // namespace kiln

#endif  // KILN_DEVICE_SHARED_LAYOUT_CUH_
