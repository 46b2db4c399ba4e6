// Shared memory to registers for tensor-core operands: ldmatrix loads four
// 8x8 matrices of 16-bit elements (one 16-byte row address per lane), with
// .trans to transpose each matrix on the way.
#ifndef KILN_DEVICE_SHARED_TO_REGISTER_CUH_
#define KILN_DEVICE_SHARED_TO_REGISTER_CUH_

#include "kiln/shared_layout.cuh"

namespace kiln {

__device__ __forceinline__ void ldmatrix_x4(u32 (&r)[4], const void* row) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(smem_addr(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(u32 (&r)[4],
                                                  const void* row) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, "
      "[%4];\n"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(smem_addr(row)));
}

}  // namespace kiln

#endif  // KILN_DEVICE_SHARED_TO_REGISTER_CUH_
