// Narrow floats are handled by one generic routine over (exponent bits,
// mantissa bits, infinities?): round in f64 by scaling to the quantum of the
// value's binade (exact: a power of two), then encode field by field.
#include "tests/e2e/dtype_codec.h"

#include <cmath>
#include <cstring>
#include <limits>

namespace kiln::e2e {
namespace {

struct FloatFormat {
  int exponent_bits;
  int mantissa_bits;
  bool has_infinity;  // false: f8e4m3 (saturating; S.1111.111 is NaN)
  int bias() const { return (1 << (exponent_bits - 1)) - 1; }
  int min_exponent() const { return 1 - bias(); }
  double max_finite() const {
    if (!has_infinity) {  // e4m3: all-ones exponent, mantissa 110
      const int top = (1 << exponent_bits) - 1 - bias();
      return std::ldexp(2.0 - std::ldexp(2.0, -mantissa_bits), top);
    }
    const int top = (1 << exponent_bits) - 2 - bias();
    return std::ldexp(2.0 - std::ldexp(1.0, -mantissa_bits), top);
  }
};

FloatFormat FormatOf(DType t) {
  switch (t) {
    case DType::kF16:
      return {5, 10, true};
    case DType::kBF16:
      return {8, 7, true};
    case DType::kF8E4M3:
      return {4, 3, false};
    case DType::kF8E5M2:
      return {5, 2, true};
    case DType::kF32:
      return {8, 23, true};
    default:
      return {11, 52, true};
  }
}

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double RoundGeneric(const FloatFormat& f, double x) {
  if (std::isnan(x) || x == 0) return x;
  const double ax = std::fabs(x);
  if (std::isinf(x))
    return f.has_infinity ? x : std::copysign(f.max_finite(), x);
  int e;
  std::frexp(ax, &e);  // ax = m * 2^e, m in [0.5, 1)
  e = std::max(e - 1, f.min_exponent());
  const double quantum = std::ldexp(1.0, e - f.mantissa_bits);
  const double r = std::nearbyint(ax / quantum) * quantum;  // ties to even
  if (r > f.max_finite()) {
    return std::copysign(f.has_infinity ? kInf : f.max_finite(), x);
  }
  return std::copysign(r, x);
}

uint64_t EncodeGeneric(const FloatFormat& f, double x) {
  const int width = 1 + f.exponent_bits + f.mantissa_bits;
  const uint64_t sign = std::signbit(x) ? uint64_t{1} << (width - 1) : 0;
  const uint64_t exp_ones = (uint64_t{1} << f.exponent_bits) - 1;
  const uint64_t man_ones = (uint64_t{1} << f.mantissa_bits) - 1;
  if (std::isnan(x)) {
    return f.has_infinity ? (exp_ones << f.mantissa_bits) |
                                (uint64_t{1} << (f.mantissa_bits - 1))
                          : (exp_ones << f.mantissa_bits) | man_ones;
  }
  const double r = std::fabs(RoundGeneric(f, x));
  if (std::isinf(r)) return sign | (exp_ones << f.mantissa_bits);
  if (r == 0) return sign;
  int e;
  std::frexp(r, &e);
  e -= 1;
  if (e < f.min_exponent()) {  // subnormal
    const double m = std::ldexp(r, f.mantissa_bits - f.min_exponent());
    return sign | static_cast<uint64_t>(m);
  }
  const double m =
      std::ldexp(r, f.mantissa_bits - e) - std::ldexp(1.0, f.mantissa_bits);
  return sign | (static_cast<uint64_t>(e + f.bias()) << f.mantissa_bits) |
         static_cast<uint64_t>(m);
}

double DecodeGeneric(const FloatFormat& f, uint64_t bits) {
  const int width = 1 + f.exponent_bits + f.mantissa_bits;
  const bool negative = (bits >> (width - 1)) & 1;
  const uint64_t exp_ones = (uint64_t{1} << f.exponent_bits) - 1;
  const uint64_t man_ones = (uint64_t{1} << f.mantissa_bits) - 1;
  const uint64_t e = (bits >> f.mantissa_bits) & exp_ones;
  const uint64_t m = bits & man_ones;
  double v;
  if (f.has_infinity && e == exp_ones) {
    v = m == 0 ? kInf : kNaN;
  } else if (!f.has_infinity && e == exp_ones && m == man_ones) {
    v = kNaN;
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), f.min_exponent() - f.mantissa_bits);
  } else {
    v = std::ldexp(static_cast<double>(m | (man_ones + 1)),
                   static_cast<int>(e) - f.bias() - f.mantissa_bits);
  }
  return negative ? -v : v;
}

}  // namespace

int ElementBytes(DType t) {
  switch (t) {
    case DType::kBool:
    case DType::kI8:
    case DType::kU8:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
    case DType::kI4:
    case DType::kU4:
      return 1;
    case DType::kI16:
    case DType::kF16:
    case DType::kBF16:
      return 2;
    case DType::kI32:
    case DType::kU32:
    case DType::kF32:
      return 4;
    case DType::kI64:
    case DType::kF64:
      return 8;
  }
  return 0;
}

bool IsFloat(DType t) {
  switch (t) {
    case DType::kF16:
    case DType::kBF16:
    case DType::kF32:
    case DType::kF64:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return true;
    default:
      return false;
  }
}

int MantissaBits(DType t) { return FormatOf(t).mantissa_bits; }

double SubnormalSpacing(DType t) {
  const FloatFormat f = FormatOf(t);
  return std::ldexp(1.0, f.min_exponent() - f.mantissa_bits);
}

double RoundToFloat(DType t, double x) {
  if (t == DType::kF64) return x;
  if (t == DType::kF32) return static_cast<float>(x);
  return RoundGeneric(FormatOf(t), x);
}

uint64_t Encode(DType t, double x) {
  switch (t) {
    case DType::kF32: {
      const float f = static_cast<float>(x);
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      return bits;
    }
    case DType::kF64: {
      uint64_t bits;
      std::memcpy(&bits, &x, 8);
      return bits;
    }
    case DType::kF16:
    case DType::kBF16:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return EncodeGeneric(FormatOf(t), x);
    case DType::kBool:
      return x != 0 ? 1 : 0;
    default: {
      const int64_t v = static_cast<int64_t>(x);
      const int bits =
          t == DType::kI4 || t == DType::kU4 ? 4 : 8 * ElementBytes(t);
      return bits == 64
                 ? static_cast<uint64_t>(v)
                 : static_cast<uint64_t>(v) & ((uint64_t{1} << bits) - 1);
    }
  }
}

double Decode(DType t, uint64_t bits) {
  switch (t) {
    case DType::kF32: {
      const uint32_t b = static_cast<uint32_t>(bits);
      float f;
      std::memcpy(&f, &b, 4);
      return f;
    }
    case DType::kF64: {
      double d;
      std::memcpy(&d, &bits, 8);
      return d;
    }
    case DType::kF16:
    case DType::kBF16:
    case DType::kF8E4M3:
    case DType::kF8E5M2:
      return DecodeGeneric(FormatOf(t), bits);
    case DType::kBool:
      return static_cast<double>(bits & 0xFF);  // 0xA5 stays visible
    case DType::kI4:
      return static_cast<double>(static_cast<int8_t>((bits & 0xF) << 4) >> 4);
    case DType::kU4:
      return static_cast<double>(bits & 0xF);
    case DType::kI8:
      return static_cast<int8_t>(bits);
    case DType::kU8:
      return static_cast<uint8_t>(bits);
    case DType::kI16:
      return static_cast<int16_t>(bits);
    case DType::kI32:
      return static_cast<int32_t>(bits);
    case DType::kU32:
      return static_cast<uint32_t>(bits);
    case DType::kI64:
      return static_cast<double>(static_cast<int64_t>(bits));
  }
  return kNaN;
}

uint64_t PoisonBits(DType t) {
  if (IsFloat(t)) return Encode(t, kNaN);
  return 0xA5A5A5A5A5A5A5A5ull;
}

int64_t IntMin(DType t) {
  switch (t) {
    case DType::kI4:
      return -8;
    case DType::kI8:
      return -128;
    case DType::kI16:
      return -32768;
    case DType::kI32:
      return INT32_MIN;
    case DType::kI64:
      return INT64_MIN;
    default:
      return 0;
  }
}

int64_t IntMax(DType t) {
  switch (t) {
    case DType::kBool:
      return 1;
    case DType::kI4:
      return 7;
    case DType::kU4:
      return 15;
    case DType::kI8:
      return 127;
    case DType::kU8:
      return 255;
    case DType::kI16:
      return 32767;
    case DType::kI32:
      return INT32_MAX;
    case DType::kU32:
      return UINT32_MAX;
    case DType::kI64:
      return INT64_MAX;
    default:
      return 0;
  }
}

}  // namespace kiln::e2e
