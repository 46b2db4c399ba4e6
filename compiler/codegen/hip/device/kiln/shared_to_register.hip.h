// LDS to registers for MFMA operands. v_mfma_f32_16x16x16{f16,bf16_1k} on a
// 64-lane wavefront takes, per lane l, four 16-bit values of A and four of
// B (AMD Instinct MI200 ISA, "Dependent arithmetic: MFMA"; the AMD matrix
// instruction calculator):
//   A (16 x 16, M x K): lane l holds A[l % 16][4 * (l / 16) + i], i = 0..3
//   B (16 x 16, K x N): lane l holds B[4 * (l / 16) + i][l % 16], i = 0..3
// (only the pairing matters for the product: A and B must agree on which
// k each lane and register carry). The loaders below read those four
// values from an LDS tile in any layout L (L::offset(row, col)), with one
// 8-byte read when they are contiguous.
#ifndef KILN_DEVICE_SHARED_TO_REGISTER_HIP_H_
#define KILN_DEVICE_SHARED_TO_REGISTER_HIP_H_

#include "kiln/shared_layout.hip.h"

namespace kiln {

typedef short s16x4 __attribute__((ext_vector_type(4)));

// The four 16-bit values t[row][k0 + i] (i = 0..3), k0 a multiple of 4:
// adjacent in every layout (chunks are 8 elements), so one 8-byte load.
template <typename L>
__device__ inline s16x4 lds_row4(const u16* t, int row, int k0) {
  return *reinterpret_cast<const s16x4*>(t + L::offset(row, k0));
}
// The four 16-bit values t[k0 + i][col] (i = 0..3): a column, four loads.
template <typename L>
__device__ inline s16x4 lds_col4(const u16* t, int k0, int col) {
  s16x4 v;
  v[0] = static_cast<short>(t[L::offset(k0, col)]);
  v[1] = static_cast<short>(t[L::offset(k0 + 1, col)]);
  v[2] = static_cast<short>(t[L::offset(k0 + 2, col)]);
  v[3] = static_cast<short>(t[L::offset(k0 + 3, col)]);
  return v;
}

// A operand of the 16 x 16 block at (m0, k0) of op(A): A is [M, K] in LDS,
// or [K, M] when TRANS.
template <bool TRANS, typename L>
__device__ inline s16x4 load_a_operand(const u16* a, int m0, int k0, int lane) {
  const int row = m0 + lane % 16, k = k0 + 4 * (lane / 16);
  return TRANS ? lds_col4<L>(a, k, row) : lds_row4<L>(a, row, k);
}
// B operand of the 16 x 16 block at (k0, n0) of op(B): B is [K, N] in LDS,
// or [N, K] when TRANS.
template <bool TRANS, typename L>
__device__ inline s16x4 load_b_operand(const u16* b, int k0, int n0, int lane) {
  const int col = n0 + lane % 16, k = k0 + 4 * (lane / 16);
  return TRANS ? lds_row4<L>(b, col, k) : lds_col4<L>(b, k, col);
}

}  // namespace kiln

#endif  // KILN_DEVICE_SHARED_TO_REGISTER_HIP_H_
