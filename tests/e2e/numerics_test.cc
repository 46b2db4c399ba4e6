// Numerics the manual defines (numerics.tile, tile-ir.md §3): NaN wins in
// max, min and the max/min/absmax reductions, as in torch and NumPy (issue
// 22's probe rows: a NaN first, last, alone, beside infinities); isnan and
// isinf; integer division, modulo and ceildiv by zero.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "gtest/gtest.h"
#include "tests/e2e/e2e_harness.h"
#include "tests/e2e/references.h"
#include "tests/e2e/tolerance.h"

namespace kiln::e2e {
namespace {

KILN_E2E_COVERS("numerics.tile", "nan_rows");
KILN_E2E_COVERS("numerics.tile", "int_division");

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// NumPy's maximum / minimum: a NaN operand wins.
double NanMax(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? kNan : std::max(a, b);
}
double NanMin(double a, double b) {
  return std::isnan(a) || std::isnan(b) ? kNan : std::min(a, b);
}

class NumericsE2eTest : public E2eTest {};

TEST_F(NumericsE2eTest, MaxMinAndReductionsPropagateNan) {
  KILN_E2E_LOAD(kernel, "numerics.tile", "nan_rows");
  const int64_t m = 10, n = 64;
  HostTensor x = Random(DType::kF32, {m, n}, -3, 3);
  HostTensor y = Random(DType::kF32, {m, n}, -3, 3);
  // Row 0 finite; 1 a NaN first; 2 a NaN last; 3 all NaN; 4 NaN beside
  // +inf and -inf; 5 infinities only; 6 -inf everywhere; 7 NaN in y only
  // (the elementwise ops see it); 8 zeros of both signs; 9 finite.
  x.Set(1 * n + 0, kNan);
  x.Set(2 * n + n - 1, kNan);
  for (int64_t j = 0; j < n; ++j) x.Set(3 * n + j, kNan);
  x.Set(4 * n + 3, kInf);
  x.Set(4 * n + 9, kNan);
  x.Set(4 * n + 20, -kInf);
  x.Set(5 * n + 1, kInf);
  x.Set(5 * n + 2, -kInf);
  for (int64_t j = 0; j < n; ++j) x.Set(6 * n + j, -kInf);
  y.Set(7 * n + 5, kNan);
  for (int64_t j = 0; j < n; ++j) x.Set(8 * n + j, j % 2 ? -0.0 : 0.0);
  HostTensor row_max(DType::kF32, {m}), row_min(DType::kF32, {m}),
      row_abs(DType::kF32, {m}), mx(DType::kF32, {m, n}),
      mn(DType::kF32, {m, n}), cls(DType::kI32, {m, n});
  ASSERT_TRUE(Launch()
                  .In(x)
                  .In(y)
                  .Out(row_max)
                  .Out(row_min)
                  .Out(row_abs)
                  .Out(mx)
                  .Out(mn)
                  .Out(cls)
                  .Run(*kernel));
  const Values xv = x.Values(), yv = y.Values();
  Values rmax(m, -kInf), rmin(m, kInf), rabs(m, 0), emax(m * n), emin(m * n),
      ecls(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const double a = xv[i * n + j], b = yv[i * n + j];
      rmax[i] = NanMax(rmax[i], a);
      rmin[i] = NanMin(rmin[i], a);
      rabs[i] = NanMax(rabs[i], std::fabs(a));
      emax[i * n + j] = NanMax(a, b);
      emin[i * n + j] = NanMin(a, b);
      ecls[i * n + j] = std::isnan(a) ? 1 : std::isinf(a) ? 2 : 0;
    }
  }
  // (AllClose counts a NaN equal only to a NaN.)
  EXPECT_TRUE(AllClose(row_max, rmax, Exact()));
  EXPECT_TRUE(AllClose(row_min, rmin, Exact()));
  EXPECT_TRUE(AllClose(row_abs, rabs, Exact()));
  EXPECT_TRUE(AllClose(mx, emax, Exact()));
  EXPECT_TRUE(AllClose(mn, emin, Exact()));
  EXPECT_TRUE(AllClose(cls, ecls, Exact()));
  for (int64_t i : {1, 2, 3, 4}) {
    EXPECT_TRUE(std::isnan(row_max.Get(i))) << "row " << i;
    EXPECT_TRUE(std::isnan(row_min.Get(i))) << "row " << i;
    EXPECT_TRUE(std::isnan(row_abs.Get(i))) << "row " << i;
  }
  EXPECT_TRUE(std::isnan(mx.Get(7 * n + 5)));
}

TEST_F(NumericsE2eTest, IntegerDivisionAndModuloByZeroAreDefined) {
  KILN_E2E_LOAD(kernel, "numerics.tile", "int_division");
  const int64_t n = 300;
  HostTensor a = Random(DType::kI32, {n}, -50, 50);
  HostTensor b = Random(DType::kI32, {n}, -4, 4);  // about one in nine 0
  a.Set(0, std::numeric_limits<int32_t>::min());
  b.Set(0, -1);  // wraps: the quotient is INT32_MIN, the remainder 0
  b.Set(1, 0);
  HostTensor q(DType::kI32, {n}), r(DType::kI32, {n}), c(DType::kI32, {n});
  ASSERT_TRUE(Launch().In(a).In(b).Out(q).Out(r).Out(c).Run(*kernel));
  const Values av = a.Values(), bv = b.Values();
  Values eq(n), er(n), ec(n);
  int64_t zeros = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t x = static_cast<int64_t>(av[i]);
    const int64_t y = static_cast<int64_t>(bv[i]);
    if (y == 0) {
      ++zeros;
      eq[i] = 0;
      er[i] = x;
      ec[i] = 0;
      continue;
    }
    const int64_t fq =
        x / y - ((x % y != 0 && (x < 0) != (y < 0)) ? 1 : 0);  // floor
    eq[i] = static_cast<int32_t>(fq);  // INT32_MIN / -1 wraps
    er[i] = static_cast<int32_t>(x - fq * y);
    // The exact quotient rounded up, whatever the divisor's sign.
    ec[i] = static_cast<int32_t>(x / y +
                                 ((x % y != 0 && (x < 0) == (y < 0)) ? 1 : 0));
  }
  ASSERT_GT(zeros, 0);
  EXPECT_TRUE(AllClose(q, eq, Exact()));
  EXPECT_TRUE(AllClose(r, er, Exact()));
  EXPECT_TRUE(AllClose(c, ec, Exact()));
}

}  // namespace
}  // namespace kiln::e2e
