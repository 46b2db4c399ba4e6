// Warp and block reductions with shuffles. Op is one of the functors below;
// warp_reduce combines over all 32 lanes (every lane gets the result),
// quad_reduce over the 4 lanes of an mma row group (lanes 4g..4g+3).
#ifndef KILN_DEVICE_REDUCE_CUH_
#define KILN_DEVICE_REDUCE_CUH_

#include "kiln/scalar.cuh"

namespace kiln {

struct SumOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct MaxOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return max_(a, b);
  }
};
struct MinOp {
  template <typename T>
  __device__ __forceinline__ T operator()(T a, T b) const {
    return min_(a, b);
  }
};

template <typename Op, typename T>
__device__ __forceinline__ T warp_reduce(T v, Op op) {
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  }
  return v;
}
// Over the aligned groups of N lanes (N a power of two up to 32); every lane
// of a group gets its group's result.
template <int N, typename Op, typename T>
__device__ __forceinline__ T group_reduce(T v, Op op) {
#pragma unroll
  for (int off = N / 2; off > 0; off /= 2) {
    v = op(v, __shfl_xor_sync(0xffffffffu, v, off));
  }
  return v;
}
template <typename Op, typename T>
__device__ __forceinline__ T quad_reduce(T v, Op op) {
  v = op(v, __shfl_xor_sync(0xffffffffu, v, 1));
  v = op(v, __shfl_xor_sync(0xffffffffu, v, 2));
  return v;
}
// bool has no shuffle: reduce it as an int.
template <typename Op>
__device__ __forceinline__ bool warp_reduce(bool v, Op op) {
  return warp_reduce<Op, int>(v ? 1 : 0, op) != 0;
}

// Reduces one value per thread over the whole block; `scratch` holds one T
// per warp. Every thread gets the result. Contains __syncthreads.
template <typename Op, typename T>
__device__ __forceinline__ T block_reduce(T v, Op op, T* scratch) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int warps = (blockDim.x + 31) / 32;
  v = warp_reduce(v, op);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  T r = scratch[0];
  for (int w = 1; w < warps; ++w) r = op(r, scratch[w]);
  return r;
}

}  // namespace kiln

#endif  // KILN_DEVICE_REDUCE_CUH_
