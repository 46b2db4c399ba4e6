// The HIP device library's scalar semantics (kiln/scalar.hip.h) checked on
// the host, since no AMD GPU runs our tests: the header is compiled as
// plain C++ with host stand-ins for the few HIP intrinsics it calls, and
// its narrow-float encoding and decoding (bf16, f8e4m3, f8e5m2: integer
// code, the same on the device) must match narrow_float_reference.h bit for
// bit; floor division, modulo, shifts and saturating casts must follow
// tile-ir.md §3. f16 uses the GPU's hardware conversion and is not checked
// here (the stand-in below is the reference itself).
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "tests/codegen/narrow_float_reference.h"

// ---- host stand-ins for what the header takes from HIP ----------------------
#define __device__
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
// f64 -> f32 rounding toward zero.
inline float __double2float_rz(double x) {
  float r = static_cast<float>(x);
  if (std::isfinite(x) && std::fabs(static_cast<double>(r)) > std::fabs(x)) {
    r = std::nextafter(r, 0.0f);
  }
  return r;
}
// x86 clang 14 has no _Float16: a 16-bit stand-in converting through the
// reference.
struct HostF16 {
  uint16_t bits;
  HostF16(float x)  // NOLINT: converts like _Float16
      : bits(static_cast<uint16_t>(
            kiln::testing::Encode(x, kiln::testing::kF16))) {}
  operator float() const {  // NOLINT
    return static_cast<float>(kiln::testing::Decode(bits, kiln::testing::kF16));
  }
};
#define _Float16 HostF16
#include "compiler/codegen/hip/device/kiln/scalar.hip.h"
#undef _Float16
#undef __device__

namespace kiln {
namespace {

using testing::Decode;
using testing::Encode;
using testing::MaxFiniteCode;
using Format = testing::NarrowFormat;

// Codes' values, the midpoints between neighbours and their f32
// neighbours, edges, specials and random floats.
std::vector<float> Probes(const Format& f) {
  std::vector<float> v = {0.0f,     -0.0f,  INFINITY, -INFINITY, 1e30f,
                          -1e30f,   1e-30f, 1e-45f,   448.0f,    464.0f,
                          465.0f,   480.0f, 57344.0f, 61440.0f,  65504.0f,
                          65520.0f, 3.4e38f};
  const uint32_t step = f.bits == 16 ? 37 : 1;
  for (uint32_t c = 0; c <= MaxFiniteCode(f); c += step) {
    const double a = Decode(c, f), b = Decode(c + 1, f);
    const float mid = static_cast<float>(a + (b - a) / 2);
    for (float x : {static_cast<float>(a), mid, std::nextafter(mid, 0.0f),
                    std::nextafter(mid, 1e30f)}) {
      v.push_back(x);
      v.push_back(-x);
    }
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 20000; ++i) {
    const float r = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (!std::isnan(r)) v.push_back(r);
  }
  return v;
}

template <typename Tag>
void CheckFormat(const Format& f) {
  for (float x : Probes(f)) {
    const uint32_t want = Encode(x, f);
    const uint32_t got = kiln::to_bits<Tag>(x);
    EXPECT_EQ(got, want) << "to_bits(" << x << ")";
  }
  const uint32_t codes = 1u << f.bits;
  for (uint32_t c = 0; c < codes; c += f.bits == 16 ? 7 : 1) {
    const double want = Decode(c, f);
    const float got = kiln::from_bits<Tag>(c);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got)) << "from_bits(" << c << ")";
    } else {
      EXPECT_EQ(static_cast<double>(got), want) << "from_bits(" << c << ")";
      EXPECT_EQ(std::signbit(got), std::signbit(want)) << c;
    }
  }
  // NaN stays NaN.
  EXPECT_TRUE(std::isnan(kiln::from_bits<Tag>(kiln::to_bits<Tag>(NAN))));
}

TEST(HipScalarHostTest, Bf16MatchesTheReference) {
  CheckFormat<kiln::bf16_t>(testing::kBF16);
}
TEST(HipScalarHostTest, E4m3MatchesTheReference) {
  CheckFormat<kiln::e4m3_t>(testing::kE4M3);
}
TEST(HipScalarHostTest, E5m2MatchesTheReference) {
  CheckFormat<kiln::e5m2_t>(testing::kE5M2);
}

TEST(HipScalarHostTest, RoundToFromF64RoundsOnce) {
  // 1 + 2^-8 + 2^-40 is above the bf16 tie 1 + 2^-8: it rounds up once,
  // where rounding to f32 first would make it a tie and round to even (1).
  const double x = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);
  EXPECT_EQ(kiln::round_to<kiln::bf16_t>(x), 1.0f + std::ldexp(1.0f, -7));
  EXPECT_EQ(kiln::round_to<kiln::bf16_t>(1.0 + std::ldexp(1.0, -8)), 1.0f);
}

TEST(HipScalarHostTest, IntegersFollowTheIrSemantics) {
  EXPECT_EQ(kiln::floordiv<long long>(-7, 2), -4);
  EXPECT_EQ(kiln::floordiv<long long>(7, -2), -4);
  EXPECT_EQ(kiln::floordiv<long long>(-8, 2), -4);
  EXPECT_EQ(kiln::floordiv<long long>(5, 0), 0);
  EXPECT_EQ(kiln::floordiv<int>(5, -1), -5);
  EXPECT_EQ(kiln::floormod<long long>(-7, 2), 1);
  EXPECT_EQ(kiln::floormod<long long>(7, -2), -1);
  EXPECT_EQ(kiln::floormod<long long>(5, 0), 5);
  EXPECT_EQ(kiln::floormod<int>(5, -1), 0);
  EXPECT_EQ(kiln::floordiv<unsigned>(7u, 2u), 3u);
  EXPECT_EQ(kiln::ceildiv<long long>(7, 2), 4);
  EXPECT_EQ(kiln::ceildiv<long long>(7, 0), 0);
  EXPECT_EQ(kiln::shl<int>(1, 31), std::numeric_limits<int>::min());
  EXPECT_EQ(kiln::shl<int>(1, 32), 0);
  EXPECT_EQ(kiln::shl<int>(1, -1), 0);
  EXPECT_EQ(kiln::shr<int>(-8, 1), -4);
  EXPECT_EQ(kiln::shr<int>(-8, 40), -1);
  EXPECT_EQ(kiln::shr<unsigned>(8u, 40), 0u);
  EXPECT_EQ(kiln::wrap_i4(7), 7);
  EXPECT_EQ(kiln::wrap_i4(8), -8);
  EXPECT_EQ(kiln::wrap_i4(-1), -1);
  EXPECT_EQ(kiln::wrap_u4(-1), 15);
  EXPECT_EQ(kiln::sat_cast<int>(1e20, -2147483648.0, 2147483647.0), 2147483647);
  EXPECT_EQ(kiln::sat_cast<int>(-1e20, -2147483648.0, 2147483647.0),
            std::numeric_limits<int>::min());
  EXPECT_EQ(kiln::sat_cast<int>(NAN, -2147483648.0, 2147483647.0), 0);
  EXPECT_EQ(kiln::sat_cast<int>(-2.9, -2147483648.0, 2147483647.0), -2);
  EXPECT_EQ(kiln::f_to_i64(1e300), std::numeric_limits<long long>::max());
  EXPECT_EQ(kiln::f_to_i64(-1e300), std::numeric_limits<long long>::min());
  EXPECT_EQ(kiln::f_to_i64(NAN), 0);
  EXPECT_EQ(kiln::f_to_i64(-3.7), -3);
}

}  // namespace
}  // namespace kiln
