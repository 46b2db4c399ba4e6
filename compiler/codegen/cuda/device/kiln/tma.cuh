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

#include "kiln/mma.cuh"
#include "kiln/shared_layout.cuh"
#include "kiln/wgmma.cuh"

namespace kiln {

// CUtensorMap's storage (cuda.h is a host header): 128 opaque bytes.
struct alignas(64) TensorMap {
  u64 opaque[16];
};

__device__ __forceinline__ void mbar_init(u64* bar, u32 count) {
  asm volatile(
      "mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_addr(bar)),
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
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(
                   smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
__device__ __forceinline__ void mbar_arrive(u64* bar) {
  asm volatile(
      "mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_addr(bar))
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
      "l"(map), "r"(smem_addr(bar)), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3])
      : "memory");
}
template <>
__device__ __forceinline__ void tma_load<5>(void* dst, const TensorMap* map,
                                            u64* bar, const int (&c)[5]) {
  asm volatile(
      "cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::"
      "complete_tx::bytes [%0], [%1, {%3, %4, %5, %6, %7}], [%2];\n" ::"r"(
          smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]),
      "r"(c[4])
      : "memory");
}

// The 2-d load of tma_load, multicast: the box lands at the same
// shared-memory offset (dst, and the bytes on `bar`) in every block of the
// cluster whose bit is set in `mask`.
__device__ __forceinline__ void tma_load_multicast_2d(void* dst,
                                                      const TensorMap* map,
                                                      u64* bar, int c0, int c1,
                                                      unsigned short mask) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::"
      "bytes.multicast::cluster [%0], [%1, {%3, %4}], [%2], %5;\n" ::"r"(
          smem_addr(dst)),
      "l"(map), "r"(smem_addr(bar)), "r"(c0), "r"(c1), "h"(mask)
      : "memory");
}

// This block's rank in its cluster.
__device__ __forceinline__ u32 cluster_rank() {
  u32 r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
// Arrives on the mbarrier at `bar`'s offset in the cluster's block `cta`.
__device__ __forceinline__ void mbar_arrive_cluster(u64* bar, u32 cta) {
  asm volatile(
      "{\n"
      ".reg .b32 remote;\n"
      "mapa.shared::cluster.u32 remote, %0, %1;\n"
      "mbarrier.arrive.shared::cluster.b64 _, [remote];\n"
      "}\n" ::"r"(smem_addr(bar)),
      "r"(cta)
      : "memory");
}
// A barrier over every thread of the cluster (each warp whole), ordering
// the shared-memory writes before it (barrier initialisation) before the
// reads after it in every block.
__device__ __forceinline__ void cluster_sync() {
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
}

// Stores the box of `map` at coordinates c (innermost first) from `src`
// (laid out with the map's swizzle); elements outside the tensor are not
// written. Completes in the bulk async-group committed next.
template <int RANK>
__device__ __forceinline__ void tma_store(const TensorMap* map, const void* src,
                                          const int (&c)[RANK]) {
  static_assert(RANK >= 2 && RANK <= 5, "tensor maps have 2 to 5 dims");
  const u32 s = smem_addr(src);
  if constexpr (RANK == 2) {
    asm volatile(
        "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, "
        "{%2, %3}], [%1];\n" ::"l"(map),
        "r"(s), "r"(c[0]), "r"(c[1])
        : "memory");
  } else if constexpr (RANK == 3) {
    asm volatile(
        "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, "
        "{%2, %3, %4}], [%1];\n" ::"l"(map),
        "r"(s), "r"(c[0]), "r"(c[1]), "r"(c[2])
        : "memory");
  } else if constexpr (RANK == 4) {
    asm volatile(
        "cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, "
        "{%2, %3, %4, %5}], [%1];\n" ::"l"(map),
        "r"(s), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3])
        : "memory");
  } else {
    asm volatile(
        "cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [%0, "
        "{%2, %3, %4, %5, %6}], [%1];\n" ::"l"(map),
        "r"(s), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4])
        : "memory");
  }
}
__device__ __forceinline__ void bulk_commit() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
// Waits until at most N of this thread's bulk groups still read their
// shared source.
template <int N>
__device__ __forceinline__ void bulk_wait_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory");
}
// Waits until this thread's bulk groups have completed (writes included).
__device__ __forceinline__ void bulk_wait_all() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// A barrier over the 128 threads of consumer warpgroup `wg` (named
// barrier 2 + wg: 0 is __syncthreads, 1 consumer_sync).
__device__ __forceinline__ void warpgroup_sync(int wg) {
  asm volatile("bar.sync %0, 128;\n" ::"r"(wg + 2) : "memory");
}

// Four 8x8 16-bit matrices from registers to shared memory: lane l gives
// the address of row l % 8 of matrix l / 8; register i holds this lane's
// two elements of matrix i (row l / 4, columns 2 * (l % 4) + {0, 1}).
__device__ __forceinline__ void stmatrix_x4(void* dst, u32 r0, u32 r1, u32 r2,
                                            u32 r3) {
  asm volatile(
      "stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::
          "r"(smem_addr(dst)),
      "r"(r0), "r"(r1), "r"(r2), "r"(r3)
      : "memory");
}

// Bytes of shared memory r2g_acc_tma stages through per consumer
// warpgroup: two 64 x 64 16-bit chunks.
constexpr int kTmaStoreStageBytes = 2 * 64 * 128;

// Stores a warpgroup-MMA accumulator (L: WgAccLayout, N a multiple of 64),
// rounded to T (f16_t, bf16_t), to the tensor of `map` (box 64 along dim
// 0 and along ROW_DIM, 1 along the others, 128-byte swizzle) with the
// tile's first element at coordinates c (innermost first: its columns run
// along dim 0, its rows along ROW_DIM). Each consumer warpgroup stores its
// own slice (L::row0, L::col0: its rows, and its columns where the
// warpgroups split them), 64 x 64 at a time: stmatrix into one of its two
// staging chunks (`stage` + wg * kTmaStoreStageBytes, 1024-byte aligned),
// then one thread issues the chunk's TMA store, which runs on while the
// warpgroup goes on. A chunk is rewritten once the store that last read it has
// (so the stores of one tile overlap the next tile's main loop). Elements
// outside the tensor are not written. Before the block exits, the storing
// threads call tma_store_drain.
template <typename T, typename L, int ROW_DIM, int RANK, int REGS>
__device__ __forceinline__ void r2g_acc_tma(const TensorMap* map,
                                            unsigned char* stage,
                                            const float (&acc)[REGS],
                                            const int (&c)[RANK]) {
  static_assert(L::kTn % 8 == 0, "TMA stores take 64-column chunks");
  static_assert(L::kRegs == REGS, "accumulator size");
  static_assert(ROW_DIM > 0 && ROW_DIM < RANK, "rows along another dim");
  const int wg = threadIdx.x / 128, warp = (threadIdx.x / 32) % 4;
  const int lane = threadIdx.x % 32;
  const bool leader = threadIdx.x % 128 == 0;
  unsigned char* const mine = stage + wg * kTmaStoreStageBytes;
  // This lane's stmatrix row within a 64 x 64 chunk, and its 16-byte
  // column block within a 16-column group.
  const int row = warp * 16 + ((lane / 8) % 2) * 8 + lane % 8;
  const int half = lane / 16;
#pragma unroll
  for (int mi = 0; mi < L::kTm; ++mi) {
#pragma unroll
    for (int j = 0; j < L::kTn / 8; ++j) {
      unsigned char* const buf = mine + ((mi * (L::kTn / 8) + j) % 2) * 8192;
      if (leader) bulk_wait_read<1>();
      warpgroup_sync(wg);
#pragma unroll
      for (int g = 0; g < 4; ++g) {
        const int q = (mi * L::kTn + j * 8 + 2 * g) * 4;
        // 128-byte swizzle: 16-byte block b of row r at b ^ (r % 8).
        const int block = (2 * g + half) ^ (row % 8);
        stmatrix_x4(buf + row * 128 + block * 16, pack2<T>(acc[q], acc[q + 1]),
                    pack2<T>(acc[q + 2], acc[q + 3]),
                    pack2<T>(acc[q + 4], acc[q + 5]),
                    pack2<T>(acc[q + 6], acc[q + 7]));
      }
      fence_proxy_async();
      warpgroup_sync(wg);
      if (leader) {
        int at[RANK];
#pragma unroll
        for (int d = 0; d < RANK; ++d) at[d] = c[d];
        at[0] += L::col0() + j * 64;
        at[ROW_DIM] += L::row0() + mi * 64;
        tma_store<RANK>(map, buf, at);
        bulk_commit();
      }
    }
  }
}

// Called by every thread that may have issued r2g_acc_tma stores before
// the block exits: their shared sources must stay until read.
__device__ __forceinline__ void tma_store_drain() {
  if (threadIdx.x % 128 == 0) bulk_wait_all();
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
