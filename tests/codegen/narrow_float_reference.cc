#include "tests/codegen/narrow_float_reference.h"

#include <cmath>
#include <limits>

namespace kiln::testing {

uint32_t MaxFiniteCode(const NarrowFormat& f) {
  const int ebits = f.bits - 1 - f.mbits;
  return f.ieee ? ((((1u << ebits) - 1) << f.mbits) - 1) : 0x7E;
}

// The value of `code` (NaN for NaN codes).
double Decode(uint32_t code, const NarrowFormat& f) {
  const int ebits = f.bits - 1 - f.mbits;
  const uint32_t emask = (1u << ebits) - 1;
  const bool neg = (code >> (f.bits - 1)) & 1;
  const uint32_t e = (code >> f.mbits) & emask;
  const uint32_t m = code & ((1u << f.mbits) - 1);
  double v;
  if (f.ieee && e == emask) {
    v = m == 0 ? std::numeric_limits<double>::infinity()
               : std::numeric_limits<double>::quiet_NaN();
  } else if (!f.ieee && e == emask && m == (1u << f.mbits) - 1) {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - f.bias - f.mbits);
  } else {
    v = std::ldexp(1.0 + std::ldexp(static_cast<double>(m), -f.mbits),
                   static_cast<int>(e) - f.bias);
  }
  return neg ? -v : v;
}

// Round-to-nearest-even encoding of `x`, by search over the codes.
uint32_t Encode(double x, const NarrowFormat& f) {
  const uint32_t sign = std::signbit(x) ? 1u << (f.bits - 1) : 0;
  const double ax = std::fabs(x);
  const uint32_t max_code = MaxFiniteCode(f);
  const double max = Decode(max_code, f);
  if (std::isnan(x))
    return sign | (f.ieee ? (max_code + 1) | (1u << (f.mbits - 1)) : 0x7F);
  if (ax > max) {
    if (!f.ieee) return sign | max_code;  // saturate
    const double half_ulp = (max - Decode(max_code - 1, f)) / 2;
    return sign | (ax >= max + half_ulp ? max_code + 1 : max_code);
  }
  uint32_t lo = 0, hi = max_code;  // largest code with value <= ax
  while (lo < hi) {
    const uint32_t mid = (lo + hi + 1) / 2;
    if (Decode(mid, f) <= ax) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  if (lo == max_code || Decode(lo, f) == ax) return sign | lo;
  const double a = Decode(lo, f), b = Decode(lo + 1, f);
  const double mid = a + (b - a) / 2;
  uint32_t code = ax < mid ? lo : ax > mid ? lo + 1 : ((lo & 1) ? lo + 1 : lo);
  return sign | code;
}

}  // namespace kiln::testing
