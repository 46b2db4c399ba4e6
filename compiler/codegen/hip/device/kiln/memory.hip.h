// Element access of global memory and LDS beyond plain loads and stores:
// packed 4-bit integers (a nibble store updates its 32-bit word with
// atomics, so two threads writing the two nibbles of one byte never lose a
// write) and the atomic adds of `atomic_add` and `+=` into tensors
// (out-of-range elements are skipped by the caller). 16- and 8-bit types
// add with a compare-and-swap loop on the containing word.
#ifndef KILN_DEVICE_MEMORY_HIP_H_
#define KILN_DEVICE_MEMORY_HIP_H_

#include "kiln/scalar.hip.h"

namespace kiln {

// ---- packed 4-bit integers
// ---------------------------------------------------

// Element i of a packed array: byte i / 2, low nibble for even i.
__device__ inline u32 nibble_at(const u8* p, long long i) {
  return (p[i >> 1] >> ((i & 1) * 4)) & 0xfu;
}
__device__ inline i8 load_i4(const u8* p, long long i) {
  return wrap_i4(nibble_at(p, i));
}
__device__ inline u8 load_u4(const u8* p, long long i) {
  return static_cast<u8>(nibble_at(p, i));
}
__device__ inline void store_nibble(u8* p, long long i, u32 nib) {
  const u64 byte_addr = reinterpret_cast<u64>(p + (i >> 1));
  u32* word = reinterpret_cast<u32*>(byte_addr & ~u64{3});
  const u32 shift = static_cast<u32>((byte_addr & 3) * 8 + (i & 1) * 4);
  atomicAnd(word, ~(0xfu << shift));
  atomicOr(word, (nib & 0xfu) << shift);
}

// ---- atomic adds
// -------------------------------------------------------------

__device__ inline void atomic_add(float* p, float v) { atomicAdd(p, v); }
__device__ inline void atomic_add(double* p, double v) { atomicAdd(p, v); }
__device__ inline void atomic_add(int* p, int v) { atomicAdd(p, v); }
__device__ inline void atomic_add(unsigned* p, unsigned v) { atomicAdd(p, v); }
__device__ inline void atomic_add(long long* p, long long v) {
  // Two's complement: the unsigned add is the signed add.
  atomicAdd(reinterpret_cast<u64*>(p), static_cast<u64>(v));
}

// Replaces the BYTES-wide value at p (inside one aligned 32-bit word) by
// next(old), atomically.
template <int BYTES, typename Next>
__device__ inline void atomic_rmw_narrow(void* p, Next next) {
  const u64 addr = reinterpret_cast<u64>(p);
  u32* word = reinterpret_cast<u32*>(addr & ~u64{3});
  const u32 shift = static_cast<u32>(addr & 3) * 8;
  const u32 field = (BYTES == 2 ? 0xffffu : 0xffu);
  u32 seen =
      __hip_atomic_load(word, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
  while (true) {
    const u32 updated = (seen & ~(field << shift)) |
                        ((next((seen >> shift) & field) & field) << shift);
    const u32 prev = atomicCAS(word, seen, updated);
    if (prev == seen) break;
    seen = prev;
  }
}
template <typename N>
__device__ inline void atomic_add_narrow(typename Narrow<N>::Storage* p,
                                         float v) {
  atomic_rmw_narrow<sizeof(typename Narrow<N>::Storage)>(
      p, [v](u32 old) -> u32 { return to_bits<N>(from_bits<N>(old) + v); });
}
template <typename T>
__device__ inline void atomic_add_small_int(T* p, T v) {
  atomic_rmw_narrow<sizeof(T)>(p, [v](u32 old) -> u32 {
    return static_cast<u32>(static_cast<T>(static_cast<T>(old) + v));
  });
}

// ---- atomic maxima and minima
// ---------------------------------------------
// Integers natively; floats by a compare-and-swap loop on their bits with
// max_ / min_, so a NaN wins as everywhere else (tile-ir.md §3).
template <typename T, typename W, typename Combine>
__device__ inline void atomic_update_word(T* p, Combine combine) {
  static_assert(sizeof(T) == sizeof(W), "one word per element");
  W* word = reinterpret_cast<W*>(p);
  W seen = __hip_atomic_load(word, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_AGENT);
  while (true) {
    T cur;
    __builtin_memcpy(&cur, &seen, sizeof(T));
    const T next = combine(cur);
    W bits;
    __builtin_memcpy(&bits, &next, sizeof(T));
    if (bits == seen) return;
    const W prev = atomicCAS(word, seen, bits);
    if (prev == seen) return;
    seen = prev;
  }
}
__device__ inline void atomic_max(int* p, int v) { atomicMax(p, v); }
__device__ inline void atomic_min(int* p, int v) { atomicMin(p, v); }
__device__ inline void atomic_max(unsigned* p, unsigned v) { atomicMax(p, v); }
__device__ inline void atomic_min(unsigned* p, unsigned v) { atomicMin(p, v); }
// (HIP has no signed 64-bit atomicMax / atomicMin.)
__device__ inline void atomic_max(long long* p, long long v) {
  atomic_update_word<long long, u64>(p,
                                     [v](long long c) { return max_(c, v); });
}
__device__ inline void atomic_min(long long* p, long long v) {
  atomic_update_word<long long, u64>(p,
                                     [v](long long c) { return min_(c, v); });
}
__device__ inline void atomic_max(float* p, float v) {
  atomic_update_word<float, u32>(p, [v](float c) { return max_(c, v); });
}
__device__ inline void atomic_min(float* p, float v) {
  atomic_update_word<float, u32>(p, [v](float c) { return min_(c, v); });
}
__device__ inline void atomic_max(double* p, double v) {
  atomic_update_word<double, u64>(p, [v](double c) { return max_(c, v); });
}
__device__ inline void atomic_min(double* p, double v) {
  atomic_update_word<double, u64>(p, [v](double c) { return min_(c, v); });
}
template <typename N>
__device__ inline void atomic_max_narrow(typename Narrow<N>::Storage* p,
                                         float v) {
  atomic_rmw_narrow<sizeof(typename Narrow<N>::Storage)>(
      p,
      [v](u32 old) -> u32 { return to_bits<N>(max_(from_bits<N>(old), v)); });
}
template <typename N>
__device__ inline void atomic_min_narrow(typename Narrow<N>::Storage* p,
                                         float v) {
  atomic_rmw_narrow<sizeof(typename Narrow<N>::Storage)>(
      p,
      [v](u32 old) -> u32 { return to_bits<N>(min_(from_bits<N>(old), v)); });
}
template <typename T>
__device__ inline void atomic_max_small_int(T* p, T v) {
  atomic_rmw_narrow<sizeof(T)>(p, [v](u32 old) -> u32 {
    return static_cast<u32>(max_(static_cast<T>(old), v));
  });
}
template <typename T>
__device__ inline void atomic_min_small_int(T* p, T v) {
  atomic_rmw_narrow<sizeof(T)>(p, [v](u32 old) -> u32 {
    return static_cast<u32>(min_(static_cast<T>(old), v));
  });
}

}  // namespace kiln

#endif  // KILN_DEVICE_MEMORY_HIP_H_
