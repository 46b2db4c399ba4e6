// Element access of global and shared memory, by dtype: loads give the
// register value of the IR type (narrow floats widened to f32, i4/u4 nibbles
// sign- or zero-extended), stores take it and round or pack. Packed i4/u4
// stores update one nibble with atomics on its 32-bit word, so two threads
// writing the two nibbles of one byte never lose each other's write.
// Atomic adds, maxima and minima for `atomic_add` and the tensor stores `+=`,
// `max=`, `min=` (global memory, out-of-range skipped by the caller).
#ifndef KILN_DEVICE_MEMORY_CUH_
#define KILN_DEVICE_MEMORY_CUH_

#include "kiln/scalar.cuh"

namespace kiln {

// ---- loads
// -------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ T load(const T* p, long long i) {
  return p[i];
}
__device__ __forceinline__ bool load_bool(const u8* p, long long i) {
  return p[i] != 0;
}
template <typename N>
__device__ __forceinline__ float load_narrow(
    const typename Narrow<N>::Storage* p, long long i) {
  return from_bits<N>(p[i]);
}
__device__ __forceinline__ i8 load_i4(const u8* p, long long i) {
  const u8 byte = p[i >> 1];
  const int nib = (i & 1) ? (byte >> 4) : (byte & 0xf);
  return wrap_i4(nib);
}
__device__ __forceinline__ u8 load_u4(const u8* p, long long i) {
  const u8 byte = p[i >> 1];
  return (i & 1) ? (byte >> 4) : (byte & 0xf);
}

// ---- stores
// ------------------------------------------------------------------

template <typename T>
__device__ __forceinline__ void store(T* p, long long i, T v) {
  p[i] = v;
}
__device__ __forceinline__ void store_bool(u8* p, long long i, bool v) {
  p[i] = v ? 1 : 0;
}
template <typename N>
__device__ __forceinline__ void store_narrow(typename Narrow<N>::Storage* p,
                                             long long i, float v) {
  p[i] = to_bits<N>(v);
}
__device__ __forceinline__ void store_nibble(u8* p, long long i, u32 nib) {
  const unsigned long long addr = reinterpret_cast<unsigned long long>(p) +
                                  static_cast<unsigned long long>(i >> 1);
  u32* word = reinterpret_cast<u32*>(addr & ~3ull);
  const int shift = static_cast<int>((addr & 3ull) * 8 + ((i & 1) ? 4 : 0));
  atomicAnd(word, ~(0xfu << shift));
  atomicOr(word, (nib & 0xfu) << shift);
}

// ---- atomics (global memory)
// -------------------------------------------------

__device__ __forceinline__ void atomic_add(float* p, float v) {
  atomicAdd(p, v);
}
__device__ __forceinline__ void atomic_add(double* p, double v) {
  atomicAdd(p, v);
}
__device__ __forceinline__ void atomic_add(int* p, int v) { atomicAdd(p, v); }
__device__ __forceinline__ void atomic_add(unsigned* p, unsigned v) {
  atomicAdd(p, v);
}
__device__ __forceinline__ void atomic_add(long long* p, long long v) {
  atomicAdd(reinterpret_cast<unsigned long long*>(p),
            static_cast<unsigned long long>(v));
}
// 16-bit and 8-bit types: a compare-and-swap loop on the containing word.
template <typename Combine>
__device__ __forceinline__ void atomic_update_sub_word(void* p, int bytes,
                                                       Combine combine) {
  const unsigned long long addr = reinterpret_cast<unsigned long long>(p);
  u32* word = reinterpret_cast<u32*>(addr & ~3ull);
  const int shift = static_cast<int>((addr & 3ull) * 8);
  const u32 mask = (bytes == 2 ? 0xffffu : 0xffu) << shift;
  u32 old = *word, assumed;
  do {
    assumed = old;
    const u32 cur = (assumed & mask) >> shift;
    const u32 next = combine(cur) & (mask >> shift);
    old = atomicCAS(word, assumed, (assumed & ~mask) | (next << shift));
  } while (old != assumed);
}
template <typename N>
__device__ __forceinline__ void atomic_add_narrow(
    typename Narrow<N>::Storage* p, float v) {
  atomic_update_sub_word(p, sizeof(typename Narrow<N>::Storage), [v](u32 c) {
    return static_cast<u32>(to_bits<N>(from_bits<N>(c) + v));
  });
}
template <typename T>
__device__ __forceinline__ void atomic_add_small_int(T* p, T v) {
  atomic_update_sub_word(p, sizeof(T), [v](u32 c) {
    return static_cast<u32>(static_cast<T>(static_cast<T>(c) + v));
  });
}

// max / min: integers natively; floats by a compare-and-swap loop on their
// bits with max_ / min_, so a NaN wins as everywhere else (tile-ir.md §3).
// The loop stops early when the element already holds the result.
template <typename Combine>
__device__ __forceinline__ void atomic_update_f32(float* p, Combine combine) {
  u32* word = reinterpret_cast<u32*>(p);
  u32 old = *word, assumed;
  do {
    assumed = old;
    const u32 next = __float_as_uint(combine(__uint_as_float(assumed)));
    if (next == assumed) return;
    old = atomicCAS(word, assumed, next);
  } while (old != assumed);
}
template <typename Combine>
__device__ __forceinline__ void atomic_update_f64(double* p, Combine combine) {
  u64* word = reinterpret_cast<u64*>(p);
  u64 old = *word, assumed;
  do {
    assumed = old;
    const u64 next = static_cast<u64>(__double_as_longlong(
        combine(__longlong_as_double(static_cast<long long>(assumed)))));
    if (next == assumed) return;
    old = atomicCAS(word, assumed, next);
  } while (old != assumed);
}
__device__ __forceinline__ void atomic_max(int* p, int v) { atomicMax(p, v); }
__device__ __forceinline__ void atomic_min(int* p, int v) { atomicMin(p, v); }
__device__ __forceinline__ void atomic_max(unsigned* p, unsigned v) {
  atomicMax(p, v);
}
__device__ __forceinline__ void atomic_min(unsigned* p, unsigned v) {
  atomicMin(p, v);
}
__device__ __forceinline__ void atomic_max(long long* p, long long v) {
  atomicMax(p, v);
}
__device__ __forceinline__ void atomic_min(long long* p, long long v) {
  atomicMin(p, v);
}
__device__ __forceinline__ void atomic_max(float* p, float v) {
  atomic_update_f32(p, [v](float c) { return max_(c, v); });
}
__device__ __forceinline__ void atomic_min(float* p, float v) {
  atomic_update_f32(p, [v](float c) { return min_(c, v); });
}
__device__ __forceinline__ void atomic_max(double* p, double v) {
  atomic_update_f64(p, [v](double c) { return max_(c, v); });
}
__device__ __forceinline__ void atomic_min(double* p, double v) {
  atomic_update_f64(p, [v](double c) { return min_(c, v); });
}
template <typename N>
__device__ __forceinline__ void atomic_max_narrow(
    typename Narrow<N>::Storage* p, float v) {
  atomic_update_sub_word(p, sizeof(typename Narrow<N>::Storage), [v](u32 c) {
    return static_cast<u32>(to_bits<N>(max_(from_bits<N>(c), v)));
  });
}
template <typename N>
__device__ __forceinline__ void atomic_min_narrow(
    typename Narrow<N>::Storage* p, float v) {
  atomic_update_sub_word(p, sizeof(typename Narrow<N>::Storage), [v](u32 c) {
    return static_cast<u32>(to_bits<N>(min_(from_bits<N>(c), v)));
  });
}
template <typename T>
__device__ __forceinline__ void atomic_max_small_int(T* p, T v) {
  atomic_update_sub_word(p, sizeof(T), [v](u32 c) {
    return static_cast<u32>(max_(static_cast<T>(c), v));
  });
}
template <typename T>
__device__ __forceinline__ void atomic_min_small_int(T* p, T v) {
  atomic_update_sub_word(p, sizeof(T), [v](u32 c) {
    return static_cast<u32>(min_(static_cast<T>(c), v));
  });
}

}  // namespace kiln

#endif  // KILN_DEVICE_MEMORY_CUH_
