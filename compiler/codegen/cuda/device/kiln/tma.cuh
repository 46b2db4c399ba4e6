// Hopper bulk tensor copies (TMA) and the barriers a warp-specialised ring
// runs on (sm_90): mbarrier transaction counts, named barriers for the
// consumer warpgroups, and register reallocation between warpgroups.
//
// A ring of S stages has a `full` and an `empty` mbarrier per stage. The
// producer thread waits for `empty[s]` (from the second round on), arms
// `full[s]` with the stage's byte count and issues the stage's TMA loads,
// which complete on `full[s]`; each consumer warpgroup waits for `full[s]`
// (phase = round parity), computes, and arrives on `empty[s]` once its
// wgmma reading the stage have completed.
//
// The tensor maps are built by the runtime (cuTensorMapEncodeTiled) and
// passed as `const __grid_constant__ kiln::TensorMap` kernel parameters
// (compiler/docs/kernel-handle.md).
#ifndef KILN_DEVICE_TMA_CUH_
#define KILN_DEVICE_TMA_CUH_

#include "kiln/shared_layout.cuh"

namespace kiln {

// CUtensorMap's storage (cuda.h is a host header): 128 opaque bytes.
struct alignas(64) TensorMap {
  u64 opaque[16];
};

__device__ __forceinline__ void mbar_init(u64* bar, u32 count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(
                   smem_addr(bar)),
               "r"(count)
               : "memory");
}
// Makes barrier initialisation visible to the async proxy (TMA) and to the
// other threads after the following block barrier.
__device__ __forceinline__ void mbar_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}
// Arrives on `bar` and adds `bytes` to the transactions it waits for.
__device__ __forceinline__ void mbar_arrive_expect_tx(u64* bar, u32 bytes) {
  asm volatile(
      "mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
          smem_addr(bar)),
      "r"(bytes)
      : "memory");
}
__device__ __forceinline__ void mbar_arrive(u64* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(
                   smem_addr(bar))
               : "memory");
}
// Waits until the phase with parity `phase` of `bar` has completed.
__device__ __forceinline__ void mbar_wait(u64* bar, u32 phase) {
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "KILN_MBAR_WAIT:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra KILN_MBAR_WAIT;\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(phase)
      : "memory");
}

__device__ __forceinline__ void tma_prefetch(const TensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map) : "memory");
}

// Loads the box at coordinates c (innermost first) of `map` into `dst`
// (the map's swizzle applied; out-of-bounds elements are zero), completing
// on `bar`'s transaction count.
template <int RANK>
__device__ __forceinline__ void tma_load(void* dst, const TensorMap* map,
                                         u64* bar, const int (&c)[RANK]);
template <>
__device__ __forceinline__ void tma_load<2>(void* dst, const TensorMap* map,
                                            u64* bar, const int (&c)[2]) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes [%0], [%1, {%3, %4}], [%2];\n" ::"r"(smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c[0]), "r"(c[1])
      : "memory");
}
template <>
__device__ __forceinline__ void tma_load<3>(void* dst, const TensorMap* map,
                                            u64* bar, const int (&c)[3]) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(
          smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c[0]), "r"(c[1]), "r"(c[2])
      : "memory");
}
template <>
__device__ __forceinline__ void tma_load<4>(void* dst, const TensorMap* map,
                                            u64* bar, const int (&c)[4]) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];\n" ::"r"(
          smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c[0]), "r"(c[1]), "r"(c[2]),
      "r"(c[3])
      : "memory");
}
template <>
__device__ __forceinline__ void tma_load<5>(void* dst, const TensorMap* map,
                                            u64* bar, const int (&c)[5]) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n" ::"r"(
          smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c[0]), "r"(c[1]), "r"(c[2]),
      "r"(c[3]), "r"(c[4])
      : "memory");
}

// A barrier over the first THREADS threads of the block (the consumer
// warpgroups), leaving the producer warpgroup out: named barrier 1.
template <int THREADS>
__device__ __forceinline__ void consumer_sync() {
  asm volatile("bar.sync 1, %0;\n" ::"n"(THREADS) : "memory");
}

// Register reallocation between warpgroups (whole warpgroup, sm_90a).
template <int REGS>
__device__ __forceinline__ void regs_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(REGS));
}
template <int REGS>
__device__ __forceinline__ void regs_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(REGS));
}

}  // namespace kiln

#endif  // KILN_DEVICE_TMA_CUH_
