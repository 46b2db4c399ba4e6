// Scalar semantics of the tile IR on AMD GPUs (compiler/docs/tile-ir.md §3),
// bit for bit those of the CUDA library and the CPU target: storage types,
// narrow floats (f16 by the hardware conversion, which rounds to nearest
// even; bf16, f8e4m3 and f8e5m2 in integer arithmetic), floor division and
// modulo, shifts, saturating float-to-integer casts, math helpers.
//
// Narrow floats live in registers as f32 values exactly representable in
// the narrow type: every operation computes in f32 and rounds its result
// (round_to<T>); storage holds the raw bits.
#ifndef KILN_DEVICE_SCALAR_HIP_H_
#define KILN_DEVICE_SCALAR_HIP_H_

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

// Storage type and format of each narrow float: E exponent bits, M
// mantissa bits; FN formats (f8e4m3) have no infinity, saturate on
// overflow, and only the all-ones pattern is NaN.
template <typename T>
struct Narrow;
template <>
struct Narrow<f16_t> {
  typedef u16 Storage;
  enum { kE = 5, kM = 10, kFn = 0 };
};
template <>
struct Narrow<bf16_t> {
  typedef u16 Storage;
  enum { kE = 8, kM = 7, kFn = 0 };
};
template <>
struct Narrow<e4m3_t> {
  typedef u8 Storage;
  enum { kE = 4, kM = 3, kFn = 1 };
};
template <>
struct Narrow<e5m2_t> {
  typedef u8 Storage;
  enum { kE = 5, kM = 2, kFn = 0 };
};

// ---- narrow float encoding
// ---------------------------------------------------

// |x| rounded to nearest even on the grid of a format with E exponent and
// M mantissa bits, as bits without the sign. The grid step at magnitude
// 2^e is 2^(max(e, emin) - M); n = |x| / step rounds with rintf (exact
// scaling by a power of two), and bits = (exponent field << M) + n - 2^M
// covers subnormals (field 1 minus the implicit bit) and the carry into
// the next binade alike.
template <int E, int M, bool FN>
__device__ inline u32 encode_magnitude(float a) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  constexpr int kEmin = 1 - kBias;
  constexpr u32 kAllOnes = (1u << E) - 1;
  constexpr u32 kMaxFinite = FN ? ((kAllOnes << M) | ((1u << M) - 2))
                                : (((kAllOnes - 1) << M) | ((1u << M) - 1));
  constexpr u32 kInf = kAllOnes << M;
  if (__builtin_isinf(a)) return FN ? kMaxFinite : kInf;
  int e = a == 0.0f ? kEmin : ilogbf(a);
  if (e < kEmin) e = kEmin;
  const int step = e - M;
  const float n = rintf(ldexpf(a, -step));  // in [0, 2^(M+1)]
  const long long bits = (static_cast<long long>(step + M + kBias) << M) +
                         static_cast<long long>(n) - (1ll << M);
  if (bits > static_cast<long long>(kMaxFinite)) return FN ? kMaxFinite : kInf;
  return static_cast<u32>(bits);
}

template <int E, int M, bool FN>
__device__ inline u32 encode_narrow(float x) {
  const u32 sign = (__float_as_uint(x) >> 31) << (E + M);
  if (__builtin_isnan(x)) {
    constexpr u32 kAllOnes = (1u << E) - 1;
    return sign | (FN ? ((kAllOnes << M) | ((1u << M) - 1))
                      : ((kAllOnes << M) | (1u << (M - 1))));
  }
  return sign | encode_magnitude<E, M, FN>(__builtin_fabsf(x));
}

template <int E, int M, bool FN>
__device__ inline float decode_narrow(u32 bits) {
  constexpr int kBias = (1 << (E - 1)) - 1;
  constexpr u32 kAllOnes = (1u << E) - 1;
  const bool negative = (bits >> (E + M)) & 1u;
  const u32 field = (bits >> M) & kAllOnes;
  const u32 mant = bits & ((1u << M) - 1);
  float r;
  if (field == kAllOnes && (!FN || mant == (1u << M) - 1)) {
    r = (!FN && mant == 0) ? __uint_as_float(0x7f800000u)
                           : __uint_as_float(0x7fc00000u);
  } else if (field == 0) {
    r = ldexpf(static_cast<float>(mant), 1 - kBias - M);
  } else {
    r = ldexpf(static_cast<float>(mant | (1u << M)),
               static_cast<int>(field) - kBias - M);
  }
  return negative ? -r : r;
}

// The bits of f32 `x` rounded to narrow type T.
template <typename T>
__device__ inline typename Narrow<T>::Storage to_bits(float x) {
  return static_cast<typename Narrow<T>::Storage>(
      encode_narrow<Narrow<T>::kE, Narrow<T>::kM, Narrow<T>::kFn != 0>(x));
}
// f16 and bf16: NaN becomes the canonical 0x7fff, as PTX's cvt.rn gives.
template <>
__device__ inline u16 to_bits<f16_t>(float x) {
  if (__builtin_isnan(x)) return 0x7fff;
  return __builtin_bit_cast(u16, static_cast<_Float16>(x));
}
template <>
__device__ inline u16 to_bits<bf16_t>(float x) {
  const u32 b = __float_as_uint(x);
  if (__builtin_isnan(x)) return 0x7fff;
  return static_cast<u16>((b + 0x7fffu + ((b >> 16) & 1u)) >> 16);
}

// The f32 value of narrow bits.
template <typename T>
__device__ inline float from_bits(u32 bits) {
  return decode_narrow<Narrow<T>::kE, Narrow<T>::kM, Narrow<T>::kFn != 0>(bits);
}
template <>
__device__ inline float from_bits<f16_t>(u32 bits) {
  return static_cast<float>(
      __builtin_bit_cast(_Float16, static_cast<u16>(bits)));
}
template <>
__device__ inline float from_bits<bf16_t>(u32 bits) {
  return __uint_as_float(bits << 16);
}

// f64 to f32 rounding to odd: truncate, then set the last bit when inexact,
// so that a second rounding (to a narrow type) rounds once in effect.
__device__ inline float f64_to_f32_odd(double x) {
  float r = __double2float_rz(x);
  if (static_cast<double>(r) != x && x == x && !__builtin_isinf(r)) {
    r = __uint_as_float(__float_as_uint(r) | 1u);
  }
  return r;
}

// `x` rounded to T, as an f32 register value.
template <typename T>
__device__ inline float round_to(float x) {
  return from_bits<T>(to_bits<T>(x));
}
template <typename T>
__device__ inline float round_to(double x) {
  return round_to<T>(f64_to_f32_odd(x));
}

// ---- integers
// ------------------------------------------------------------------

template <typename T>
__device__ inline constexpr bool is_signed_int() {
  return static_cast<T>(-1) < static_cast<T>(0);
}

// Floor division and modulo (tile-ir.md §3): x / 0 == 0, x % 0 == x, and
// x / -1 wraps instead of trapping.
template <typename T>
__device__ inline T floordiv(T a, T b) {
  if (b == 0) return 0;
  if constexpr (is_signed_int<T>()) {
    if (b == static_cast<T>(-1)) return static_cast<T>(T(0) - a);
    const T q = a / b;
    const bool inexact = q * b != a;
    return (inexact && ((a ^ b) < 0)) ? static_cast<T>(q - 1) : q;
  } else {
    return a / b;
  }
}
template <typename T>
__device__ inline T floormod(T a, T b) {
  if (b == 0) return a;
  if constexpr (is_signed_int<T>()) {
    if (b == static_cast<T>(-1)) return 0;
    const T r = a % b;
    return (r != 0 && ((r ^ b) < 0)) ? static_cast<T>(r + b) : r;
  } else {
    return a % b;
  }
}
template <typename T>
__device__ inline T ceildiv(T a, T b) {
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
// Shifts by a negative amount or by the width or more give 0 (or -1 for a
// right shift of a negative signed value).
template <typename T>
__device__ inline T shl(T a, long long n) {
  constexpr long long kBits = sizeof(T) * 8;
  if (n < 0 || n >= kBits) return T(0);
  return static_cast<T>(a << n);
}
template <typename T>
__device__ inline T shr(T a, long long n) {
  constexpr long long kBits = sizeof(T) * 8;
  if (n >= 0 && n < kBits) return static_cast<T>(a >> n);
  if constexpr (is_signed_int<T>()) return a < 0 ? T(-1) : T(0);
  return T(0);
}
// 4-bit integers held in a byte: the low nibble, sign-extended for i4.
__device__ inline i8 wrap_i4(long long v) {
  const int nib = static_cast<int>(v & 0xf);
  return static_cast<i8>(nib >= 8 ? nib - 16 : nib);
}
__device__ inline u8 wrap_u4(long long v) { return static_cast<u8>(v & 0xf); }

// Float to integer, truncating and saturating at [lo, hi]; NaN gives 0.
template <typename T>
__device__ inline T sat_cast(double x, double lo, double hi) {
  if (!(x == x)) return 0;
  return x <= lo ? static_cast<T>(lo)
                 : (x >= hi ? static_cast<T>(hi) : static_cast<T>(x));
}
__device__ inline i64 f_to_i64(double x) {
  constexpr double kTwo63 = 9223372036854775808.0;
  if (!(x == x)) return 0;
  if (x >= kTwo63) return static_cast<i64>(~0ull >> 1);
  if (x <= -kTwo63) return static_cast<i64>(1ull << 63);
  return static_cast<i64>(x);
}

// ---- math
// -----------------------------------------------------------------------

__device__ inline float exp2_(float x) { return exp2f(x); }
// 1 / x correctly rounded (an IEEE division).
__device__ inline float rcp_rn(float x) { return 1.0f / x; }
__device__ inline float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ inline double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
__device__ inline float rsqrt_(float x) { return 1.0f / sqrtf(x); }
__device__ inline double rsqrt_(double x) { return 1.0 / sqrt(x); }
template <typename T>
__device__ inline T min_(T a, T b) {
  return b < a ? b : a;
}
template <typename T>
__device__ inline T max_(T a, T b) {
  return a < b ? b : a;
}
// Floats: a NaN operand wins, as in torch and NumPy and on CUDA
// (tile-ir.md §3, Numerics).
__device__ inline float min_(float a, float b) {
  return (a != a || b != b) ? a + b : fminf(a, b);
}
__device__ inline float max_(float a, float b) {
  return (a != a || b != b) ? a + b : fmaxf(a, b);
}
__device__ inline double min_(double a, double b) {
  return (a != a || b != b) ? a + b : fmin(a, b);
}
__device__ inline double max_(double a, double b) {
  return (a != a || b != b) ? a + b : fmax(a, b);
}
// isnan / isinf of f32 and f64 (narrow floats arrive as f32).
__device__ inline bool isnan_(float x) { return x != x; }
__device__ inline bool isnan_(double x) { return x != x; }
__device__ inline bool isinf_(float x) {
  return fabsf(x) == __builtin_huge_valf();
}
__device__ inline bool isinf_(double x) {
  return fabs(x) == __builtin_huge_val();
}
template <typename T>
__device__ inline T abs_(T a) {
  return a < 0 ? static_cast<T>(-a) : a;
}
__device__ inline float abs_(float a) { return fabsf(a); }
__device__ inline double abs_(double a) { return fabs(a); }

}  // namespace kiln

#endif  // KILN_DEVICE_SCALAR_HIP_H_
