// Numeric semantics of the CPU back end, checked bit-exactly against
// references written here independently of the back end: packed i4/u4,
// floor division and modulo, shifts and bit operations, and every math
// builtin against libm (narrow floats: cpu_narrow_float_test.cc).
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
using testing::kF16;

// ------------------------------------------------------------- i4 and u4

constexpr char kNibbles[] = R"(
kernel nibbles(P: i4[N], Q: u4[N], OP: i32[N], OQ: i32[N], W: i4[N],
               WU: u4[N], F: f32[N], WF: i4[N], OT: i32[N])
  grid(1) threads(1) (bx) {
  alloc local T: i4[64]
  for i in serial(N) {
    OP[i] = i32(P[i])
    OQ[i] = i32(Q[i])
    W[i] = i4(OP[i] - 3)
    WU[i] = u4(i + 9)
    WF[i] = F[i]
    T[63 - i] = P[i] + 1
  }
  for i in serial(N) {
    OT[i] = T[i]
  }
}
)";

int Nibble(const std::vector<uint8_t>& bytes, int i) {
  return (bytes[i / 2] >> ((i & 1) * 4)) & 0xF;
}
int SignExtend4(int v) { return v >= 8 ? v - 16 : v; }

TEST(CpuNumericTest, PackedI4AndU4LowNibbleFirst) {
  auto kernel = testing::CompileAndLoad(kNibbles);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const int n = 64;
  std::vector<uint8_t> p(n / 2), q(n / 2), w(n / 2, 0xAA), wu(n / 2, 0x55),
      wf(n / 2);
  for (int i = 0; i < n / 2; ++i)
    p[i] = q[i] = static_cast<uint8_t>(i * 37 + 5);
  std::vector<int32_t> op(n), oq(n), ot(n);
  std::vector<float> f(n);
  for (int i = 0; i < n; ++i) f[i] = (i - 32) * 0.7f;
  absl::Status st = (*kernel)->Launch({
      ArgValue::Tensor(p.data(), DType::kI4, {n}),
      ArgValue::Tensor(q.data(), DType::kU4, {n}),
      ArgValue::Tensor(op.data(), DType::kI32, {n}),
      ArgValue::Tensor(oq.data(), DType::kI32, {n}),
      ArgValue::Tensor(w.data(), DType::kI4, {n}),
      ArgValue::Tensor(wu.data(), DType::kU4, {n}),
      ArgValue::Tensor(f.data(), DType::kF32, {n}),
      ArgValue::Tensor(wf.data(), DType::kI4, {n}),
      ArgValue::Tensor(ot.data(), DType::kI32, {n}),
  });
  ASSERT_TRUE(st.ok()) << st;
  for (int i = 0; i < n; ++i) {
    const int pi = SignExtend4(Nibble(p, i));
    EXPECT_EQ(op[i], pi) << i;
    EXPECT_EQ(oq[i], Nibble(q, i)) << i;
    EXPECT_EQ(Nibble(w, i), (pi - 3) & 0xF) << i;  // wraps to 4 bits
    EXPECT_EQ(Nibble(wu, i), (i + 9) & 0xF) << i;
    // Float to integer saturates (and truncates toward zero).
    const int want_f = std::max(-8, std::min(7, static_cast<int>(f[i])));
    EXPECT_EQ(SignExtend4(Nibble(wf, i)), want_f) << f[i];
    // Tile nibbles: read-modify-write keeps the neighbour.
    EXPECT_EQ(ot[n - 1 - i], SignExtend4((pi + 1) & 0xF)) << i;
  }
}

TEST(CpuNumericTest, NibbleStoresFromManyBlocksKeepNeighbours) {
  constexpr char kText[] = R"(
kernel scatter(W: i4[N])
  grid(N) threads(1) (bx) {
  W[bx] = i4(bx % 16 - 8)
}
)";
  auto kernel = testing::CompileAndLoad(kText);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const int n = 1 << 14;
  for (int round = 0; round < 5; ++round) {
    std::vector<uint8_t> w(n / 2, 0);
    ASSERT_TRUE(
        (*kernel)->Launch({ArgValue::Tensor(w.data(), DType::kI4, {n})}).ok());
    for (int i = 0; i < n; ++i) {
      ASSERT_EQ(Nibble(w, i), (i % 16 - 8) & 0xF) << i;
    }
  }
}

// --------------------------------------------------------- integer ops

int64_t RefFloorDiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t RefFloorMod(int64_t a, int64_t b) {
  if (b == 0) return a;
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
int64_t RefCeilDiv(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return static_cast<int64_t>(0 - static_cast<uint64_t>(a));
  int64_t q = a / b;
  if (a % b != 0 && ((a < 0) == (b < 0))) ++q;
  return q;
}

constexpr char kDivMod[] = R"(
kernel divmod(A: i64[N], B: i64[N], O: i64[9, N], OI: i32[2, N], OU: u32[2, N])
  grid(1) threads(1) (bx) {
  for i in serial(N) {
    O[0, i] = A[i] / B[i]
    O[1, i] = A[i] % B[i]
    O[2, i] = A[i] / 8
    O[3, i] = A[i] % 8
    O[4, i] = A[i] / -3
    O[5, i] = A[i] % -3
    O[6, i] = ceildiv(A[i], B[i])
    O[7, i] = (i - 50) / 7
    O[8, i] = (i - 50) % 7
    OI[0, i] = i32(A[i]) / i32(B[i])
    OI[1, i] = i32(A[i]) % i32(B[i])
    OU[0, i] = u32(A[i]) / u32(B[i])
    OU[1, i] = u32(A[i]) % u32(B[i])
  }
}
)";

TEST(CpuNumericTest, FloorDivisionAndModuloWithNegatives) {
  auto kernel = testing::CompileAndLoad(kDivMod);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<int64_t> a, b;
  const int64_t vals[] = {0,    1,         -1,        7,         -7,
                          8,    -8,        9,         -9,        100,
                          -100, INT64_MAX, INT64_MIN, INT32_MIN, INT32_MAX};
  const int64_t divs[] = {1, -1, 2, -2, 3, -3, 7, -7, 8, 0, INT64_MIN};
  for (int64_t x : vals) {
    for (int64_t y : divs) {
      a.push_back(x);
      b.push_back(y);
    }
  }
  const int64_t n = static_cast<int64_t>(a.size());
  std::vector<int64_t> o(9 * n);
  std::vector<int32_t> oi(2 * n);
  std::vector<uint32_t> ou(2 * n);
  absl::Status st = (*kernel)->Launch({
      ArgValue::Tensor(a.data(), DType::kI64, {n}),
      ArgValue::Tensor(b.data(), DType::kI64, {n}),
      ArgValue::Tensor(o.data(), DType::kI64, {9, n}),
      ArgValue::Tensor(oi.data(), DType::kI32, {2, n}),
      ArgValue::Tensor(ou.data(), DType::kU32, {2, n}),
  });
  ASSERT_TRUE(st.ok()) << st;
  for (int64_t i = 0; i < n; ++i) {
    SCOPED_TRACE(::testing::Message() << a[i] << " and " << b[i]);
    EXPECT_EQ(o[0 * n + i], RefFloorDiv(a[i], b[i]));
    EXPECT_EQ(o[1 * n + i], RefFloorMod(a[i], b[i]));
    EXPECT_EQ(o[2 * n + i], RefFloorDiv(a[i], 8));
    EXPECT_EQ(o[3 * n + i], RefFloorMod(a[i], 8));
    EXPECT_EQ(o[4 * n + i], RefFloorDiv(a[i], -3));
    EXPECT_EQ(o[5 * n + i], RefFloorMod(a[i], -3));
    EXPECT_EQ(o[6 * n + i], RefCeilDiv(a[i], b[i]));
    EXPECT_EQ(o[7 * n + i], RefFloorDiv(i - 50, 7));
    EXPECT_EQ(o[8 * n + i], RefFloorMod(i - 50, 7));
    const int32_t a32 = static_cast<int32_t>(a[i]);
    const int32_t b32 = static_cast<int32_t>(b[i]);
    auto wrap32 = [](int64_t v) { return static_cast<int32_t>(v); };
    EXPECT_EQ(oi[i], b32 == -1 ? wrap32(-int64_t{a32})
                               : wrap32(RefFloorDiv(a32, b32)));
    EXPECT_EQ(oi[n + i], wrap32(RefFloorMod(a32, b32)));
    const uint32_t ua = static_cast<uint32_t>(a[i]);
    const uint32_t ub = static_cast<uint32_t>(b[i]);
    EXPECT_EQ(ou[i], ub == 0 ? 0u : ua / ub);
    EXPECT_EQ(ou[n + i], ub == 0 ? ua : ua % ub);
  }
}

constexpr char kBits[] = R"(
kernel bits(A: i64[N], S: i64[N], U: u32[N], O: i64[6, N], OU: u32[2, N])
  grid(1) threads(1) (bx) {
  for i in serial(N) {
    O[0, i] = A[i] << S[i]
    O[1, i] = A[i] >> S[i]
    O[2, i] = A[i] & 0xFF | S[i] ^ 5
    O[3, i] = ~A[i]
    O[4, i] = abs(A[i])
    O[5, i] = min(A[i], S[i]) * 1000 + max(A[i], S[i])
    OU[0, i] = U[i] >> u32(S[i])
    OU[1, i] = U[i] << 3
  }
}
)";

TEST(CpuNumericTest, ShiftsAndBitOperations) {
  auto kernel = testing::CompileAndLoad(kBits);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<int64_t> a, s;
  std::vector<uint32_t> u;
  for (int64_t x :
       {int64_t{1}, int64_t{-1}, int64_t{12345}, int64_t{-98765}, INT64_MIN}) {
    for (int64_t y : {0, 1, 5, 31, 32, 63, 64, 100, -1}) {
      a.push_back(x);
      s.push_back(y);
      u.push_back(0x80000001u ^ static_cast<uint32_t>(x));
    }
  }
  const int64_t n = static_cast<int64_t>(a.size());
  std::vector<int64_t> o(6 * n);
  std::vector<uint32_t> ou(2 * n);
  ASSERT_TRUE((*kernel)
                  ->Launch({ArgValue::Tensor(a.data(), DType::kI64, {n}),
                            ArgValue::Tensor(s.data(), DType::kI64, {n}),
                            ArgValue::Tensor(u.data(), DType::kU32, {n}),
                            ArgValue::Tensor(o.data(), DType::kI64, {6, n}),
                            ArgValue::Tensor(ou.data(), DType::kU32, {2, n})})
                  .ok());
  for (int64_t i = 0; i < n; ++i) {
    SCOPED_TRACE(::testing::Message() << a[i] << " and " << s[i]);
    const bool in = s[i] >= 0 && s[i] < 64;
    const uint64_t ua = static_cast<uint64_t>(a[i]);
    EXPECT_EQ(o[i], in ? static_cast<int64_t>(ua << s[i]) : 0);
    EXPECT_EQ(o[n + i], in ? a[i] >> s[i] : (a[i] < 0 ? -1 : 0));
    EXPECT_EQ(o[2 * n + i], (a[i] & 0xFF) | (s[i] ^ 5));
    EXPECT_EQ(o[3 * n + i], ~a[i]);
    EXPECT_EQ(o[4 * n + i], a[i] == INT64_MIN ? INT64_MIN : std::llabs(a[i]));
    EXPECT_EQ(o[5 * n + i],
              static_cast<int64_t>(
                  static_cast<uint64_t>(std::min(a[i], s[i])) * 1000 +
                  static_cast<uint64_t>(std::max(a[i], s[i]))));
    const uint32_t c = static_cast<uint32_t>(s[i]);
    EXPECT_EQ(ou[i], c < 32 ? u[i] >> c : 0u);
    EXPECT_EQ(ou[n + i], u[i] << 3);
  }
}

// --------------------------------------------------------- math builtins

constexpr char kMath[] = R"(
kernel math(X: f32[N], Y: f32[N], O: f32[15, N], X64: f64[N], O64: f64[4, N],
            H: f16[N], O16: f16[3, N])
  grid(1) threads(1) (bx) {
  for i in serial(N) {
    let x = X[i]
    O[0, i] = exp(x)
    O[1, i] = exp2(x)
    O[2, i] = log(x)
    O[3, i] = log2(x)
    O[4, i] = sqrt(x)
    O[5, i] = rsqrt(x)
    O[6, i] = tanh(x)
    O[7, i] = sigmoid(x)
    O[8, i] = erf(x)
    O[9, i] = fma(x, Y[i], 0.25)
    O[10, i] = abs(x)
    O[11, i] = min(x, Y[i])
    O[12, i] = max(x, Y[i])
    O[13, i] = select(x < Y[i], x * 2.0, Y[i] - 1.0)
    O[14, i] = x / Y[i]
    O64[0, i] = exp(X64[i])
    O64[1, i] = tanh(X64[i])
    O64[2, i] = erf(X64[i])
    O64[3, i] = sigmoid(X64[i])
    O16[0, i] = exp(H[i])
    O16[1, i] = sqrt(H[i])
    O16[2, i] = H[i] + 1
  }
}
)";

TEST(CpuNumericTest, MathBuiltinsMatchLibm) {
  auto kernel = testing::CompileAndLoad(kMath);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<float> x, y;
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-20.0f, 20.0f);
  for (float v : {0.0f, -0.0f, 1.0f, -1.0f, 0.5f, 88.0f, -100.0f, 1e-30f,
                  INFINITY, -INFINITY, NAN}) {
    x.push_back(v);
    y.push_back(2.0f);
  }
  for (int i = 0; i < 500; ++i) {
    x.push_back(dist(rng));
    y.push_back(dist(rng));
  }
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<double> x64(x.begin(), x.end());
  std::vector<uint16_t> h(n);
  for (int64_t i = 0; i < n; ++i) h[i] = Encode(x[i] / 4, kF16);
  std::vector<float> o(15 * n);
  std::vector<double> o64(4 * n);
  std::vector<uint16_t> o16(3 * n);
  absl::Status st = (*kernel)->Launch({
      ArgValue::Tensor(x.data(), DType::kF32, {n}),
      ArgValue::Tensor(y.data(), DType::kF32, {n}),
      ArgValue::Tensor(o.data(), DType::kF32, {15, n}),
      ArgValue::Tensor(x64.data(), DType::kF64, {n}),
      ArgValue::Tensor(o64.data(), DType::kF64, {4, n}),
      ArgValue::Tensor(h.data(), DType::kF16, {n}),
      ArgValue::Tensor(o16.data(), DType::kF16, {3, n}),
  });
  ASSERT_TRUE(st.ok()) << st;
  auto same = [](double want, double got) {
    return (std::isnan(want) && std::isnan(got)) || want == got;
  };
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i], w = y[i];
    SCOPED_TRACE(::testing::Message() << "x = " << v << ", y = " << w);
    const float want[15] = {std::exp(v), std::exp2(v), std::log(v),
                            std::log2(v), std::sqrt(v), 1.0f / std::sqrt(v),
                            std::tanh(v), 1.0f / (1.0f + std::exp(-v)),
                            std::erf(v), std::fma(v, w, 0.25f), std::fabs(v),
                            // min / max: a NaN operand wins.
                            v != v || w != w ? NAN : std::fmin(v, w),
                            v != v || w != w ? NAN : std::fmax(v, w),
                            v < w ? v * 2.0f : w - 1.0f, v / w};
    for (int k = 0; k < 15; ++k) {
      EXPECT_TRUE(same(want[k], o[k * n + i]))
          << "row " << k << ": got " << o[k * n + i] << " want " << want[k];
    }
    const double d = x64[i];
    const double want64[4] = {std::exp(d), std::tanh(d), std::erf(d),
                              1.0 / (1.0 + std::exp(-d))};
    for (int k = 0; k < 4; ++k) {
      EXPECT_TRUE(same(want64[k], o64[k * n + i])) << "f64 row " << k;
    }
    const float hv = static_cast<float>(Decode(h[i], kF16));
    const float want16[3] = {std::exp(hv), std::sqrt(hv), hv + 1.0f};
    for (int k = 0; k < 3; ++k) {
      const uint32_t want_bits = Encode(want16[k], kF16);
      if (std::isnan(want16[k])) {
        EXPECT_TRUE(std::isnan(Decode(o16[k * n + i], kF16)));
      } else {
        EXPECT_EQ(o16[k * n + i], want_bits) << "f16 row " << k;
      }
    }
  }
}

}  // namespace
}  // namespace kiln
