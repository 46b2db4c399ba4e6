// Wavefront and block reductions with cross-lane shuffles (ds_swizzle /
// DPP through __shfl_xor). Op is one of the functors below. warp_reduce
// combines over all 64 lanes of a wavefront (every lane gets the result);
// row_group_reduce over the 16 lanes of an MFMA row group (lanes
// 16g..16g+15, kiln/mma.hip.h); block_reduce over the whole block.
#ifndef KILN_DEVICE_REDUCE_HIP_H_
#define KILN_DEVICE_REDUCE_HIP_H_

#include "kiln/scalar.hip.h"

namespace kiln {

struct SumOp {
  template <typename T>
  __device__ inline T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  template <typename T>
  __device__ inline T operator()(T a, T b) const {
    return max_(a, b);
  }
};
struct MinOp {
  template <typename T>
  __device__ inline T operator()(T a, T b) const {
    return min_(a, b);
  }
};

// Butterfly over the lanes whose indices differ in bits below LANES.
template <int LANES, typename Op, typename T>
__device__ inline T butterfly(T v, Op op) {
#pragma unroll
  for (int mask = LANES / 2; mask > 0; mask >>= 1) {
    v = op(v, __shfl_xor(v, mask, 64));
  }
  return v;
}

template <typename Op, typename T>
__device__ inline T warp_reduce(T v, Op op) {
  return butterfly<64>(v, op);
}
// Over the aligned groups of N lanes (N a power of two up to 64); every lane
// of a group gets its group's result.
template <int N, typename Op, typename T>
__device__ inline T group_reduce(T v, Op op) {
  return butterfly<N>(v, op);
}
template <typename Op, typename T>
__device__ inline T row_group_reduce(T v, Op op) {
  return butterfly<16>(v, op);
}
// bool has no shuffle: reduce it as an int.
template <typename Op>
__device__ inline bool warp_reduce(bool v, Op op) {
  return butterfly<64>(static_cast<int>(v), op) != 0;
}

// Reduces one value per thread over the whole block; `scratch` (LDS) holds
// one T per wavefront. Every thread gets the result. Contains
// __syncthreads.
template <typename Op, typename T>
__device__ inline T block_reduce(T v, Op op, T* scratch) {
  const int waves = (blockDim.x + 63) / 64;
  v = warp_reduce(v, op);
  __syncthreads();
  if (threadIdx.x % 64 == 0) scratch[threadIdx.x / 64] = v;
  __syncthreads();
  T r = scratch[0];
  for (int w = 1; w < waves; ++w) r = op(r, scratch[w]);
  return r;
}

}  // namespace kiln

#endif  // KILN_DEVICE_REDUCE_HIP_H_
