// Regions with run-time extents and starts, and tile element loads at
// data-dependent indices (runtime_extents.tile; issue 22's findings): a
// tile region is clipped to its tile whatever the run-time values are (a
// copy of 70 elements into a 64-element tile moves 64, a negative extent
// moves nothing), a tile element load outside the tile reads zero, and no
// launch writes outside its tensors (the harness checks their guards).
#include <algorithm>
#include <cstdint>
#include <vector>

#include "gtest/gtest.h"
#include "tests/e2e/e2e_harness.h"
#include "tests/e2e/references.h"
#include "tests/e2e/tolerance.h"

namespace kiln::e2e {
namespace {

using runtime::ArgValue;

KILN_E2E_COVERS("runtime_extents.tile", "prefix_roundtrip");
KILN_E2E_COVERS("runtime_extents.tile", "prefix_accumulate");
KILN_E2E_COVERS("runtime_extents.tile", "segment_gemm");
KILN_E2E_COVERS("runtime_extents.tile", "table_lookup");

constexpr int64_t kTile = 64;

class RuntimeExtentsE2eTest : public E2eTest {
 protected:
  // prefix_roundtrip: the program's steps on a model of its 64-element
  // tile, per row. Elements of a row past the tile are never written.
  void RoundTrip(int64_t rows, int64_t len, int32_t n) {
    SCOPED_TRACE(::testing::Message() << "S=" << len << " n=" << n);
    KILN_E2E_LOAD(kernel, "runtime_extents.tile", "prefix_roundtrip");
    HostTensor x = Random(DType::kF32, {rows, len}, -1, 1);
    HostTensor y = Random(DType::kF32, {rows, len}, 10, 11);
    Values ref = y.Values();
    const Values xv = x.Values();
    for (int64_t b = 0; b < rows; ++b) {
      std::vector<double> t(kTile, -1.0);
      for (int64_t i = 0; i < std::min<int64_t>(n, kTile); ++i) {
        t[i] = i < len ? xv[b * len + i] : 0.0;  // zero past the row's end
      }
      for (int64_t i = n; i < n + 4; ++i) {
        if (i >= 0 && i < kTile) t[i] = 7.0;
      }
      for (int64_t i = 0; i < std::min<int64_t>(n + 4, kTile); ++i) {
        if (i < len) ref[b * len + i] = t[i];
      }
    }
    ASSERT_TRUE(Launch().In(x).InOut(y).Scalar(ArgValue::I32(n)).Run(*kernel));
    EXPECT_TRUE(AllClose(y, ref, Exact()));
  }
};

TEST_F(RuntimeExtentsE2eTest, CopyExtentLargerThanTheTileMovesTheTile) {
  RoundTrip(3, 100, 70);  // 70 > 64: read and written past the tile before
  RoundTrip(3, 100, 1000);
}

TEST_F(RuntimeExtentsE2eTest, CopyExtentsInsideAndAtTheTileEnd) {
  RoundTrip(3, 100, 5);
  RoundTrip(3, 100, 61);  // the fill's 4 elements straddle the tile's end
  RoundTrip(2, 64, 64);
  RoundTrip(2, 50, 64);  // rows shorter than the tile
}

TEST_F(RuntimeExtentsE2eTest, NegativeAndZeroExtentsMoveNothing) {
  RoundTrip(2, 100, 0);
  RoundTrip(2, 100, -3);  // only the fill's last element, t[0], is inside
  RoundTrip(2, 100, -1000);
}

TEST_F(RuntimeExtentsE2eTest, AtomicAddExtentIsClippedToTheTileAndTensor) {
  KILN_E2E_LOAD(kernel, "runtime_extents.tile", "prefix_accumulate");
  const int64_t n_elems = 300;
  for (int32_t n : {20, 64, 100, -5}) {
    SCOPED_TRACE(::testing::Message() << "n=" << n);
    HostTensor x = Random(DType::kF32, {n_elems}, -1, 1);
    HostTensor acc = Random(DType::kF32, {kTile}, -1, 1);
    Values ref = acc.Values();
    const Values xv = x.Values();
    for (int64_t i = 0; i < std::min<int64_t>(n, kTile); ++i) {
      for (int64_t b = 0; b * kTile < n_elems; ++b) {
        if (b * kTile + i < n_elems) ref[i] += xv[b * kTile + i];
      }
    }
    ASSERT_TRUE(
        Launch().In(x).InOut(acc).Scalar(ArgValue::I32(n)).Run(*kernel));
    EXPECT_TRUE(AllClose(acc, ref, OutputTolerance(DType::kF32, 5)));
  }
}

// Each segment stores min(Counts[g], 64) rows (none when negative); the
// other rows of Y keep their values.
TEST_F(RuntimeExtentsE2eTest, SegmentGemmStoresOnlyEachSegmentsRows) {
  KILN_E2E_LOAD(kernel, "runtime_extents.tile", "segment_gemm");
  const int64_t g = 5, m = g * kTile, k = 70, n = 100;
  HostTensor a = Random(DType::kF16, {m, k}, -1, 1);
  HostTensor b = Random(DType::kF16, {k, n}, -1, 1);
  HostTensor counts(DType::kI32, {g});
  counts.SetValues({17, 0, 64, 100, -5});
  HostTensor y = Random(DType::kF16, {m, n}, 5, 6);
  Values ref = y.Values();
  const Values full = GemmReference(a.Values(), b.Values(), m, n, k);
  const Values cv = counts.Values();
  for (int64_t s = 0; s < g; ++s) {
    const int64_t rows = std::clamp<int64_t>(cv[s], 0, kTile);
    for (int64_t r = s * kTile; r < s * kTile + rows; ++r) {
      for (int64_t c = 0; c < n; ++c) ref[r * n + c] = full[r * n + c];
    }
  }
  ASSERT_TRUE(Launch().In(a).In(b).In(counts).InOut(y).Run(*kernel));
  EXPECT_TRUE(AllClose(y, ref, OutputTolerance(DType::kF16, k)));
}

TEST_F(RuntimeExtentsE2eTest, TileLoadOutsideTheTileReadsZero) {
  KILN_E2E_LOAD(kernel, "runtime_extents.tile", "table_lookup");
  const int64_t n = 300;
  HostTensor table = Random(DType::kF32, {kTile}, -1, 1);
  HostTensor idx = Random(DType::kI32, {n}, -100, 200);
  HostTensor out(DType::kF32, {n});
  Values ref(n);
  const Values tv = table.Values(), iv = idx.Values();
  for (int64_t i = 0; i < n; ++i) {
    const int64_t at = static_cast<int64_t>(iv[i]);
    ref[i] = at >= 0 && at < kTile ? tv[at] : 0.0;
  }
  ASSERT_TRUE(Launch().In(table).In(idx).Out(out).Run(*kernel));
  EXPECT_TRUE(AllClose(out, ref, Exact()));
}

}  // namespace
}  // namespace kiln::e2e
