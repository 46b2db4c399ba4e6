// Narrow float conversions of the CPU back end (f16, bf16, f8e4m3, f8e5m2;
// with and without F16C), checked bit-exactly against the reference of
// narrow_float_reference.h.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/cpu/cpu_kernel.h"
#include "tests/codegen/cpu_test_util.h"
#include "tests/codegen/narrow_float_reference.h"

namespace kiln {
namespace {

using runtime::ArgValue;
using runtime::DType;
using testing::Decode;
using testing::Encode;
using testing::kBF16;
using testing::kE4M3;
using testing::kE5M2;
using testing::kF16;
using testing::MaxFiniteCode;
using Format = testing::NarrowFormat;

float Bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

// Inputs that probe every rounding path of `f`: codes' values, midpoints
// and their neighbours, overflow and underflow edges, specials, random.
std::vector<double> Probes(const Format& f, bool f64_ties) {
  std::vector<double> v = {0.0,     -0.0,    INFINITY, -INFINITY, NAN,
                           1e30,    -1e30,   1e-30,    448.0,     464.0,
                           465.0,   480.0,   57344.0,  61440.0,   65504.0,
                           65520.0, 65519.99};
  const uint32_t max_code = MaxFiniteCode(f);
  const uint32_t step = f.bits == 16 ? 37 : 1;
  for (uint32_t c = 0; c <= max_code; c += step) {
    const double a = Decode(c, f), b = Decode(c + 1, f);
    const double mid = a + (b - a) / 2;
    for (double x :
         {a, mid, std::nextafter(static_cast<float>(mid), 0.0f) * 1.0,
          std::nextafter(static_cast<float>(mid), 1e9f) * 1.0}) {
      v.push_back(x);
      v.push_back(-x);
    }
    if (f64_ties) {  // ties in f32 that are not ties in f64
      v.push_back(mid + (b - a) * 1e-9);
      v.push_back(mid - (b - a) * 1e-9);
    }
  }
  std::mt19937 rng(42);
  for (int i = 0; i < 4000; ++i) {
    const float r = Bits(static_cast<uint32_t>(rng()));
    if (!std::isnan(r)) v.push_back(r);
  }
  return v;
}

constexpr char kToNarrow[] = R"(
kernel to_narrow(X: f32[N], H: f16[N], B: bf16[N], E4: f8e4m3[N], E5: f8e5m2[N])
  grid(1) threads(1) (bx) {
  for i in serial(N) {
    H[i] = X[i]
    B[i] = X[i]
    E4[i] = X[i]
    E5[i] = X[i]
  }
}
)";

void CheckToNarrow(const std::string& text, DType src, bool f64_ties,
                   const compiler::CpuCodegenOptions& options) {
  auto kernel = testing::CompileAndLoad(text, options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const Format formats[4] = {kF16, kBF16, kE4M3, kE5M2};
  for (const Format& probe_format : formats) {
    std::vector<double> x = Probes(probe_format, f64_ties);
    if (src == DType::kF32) {  // the kernel reads f32: probe what f32 holds
      for (double& d : x) d = static_cast<float>(d);
    }
    const int64_t n = static_cast<int64_t>(x.size());
    std::vector<float> xf(x.begin(), x.end());
    std::vector<uint16_t> h(n), b(n);
    std::vector<uint8_t> e4(n), e5(n);
    absl::Status st = (*kernel)->Launch({
        src == DType::kF32 ? ArgValue::Tensor(xf.data(), DType::kF32, {n})
                           : ArgValue::Tensor(x.data(), DType::kF64, {n}),
        ArgValue::Tensor(h.data(), DType::kF16, {n}),
        ArgValue::Tensor(b.data(), DType::kBF16, {n}),
        ArgValue::Tensor(e4.data(), DType::kF8E4M3, {n}),
        ArgValue::Tensor(e5.data(), DType::kF8E5M2, {n}),
    });
    ASSERT_TRUE(st.ok()) << st;
    int failures = 0;
    for (int64_t i = 0; i < n && failures < 10; ++i) {
      const uint32_t got[4] = {h[i], b[i], e4[i], e5[i]};
      for (int k = 0; k < 4; ++k) {
        const uint32_t want = Encode(x[i], formats[k]);
        if (std::isnan(x[i])) {
          EXPECT_TRUE(std::isnan(Decode(got[k], formats[k])));
        } else if (got[k] != want) {
          ADD_FAILURE() << "format " << k << " of " << x[i] << " ("
                        << std::hexfloat << x[i] << std::defaultfloat
                        << "): got 0x" << std::hex << got[k] << " want 0x"
                        << want << std::dec;
          ++failures;
        }
      }
    }
  }
}

TEST(CpuNumericTest, F32ToNarrowFloatsRoundToNearestEven) {
  CheckToNarrow(kToNarrow, DType::kF32, false, {});
}

TEST(CpuNumericTest, F32ToNarrowFloatsWithoutF16c) {
  CheckToNarrow(kToNarrow, DType::kF32, false, testing::NoF16cOptions());
}

TEST(CpuNumericTest, F64ToNarrowFloatsRoundOnce) {
  std::string text = kToNarrow;
  text.replace(text.find("X: f32"), 6, "X: f64");
  CheckToNarrow(text, DType::kF64, true, {});
  CheckToNarrow(text, DType::kF64, true, testing::NoF16cOptions());
}

constexpr char kFromNarrow[] = R"(
kernel from_narrow(H: f16[NH], B: bf16[NH], E4: f8e4m3[N8], E5: f8e5m2[N8],
                   OH: f32[NH], OB: f32[NH], O4: f32[N8], O5: f32[N8],
                   PH: f16[NH], P4: f8e4m3[N8])
  grid(1) threads(1) (bx) {
  for i in serial(NH) {
    OH[i] = H[i]
    OB[i] = B[i]
    PH[i] = H[i] * H[(i + 1) % NH]
  }
  for i in serial(N8) {
    O4[i] = E4[i]
    O5[i] = E5[i]
    P4[i] = E4[i] * E4[(i + 3) % N8]
  }
}
)";

void CheckFromNarrow(const compiler::CpuCodegenOptions& options) {
  auto kernel = testing::CompileAndLoad(kFromNarrow, options);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const int64_t nh = 65536, n8 = 256;
  std::vector<uint16_t> h(nh), b(nh), ph(nh);
  std::vector<uint8_t> e4(n8), e5(n8), p4(n8);
  for (int64_t i = 0; i < nh; ++i) h[i] = b[i] = static_cast<uint16_t>(i);
  for (int64_t i = 0; i < n8; ++i) e4[i] = e5[i] = static_cast<uint8_t>(i);
  std::vector<float> oh(nh), ob(nh), o4(n8), o5(n8);
  absl::Status st = (*kernel)->Launch({
      ArgValue::Tensor(h.data(), DType::kF16, {nh}),
      ArgValue::Tensor(b.data(), DType::kBF16, {nh}),
      ArgValue::Tensor(e4.data(), DType::kF8E4M3, {n8}),
      ArgValue::Tensor(e5.data(), DType::kF8E5M2, {n8}),
      ArgValue::Tensor(oh.data(), DType::kF32, {nh}),
      ArgValue::Tensor(ob.data(), DType::kF32, {nh}),
      ArgValue::Tensor(o4.data(), DType::kF32, {n8}),
      ArgValue::Tensor(o5.data(), DType::kF32, {n8}),
      ArgValue::Tensor(ph.data(), DType::kF16, {nh}),
      ArgValue::Tensor(p4.data(), DType::kF8E4M3, {n8}),
  });
  ASSERT_TRUE(st.ok()) << st;
  auto same = [](double want, float got) {
    return std::isnan(want)
               ? std::isnan(got)
               : (want == got && std::signbit(want) == std::signbit(got));
  };
  for (int64_t i = 0; i < nh; ++i) {
    ASSERT_TRUE(same(Decode(i, kF16), oh[i])) << "f16 0x" << std::hex << i;
    ASSERT_TRUE(same(Decode(i, kBF16), ob[i])) << "bf16 0x" << std::hex << i;
    // f16 * f16 is exact in f32, then rounded once to f16.
    const double prod = Decode(i, kF16) * Decode((i + 1) % nh, kF16);
    if (!std::isnan(prod)) {
      ASSERT_EQ(ph[i], Encode(prod, kF16)) << "f16 product at " << i;
    }
  }
  for (int64_t i = 0; i < n8; ++i) {
    ASSERT_TRUE(same(Decode(i, kE4M3), o4[i])) << "e4m3 0x" << std::hex << i;
    ASSERT_TRUE(same(Decode(i, kE5M2), o5[i])) << "e5m2 0x" << std::hex << i;
    const double prod = Decode(i, kE4M3) * Decode((i + 3) % n8, kE4M3);
    if (!std::isnan(prod)) {
      ASSERT_EQ(p4[i], Encode(prod, kE4M3)) << "e4m3 product at " << i;
    }
  }
}

TEST(CpuNumericTest, NarrowFloatsToF32AreExact) { CheckFromNarrow({}); }

TEST(CpuNumericTest, NarrowFloatsToF32WithoutF16c) {
  CheckFromNarrow(testing::NoF16cOptions());
}

}  // namespace
}  // namespace kiln
