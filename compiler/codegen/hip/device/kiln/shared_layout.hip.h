// LDS tile layouts, as on CUDA (the emitter names them): `RowMajor` with
// optional padding for every tile, and `Swizzled` for the 16-bit operand
// tiles of MFMA GEMMs. Swizzled XORs each row's 16-byte chunk index with
// the row (within aligned groups of up to 8 chunks), so the 16 rows that the 16
// lanes of an MFMA operand load read at one k offset fall in different
// bank groups instead of one.
#ifndef KILN_DEVICE_SHARED_LAYOUT_HIP_H_
#define KILN_DEVICE_SHARED_LAYOUT_HIP_H_

#include "kiln/scalar.hip.h"

namespace kiln {

template <int ROWS, int COLS, int PAD = 0>
struct RowMajor {
  enum : int { kRows = ROWS, kCols = COLS, kPitch = COLS + PAD };
  enum : int { kElems = ROWS * kPitch };
  __device__ static inline int offset(int r, int c) { return r * kPitch + c; }
};

template <int ROWS, int COLS, int ELEM_BYTES>
struct Swizzled {
  static_assert((COLS * ELEM_BYTES) % 16 == 0,
                "a swizzled LDS tile needs rows of whole 16-byte chunks");
  enum : int { kRows = ROWS, kCols = COLS, kElems = ROWS * COLS };
  enum : int { kChunkElems = 16 / ELEM_BYTES };
  enum : int { kRowChunks = COLS / kChunkElems };
  // The XOR range: the largest power of two (up to 8) dividing the row's
  // chunk count, so a permuted chunk never leaves its row.
  enum : int { kLowBit = kRowChunks & -kRowChunks };
  enum : int { kMask = (kLowBit > 8 ? 8 : kLowBit) - 1 };
  __device__ static inline int offset(int r, int c) {
    const int chunk = (c / kChunkElems) ^ (r & kMask);
    return r * COLS + chunk * kChunkElems + c % kChunkElems;
  }
};

}  // namespace kiln

#endif  // KILN_DEVICE_SHARED_LAYOUT_HIP_H_
