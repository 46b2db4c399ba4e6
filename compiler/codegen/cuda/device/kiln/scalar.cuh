// Scalar semantics of the tile IR on the device (compiler/docs/tile-ir.md §3):
// storage types, narrow-float rounding (f16, bf16, f8e4m3, f8e5m2) done in
// integer arithmetic so every sm_80+ target rounds alike and agrees with the
// CPU target bit for bit, floor division and modulo, shifts, saturating
// float-to-integer casts.
//
// Narrow floats live in registers as f32 values that are exactly
// representable in the narrow type: every operation computes in f32 and
// rounds its result (round_to<T>); storage holds the raw bits.
#ifndef KILN_DEVICE_SCALAR_CUH_
#define KILN_DEVICE_SCALAR_CUH_

namespace kiln {

typedef signed char i8;
typedef unsigned char u8;
typedef short i16;
typedef unsigned short u16;
typedef int i32;
typedef unsigned int u32;
typedef long long i64;
typedef unsigned long long u64;

// Dtype tags; the code generator names them, the library dispatches on them.
struct f16_t {};
struct bf16_t {};
struct e4m3_t {};
struct e5m2_t {};

__device__ __forceinline__ u32 f32_bits(float x) { return __float_as_uint(x); }
__device__ __forceinline__ float bits_f32(u32 b) { return __uint_as_float(b); }

// ---- f32 -> narrow bits, round to nearest even ------------------------------

// A generic IEEE-style narrowing: `mbits` mantissa bits, `ebits` exponent
// bits, bias (1 << (ebits-1)) - 1. `sat` saturates to `max_bits` (f8e4m3,
// which has no infinity; its all-ones pattern is NaN).
__device__ __forceinline__ u32 narrow_bits(float x, int ebits, int mbits,
                                           bool fn_style) {
  const u32 b = f32_bits(x);
  const u32 sign = (b >> 31) << (ebits + mbits);
  const u32 absb = b & 0x7fffffffu;
  const int bias = (1 << (ebits - 1)) - 1;
  // Largest finite magnitude bits of the target (without sign).
  const u32 exp_all = (1u << ebits) - 1;
  const u32 max_finite = fn_style
                             ? ((exp_all << mbits) | ((1u << mbits) - 2))
                             : (((exp_all - 1) << mbits) | ((1u << mbits) - 1));
  const u32 nan_bits = fn_style ? ((exp_all << mbits) | ((1u << mbits) - 1))
                                : ((exp_all << mbits) | (1u << (mbits - 1)));
  if (absb > 0x7f800000u) return sign | nan_bits;  // NaN
  if (absb == 0x7f800000u) {                       // infinity
    return sign | (fn_style ? max_finite : (exp_all << mbits));
  }
  const int e = static_cast<int>(absb >> 23) - 127;  // unbiased exponent
  u32 out;
  if (e + bias >= 1) {
    // Normal in the target: round the 23-bit mantissa to mbits.
    const int shift = 23 - mbits;
    u32 m = absb & 0x7fffffu;
    u32 q = (static_cast<u32>(e + bias) << mbits) | (m >> shift);
    const u32 rem = m & ((1u << shift) - 1);
    const u32 half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    out = q;
  } else {
    // Subnormal (or zero) in the target: q = value / 2^(1 - bias - mbits),
    // value = M * 2^(e - 23) with the implicit bit; f32 subnormals are far
    // below every target's smallest subnormal and round to zero.
    const int s = 24 - bias - mbits - e;
    if (absb < 0x00800000u || s >= 26) {
      out = 0;
    } else {
      const u32 m = (absb & 0x7fffffu) | 0x800000u;
      u32 q = m >> s;
      const u32 rem = m & ((1u << s) - 1);
      const u32 half = 1u << (s - 1);
      if (rem > half || (rem == half && (q & 1))) ++q;
      out = q;
    }
  }
  if (out > max_finite) {
    out = fn_style ? max_finite : (exp_all << mbits);  // saturate / infinity
  }
  return sign | out;
}

__device__ __forceinline__ float widen_bits(u32 v, int ebits, int mbits,
                                            bool fn_style) {
  const u32 sign = (v >> (ebits + mbits)) & 1u;
  const u32 e = (v >> mbits) & ((1u << ebits) - 1);
  const u32 m = v & ((1u << mbits) - 1);
  const int bias = (1 << (ebits - 1)) - 1;
  float r;
  if (e == ((1u << ebits) - 1) && (!fn_style || m == (1u << mbits) - 1)) {
    r = (m == 0 && !fn_style) ? __int_as_float(0x7f800000)
                              : __int_as_float(0x7fc00000);
  } else if (e == 0) {
    r = ldexpf(static_cast<float>(m), 1 - bias - mbits);
  } else {
    r = bits_f32(((e - bias + 127) << 23) | (m << (23 - mbits)));
  }
  return sign ? -r : r;
}

// Round-to-odd narrowing of f64 to f32 (exact values stay exact), so a
// second rounding to a narrow type rounds once in effect.
__device__ __forceinline__ float f64_to_f32_odd(double x) {
  float r;
  asm("cvt.rz.f32.f64 %0, %1;" : "=f"(r) : "d"(x));
  if (static_cast<double>(r) != x && !isnan(x) && !isinf(r)) {
    r = bits_f32(f32_bits(r) | 1u);
  }
  return r;
}

template <typename T>
struct Narrow;
template <>
struct Narrow<f16_t> {
  enum { kE = 5, kM = 10, kFn = 0 };
  typedef u16 Storage;
};
template <>
struct Narrow<bf16_t> {
  enum { kE = 8, kM = 7, kFn = 0 };
  typedef u16 Storage;
};
template <>
struct Narrow<e4m3_t> {
  enum { kE = 4, kM = 3, kFn = 1 };
  typedef u8 Storage;
};
template <>
struct Narrow<e5m2_t> {
  enum { kE = 5, kM = 2, kFn = 0 };
  typedef u8 Storage;
};

// The bits of f32 `x` rounded to narrow type T.
template <typename T>
__device__ __forceinline__ typename Narrow<T>::Storage to_bits(float x) {
  return static_cast<typename Narrow<T>::Storage>(
      narrow_bits(x, Narrow<T>::kE, Narrow<T>::kM, Narrow<T>::kFn));
}
template <>
__device__ __forceinline__ u16 to_bits<f16_t>(float x) {
  u16 r;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}
template <>
__device__ __forceinline__ u16 to_bits<bf16_t>(float x) {
  u16 r;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(r) : "f"(x));
  return r;
}
// The f32 value of narrow bits.
template <typename T>
__device__ __forceinline__ float from_bits(u32 bits) {
  return widen_bits(bits, Narrow<T>::kE, Narrow<T>::kM, Narrow<T>::kFn);
}
template <>
__device__ __forceinline__ float from_bits<f16_t>(u32 bits) {
  float r;
  asm("cvt.f32.f16 %0, %1;" : "=f"(r) : "h"(static_cast<u16>(bits)));
  return r;
}
template <>
__device__ __forceinline__ float from_bits<bf16_t>(u32 bits) {
  return bits_f32(bits << 16);
}
// `x` rounded to T, as an f32 register value.
template <typename T>
__device__ __forceinline__ float round_to(float x) {
  return from_bits<T>(to_bits<T>(x));
}
template <typename T>
__device__ __forceinline__ float round_to(double x) {
  return round_to<T>(f64_to_f32_odd(x));
}

// ---- integers ---------------------------------------------------------------

// Floor division and modulo (tile-ir.md §3); x / 0 == 0 and x % 0 == x.
template <typename T>
__device__ __forceinline__ T floordiv(T a, T b) {
  if (b == 0) return 0;
  if (static_cast<T>(-1) < 0) {  // signed
    if (b == static_cast<T>(-1)) return static_cast<T>(0) - a;
    T q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  }
  return a / b;
}
template <typename T>
__device__ __forceinline__ T floormod(T a, T b) {
  if (b == 0) return a;
  if (static_cast<T>(-1) < 0) {
    if (b == static_cast<T>(-1)) return 0;
    T r = a % b;
    if (r != 0 && ((r < 0) != (b < 0))) r += b;
    return r;
  }
  return a % b;
}
template <typename T>
__device__ __forceinline__ T ceildiv(T a, T b) {
  // The exact quotient rounded up, for either sign of b (as on the CPU and
  // in the compiler's folding); b == 0 gives 0.
  if (b == 0) return 0;
  if (static_cast<T>(-1) < 0) {  // signed
    if (b == static_cast<T>(-1)) return static_cast<T>(0) - a;
    T q = a / b;
    const T r = a % b;
    if (r != 0 && ((r < 0) == (b < 0))) ++q;
    return q;
  }
  return a / b + (a % b != 0 ? 1 : 0);
}
template <typename T>
__device__ __forceinline__ T shl(T a, long long n) {
  const int w = sizeof(T) * 8;
  return (n < 0 || n >= w) ? T(0) : static_cast<T>(a << n);
}
template <typename T>
__device__ __forceinline__ T shr(T a, long long n) {
  const int w = sizeof(T) * 8;
  if (n < 0 || n >= w) return (static_cast<T>(-1) < 0 && a < 0) ? T(-1) : T(0);
  return static_cast<T>(a >> n);
}
// 4-bit integers held in a byte: wrap to the nibble (sign-extended for i4).
__device__ __forceinline__ i8 wrap_i4(long long v) {
  return static_cast<i8>(static_cast<i8>((v & 0xf) << 4) >> 4);
}
__device__ __forceinline__ u8 wrap_u4(long long v) {
  return static_cast<u8>(v & 0xf);
}

// Saturating float -> integer conversion (NaN gives 0), truncating.
template <typename T>
__device__ __forceinline__ T sat_cast(double x, double lo, double hi) {
  if (x != x) return 0;
  if (x <= lo) return static_cast<T>(lo);
  if (x >= hi) return static_cast<T>(hi);
  return static_cast<T>(x);
}
__device__ __forceinline__ i64 f_to_i64(double x) {
  if (x != x) return 0;
  if (x <= -9.2233720368547758e18) return (-9223372036854775807LL - 1);
  if (x >= 9.2233720368547758e18) return 9223372036854775807LL;
  return static_cast<i64>(x);
}

// ---- math
// --------------------------------------------------------------------

// 2^x on the special-function unit (ex2.approx: at most 2 ulp, results
// below 2^-126 flush to zero): one instruction where exp2f takes four.
// The online softmax of attention kernels calls it per score.
__device__ __forceinline__ float exp2_(float x) {
  float r;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(r) : "f"(x));
  return r;
}

// 1 / x correctly rounded: x * rcp_rn(d) replaces x / d where d is the
// same for many x (within 1 ulp of the quotient).
__device__ __forceinline__ float rcp_rn(float x) { return __frcp_rn(x); }

__device__ __forceinline__ float sigmoid(float x) {
  return 1.0f / (1.0f + expf(-x));
}
__device__ __forceinline__ double sigmoid(double x) {
  return 1.0 / (1.0 + exp(-x));
}
__device__ __forceinline__ float rsqrt_(float x) { return 1.0f / sqrtf(x); }
__device__ __forceinline__ double rsqrt_(double x) { return 1.0 / sqrt(x); }
template <typename T>
__device__ __forceinline__ T min_(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
__device__ __forceinline__ T max_(T a, T b) {
  return a < b ? b : a;
}
// Floats: a NaN operand wins, as in torch and NumPy (tile-ir.md §3,
// Numerics). f32 is one instruction (sm_80's max.NaN / min.NaN); f64 has
// none, so a NaN is tested for.
__device__ __forceinline__ float min_(float a, float b) {
  float r;
  asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ float max_(float a, float b) {
  float r;
  asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
  return r;
}
__device__ __forceinline__ double min_(double a, double b) {
  return (a != a || b != b) ? a + b : fmin(a, b);
}
__device__ __forceinline__ double max_(double a, double b) {
  return (a != a || b != b) ? a + b : fmax(a, b);
}
// isnan / isinf of f32 and f64 (narrow floats arrive as f32).
__device__ __forceinline__ bool isnan_(float x) { return x != x; }
__device__ __forceinline__ bool isnan_(double x) { return x != x; }
__device__ __forceinline__ bool isinf_(float x) {
  return fabsf(x) == __int_as_float(0x7f800000);
}
__device__ __forceinline__ bool isinf_(double x) {
  return fabs(x) == __longlong_as_double(0x7ff0000000000000LL);
}
template <typename T>
__device__ __forceinline__ T abs_(T a) {
  return a < 0 ? static_cast<T>(-a) : a;
}
__device__ __forceinline__ float abs_(float a) { return fabsf(a); }
__device__ __forceinline__ double abs_(double a) { return fabs(a); }

}  // namespace kiln

#endif  // KILN_DEVICE_SCALAR_CUH_
