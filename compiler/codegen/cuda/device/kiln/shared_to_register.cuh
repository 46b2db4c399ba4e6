// Shared memory to registers for tensor-core operands: ldmatrix loads four
// 8x8 matrices of 16-bit elements (one 16-byte row address per lane), with
// .trans to transpose each matrix on the way.
#ifndef KILN_DEVICE_SHARED_TO_REGISTER_CUH_
#define KILN_DEVICE_SHARED_TO_REGISTER_CUH_

#include "kiln/shared_layout.cuh"

namespace kiln {

// (The u32 forms take the row's shared-memory address.)
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], u32 row) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(row));
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32 (&r)[4], u32 row) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, "
      "[%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(row));
}
__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], const void* row) {
  ldmatrix_x4(r, smem_addr(row));
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32 (&r)[4],
                                                  const void* row) {
  ldmatrix_x4_trans(r, smem_addr(row));
}

// The shared-memory address of a tile GEMM operand's ldmatrix rows: the
// lane's fixed part (r, c) and compile-time steps (R, C) (see
// Swizzled::Cursor), as u32 shared-memory addresses of 16-bit tiles.
template <typename LAYOUT>
struct LdmRows {
  u32 base;
  typename LAYOUT::Cursor cu;
  __device__ __forceinline__ LdmRows(const u16* tile, int r, int c)
      : base(smem_addr(tile)), cu(LAYOUT::cursor(r, c)) {}
  __device__ __forceinline__ u32 at(int R, int C) const {
    return base + 2u * static_cast<u32>(LAYOUT::step(cu, R, C));
  }
};

}  // namespace kiln

#endif  // KILN_DEVICE_SHARED_TO_REGISTER_CUH_
