// Reference conversions for the narrow float formats (f16, bf16, f8e4m3,
// f8e5m2), written from the format definitions and independent of the back
// end: decoding from the bit fields, and round-to-nearest-even encoding by a
// search over the codes.
#ifndef KILN_TESTS_CODEGEN_NARROW_FLOAT_REFERENCE_H_
#define KILN_TESTS_CODEGEN_NARROW_FLOAT_REFERENCE_H_

#include <cstdint>

namespace kiln::testing {

struct NarrowFormat {
  int bits;
  int mbits;
  int bias;
  bool ieee;  // false: f8e4m3 (no inf, only all-ones is NaN, saturating)
};
inline constexpr NarrowFormat kF16{16, 10, 15, true};
inline constexpr NarrowFormat kBF16{16, 7, 127, true};
inline constexpr NarrowFormat kE4M3{8, 3, 7, false};
inline constexpr NarrowFormat kE5M2{8, 2, 15, true};

// The largest finite positive code.
uint32_t MaxFiniteCode(const NarrowFormat& f);
// The value of `code` (NaN for NaN codes).
double Decode(uint32_t code, const NarrowFormat& f);
// `x` rounded to nearest, ties to even: overflow gives infinity (IEEE-like
// formats) or the largest finite value (f8e4m3); NaN gives a NaN.
uint32_t Encode(double x, const NarrowFormat& f);

}  // namespace kiln::testing

#endif  // KILN_TESTS_CODEGEN_NARROW_FLOAT_REFERENCE_H_
