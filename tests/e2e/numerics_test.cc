// Numerics the manual defines (numerics.tile, tile-ir.md §3): NaN wins in
// max, min and the max/min/absmax reductions, as in torch and NumPy (issue
// 22's probe rows: a NaN first, last, alone, beside infinities); isnan and
// isinf; integer division, modulo and ceildiv by zero; the atomic tensor
// stores `max=` and `min=`; the bit casts `bits` and `from_bits_DTYPE`; the
// roundings floor, ceil, round and trunc.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
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
KILN_E2E_COVERS("numerics.tile", "col_extrema");
KILN_E2E_COVERS("numerics.tile", "bit_patterns");
KILN_E2E_COVERS("numerics.tile", "roundings");
KILN_E2E_COVERS("numerics.tile", "shared_histogram");

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

// `max=` / `min=` into tensors from every block (each output element gets
// 8 rows per block from 12 blocks at once): the column extrema, merged with
// what the outputs held, a NaN winning; i32 by the native atomics, f32 and
// f64 by compare-and-swap loops, f16 on its 32-bit word beside a neighbour
// that other threads update at the same time.
TEST_F(NumericsE2eTest, AtomicMaxAndMinStoresMergeEveryBlocksValues) {
  KILN_E2E_LOAD(kernel, "numerics.tile", "col_extrema");
  const int64_t m = 93, n = 64;  // the last block holds 5 rows
  HostTensor x = Random(DType::kF32, {m, n}, -3, 3);
  x.Set(40 * n + 7, kNan);   // column 7: NaN in the middle
  x.Set(92 * n + 8, kNan);   // column 8: NaN in the ragged last block
  x.Set(3 * n + 9, kInf);    // column 9: +inf wins max, not min
  x.Set(5 * n + 10, -kInf);  // column 10: -inf wins min
  HostTensor col_max = Random(DType::kF32, {n}, -1, 1);
  HostTensor col_min = Random(DType::kF32, {n}, -1, 1);
  HostTensor half_max = Random(DType::kF16, {n}, -1, 1);
  HostTensor wide_min = Random(DType::kF64, {n}, -1, 1);
  HostTensor int_max = Random(DType::kI32, {n}, -2000, 2000);
  HostTensor int_min = Random(DType::kI32, {n}, -2000, 2000);
  const Values xv = x.Values();
  Values emax = col_max.Values(), emin = col_min.Values(),
         ehalf = half_max.Values(), ewide = wide_min.Values(),
         eimax = int_max.Values(), eimin = int_min.Values();
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const double v = xv[i * n + j];
      const float f = static_cast<float>(v);
      emax[j] = NanMax(emax[j], v);
      emin[j] = NanMin(emin[j], v);
      ehalf[j] = NanMax(ehalf[j], v);
      ewide[j] = NanMin(ewide[j], v);
      if (std::isfinite(f)) {
        const double scaled = std::trunc(static_cast<double>(f * 1000.0f));
        eimax[j] = std::max(eimax[j], scaled);
        eimin[j] = std::min(eimin[j], scaled);
      }
    }
  }
  // The infinities convert to the saturated i32 range; leave those columns
  // out of the integer check, and NaN (which converts to 0) too.
  for (int64_t j : {7, 8, 9, 10}) {
    eimax[j] = int_max.Get(j);
    eimin[j] = int_min.Get(j);
  }
  const HostTensor int_max_before = int_max, int_min_before = int_min;
  ASSERT_TRUE(Launch()
                  .In(x)
                  .InOut(col_max)
                  .InOut(col_min)
                  .InOut(half_max)
                  .InOut(wide_min)
                  .InOut(int_max)
                  .InOut(int_min)
                  .Run(*kernel));
  EXPECT_TRUE(std::isnan(col_max.Get(7)) && std::isnan(col_min.Get(8)));
  EXPECT_EQ(col_max.Get(9), kInf);
  EXPECT_EQ(col_min.Get(10), -kInf);
  // Every value is one of the inputs: exact, f16 rounded once.
  EXPECT_TRUE(AllClose(col_max, emax, Exact()));
  EXPECT_TRUE(AllClose(col_min, emin, Exact()));
  EXPECT_TRUE(AllClose(wide_min, ewide, Exact()));
  Values ehalf_rounded(n);
  for (int64_t j = 0; j < n; ++j) {
    HostTensor one(DType::kF16, {1});
    one.Set(0, ehalf[j]);
    ehalf_rounded[j] = one.Get(0);
  }
  EXPECT_TRUE(AllClose(half_max, ehalf_rounded, Exact()));
  Values got_max = int_max.Values(), got_min = int_min.Values();
  for (int64_t j : {7, 8, 9, 10}) {
    got_max[j] = int_max_before.Get(j);
    got_min[j] = int_min_before.Get(j);
  }
  EXPECT_EQ(got_max, eimax);
  EXPECT_EQ(got_min, eimin);
}

// `bits` and `from_bits_*` against the host's own view of the same bytes:
// every pattern of X, H and D (infinities, NaN, both zeros, subnormals
// included; no NaN in H, whose payload the manual leaves open) and the
// values with the sign flipped through the patterns.
TEST_F(NumericsE2eTest, BitCastsReadTheStoredPatterns) {
  KILN_E2E_LOAD(kernel, "numerics.tile", "bit_patterns");
  const int64_t n = 300;
  HostTensor x = Random(DType::kF32, {n}, -1e6, 1e6);
  HostTensor h = Random(DType::kF16, {n}, -100, 100);
  HostTensor d = Random(DType::kF64, {n}, -1e12, 1e12);
  const double specials[] = {0.0, -0.0, kInf, -kInf, kNan, 1e-40, 6e-8, 1.0};
  for (int64_t k = 0; k < 8; ++k) {
    x.Set(k, specials[k]);
    h.Set(k, k == 4 ? 65504.0 : specials[k]);  // (no NaN: see tile-ir.md)
    d.Set(k, k == 5 ? 4e-320 : specials[k]);
  }
  HostTensor xb(DType::kU32, {n}), hb(DType::kU32, {n}), db(DType::kI64, {n}),
      xn(DType::kF32, {n}), hn(DType::kF16, {n}), dn(DType::kF64, {n});
  ASSERT_TRUE(Launch()
                  .In(x)
                  .In(h)
                  .In(d)
                  .Out(xb)
                  .Out(hb)
                  .Out(db)
                  .Out(xn)
                  .Out(hn)
                  .Out(dn)
                  .Run(*kernel));
  auto word = [](HostTensor& t, int64_t i, size_t bytes) {
    uint64_t v = 0;
    std::memcpy(&v, static_cast<unsigned char*>(t.data()) + i * bytes, bytes);
    return v;
  };
  for (int64_t i = 0; i < n; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(word(xb, i, 4), word(x, i, 4));
    EXPECT_EQ(word(hb, i, 4), word(h, i, 2));
    EXPECT_EQ(word(db, i, 8), word(d, i, 8));
    EXPECT_EQ(word(xn, i, 4), word(x, i, 4) ^ 0x80000000u);
    EXPECT_EQ(word(hn, i, 2), word(h, i, 2) ^ 0x8000u);
    EXPECT_EQ(word(dn, i, 8), word(d, i, 8) ^ (uint64_t{1} << 63));
  }
}

// floor / ceil / round (ties to even) / trunc against the C library, over
// halves (where round's ties show), negatives, NaN and infinities.
TEST_F(NumericsE2eTest, RoundingsMatchTheCLibrary) {
  KILN_E2E_LOAD(kernel, "numerics.tile", "roundings");
  const int64_t n = 300;
  HostTensor x = Random(DType::kF32, {n}, -50, 50);
  HostTensor h = Random(DType::kF16, {n}, -50, 50);
  const double specials[] = {0.5,  1.5,   2.5,  -0.5,      -2.5,  -0.0,
                             kInf, -kInf, kNan, 1e9 + 0.5, -3.75, 8388609.0};
  for (int64_t k = 0; k < 12; ++k) {
    x.Set(k, specials[k]);
    h.Set(k, k == 9 ? 1000.5 : k == 11 ? 2049.0 : specials[k]);
  }
  HostTensor fl(DType::kF32, {n}), ce(DType::kF32, {n}), ro(DType::kF32, {n}),
      tr(DType::kF32, {n}), hr(DType::kF16, {n});
  ASSERT_TRUE(Launch().In(x).In(h).Out(fl).Out(ce).Out(ro).Out(tr).Out(hr).Run(
      *kernel));
  const Values xv = x.Values(), hv = h.Values();
  Values efl(n), ece(n), ero(n), etr(n), ehr(n);
  for (int64_t i = 0; i < n; ++i) {
    efl[i] = std::floor(xv[i]);
    ece[i] = std::ceil(xv[i]);
    ero[i] = std::nearbyint(xv[i]);  // the default mode: ties to even
    etr[i] = std::trunc(xv[i]);
    ehr[i] = std::nearbyint(hv[i]);
  }
  EXPECT_TRUE(AllClose(fl, efl, Exact()));
  EXPECT_TRUE(AllClose(ce, ece, Exact()));
  EXPECT_TRUE(AllClose(ro, ero, Exact()));
  EXPECT_TRUE(AllClose(tr, etr, Exact()));
  EXPECT_TRUE(AllClose(hr, ehr, Exact()));
  EXPECT_EQ(ro.Get(0), 0.0);
  EXPECT_EQ(ro.Get(2), 2.0);
  EXPECT_EQ(ro.Get(4), -2.0);
  EXPECT_TRUE(std::signbit(ro.Get(3)));  // round(-0.5) is -0.0
}

// `+=`, `max=` and `min=` into a shared tile at an element read from memory
// (guard-accesses marks them atomic for GPU targets): every key counts, in
// i32 and, offset by one bin, in i16 and, by five, in an i32 fragment; the
// bins' largest f32 and smallest f16 value. Half the keys fall into one bin,
// the rest spread (negative keys too: `%` is floor modulo); the last block is
// ragged.
TEST_F(NumericsE2eTest, SharedTileUpdatesAtKeysReadFromMemoryCountEveryKey) {
  KILN_E2E_LOAD(kernel, "numerics.tile", "shared_histogram");
  const int64_t n = 700, bins = 16;
  HostTensor keys = Random(DType::kI32, {n}, -40, 40);
  for (int64_t i = 0; i < n; i += 2) keys.Set(i, 3 + 16 * (i % 5));
  HostTensor vals = Random(DType::kF32, {n}, -3, 3);
  HostTensor count = Random(DType::kI32, {bins}, 0, 10);
  HostTensor pairs = Random(DType::kI16, {bins}, 0, 10);
  HostTensor top = Random(DType::kF32, {bins}, -1, 1);
  HostTensor low = Random(DType::kF16, {bins}, -1, 1);
  HostTensor hits = Random(DType::kI32, {bins}, 0, 10);
  Values ecount = count.Values(), epairs = pairs.Values(), etop = top.Values(),
         elow = low.Values(), ehits = hits.Values();
  const Values kv = keys.Values(), vv = vals.Values();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t k = ((static_cast<int64_t>(kv[i]) % bins) + bins) % bins;
    ecount[k] += 1;
    epairs[(k + 1) % bins] += 2;
    ehits[(k + 5) % bins] += 1;
    etop[k] = std::max(etop[k], vv[i]);
    HostTensor one(DType::kF16, {1});
    one.Set(0, vv[i]);
    elow[k] = std::min(elow[k], one.Get(0));
  }
  ASSERT_TRUE(Launch()
                  .In(keys)
                  .In(vals)
                  .InOut(count)
                  .InOut(pairs)
                  .InOut(top)
                  .InOut(low)
                  .InOut(hits)
                  .Run(*kernel));
  EXPECT_EQ(count.Values(), ecount);
  EXPECT_EQ(hits.Values(), ehits);
  EXPECT_EQ(pairs.Values(), epairs);
  EXPECT_EQ(top.Values(), etop);
  EXPECT_EQ(low.Values(), elow);
  EXPECT_GE(ecount[3], n / 2);  // (the crowded bin)
}
}  // namespace
}  // namespace kiln::e2e
