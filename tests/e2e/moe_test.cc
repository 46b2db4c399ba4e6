// The mixture-of-experts grouped GEMM (moe_gemm.tile, issue 26): the tile
// map built on the device against a model of it, and the bf16 and FP8
// grouped GEMMs against per-expert references, with skewed segments (empty
// experts, one-row experts, segments that end inside a tile), more experts
// than one chunk of the map kernel, ragged N and K, and map slots past the
// last tile.
#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/e2e/e2e_harness.h"
#include "tests/e2e/references.h"
#include "tests/e2e/tolerance.h"

namespace kiln::e2e {
namespace {

KILN_E2E_COVERS("moe_gemm.tile", "moe_tile_map");
KILN_E2E_COVERS("moe_gemm.tile", "moe_gemm");
KILN_E2E_COVERS("moe_gemm.tile", "moe_gemm_fp8");

// Offsets (E + 1 entries) of segments with the given row counts.
std::vector<double> OffsetsOf(const std::vector<int64_t>& counts) {
  std::vector<double> offsets{0};
  for (int64_t c : counts) offsets.push_back(offsets.back() + c);
  return offsets;
}

// The map the program documents: the BM-row tiles of every segment in
// order, then (E, M + j * BM) for the j-th slot past the last tile.
std::vector<double> TileMapModel(const std::vector<double>& offsets, int64_t bm,
                                 int64_t slots) {
  const int64_t experts = static_cast<int64_t>(offsets.size()) - 1;
  std::vector<double> map;
  for (int64_t e = 0; e < experts; ++e) {
    for (double r = offsets[e]; r < offsets[e + 1]; r += bm) {
      map.push_back(static_cast<double>(e));
      map.push_back(r);
    }
  }
  for (int64_t j = 0; static_cast<int64_t>(map.size()) < 2 * slots; ++j) {
    map.push_back(static_cast<double>(experts));
    map.push_back(offsets.back() + static_cast<double>(j * bm));
  }
  map.resize(2 * slots);
  return map;
}

int64_t TilesNeeded(const std::vector<int64_t>& counts, int64_t bm) {
  int64_t tiles = 0;
  for (int64_t c : counts) tiles += (c + bm - 1) / bm;
  return tiles;
}

// Y[r, j] = sum_k A[r, k] * W[e(r), j, k] * sa[r] * sw[e(r), j].
Values GroupedGemmReference(const Values& a, const Values& w,
                            const std::vector<double>& offsets, int64_t n,
                            int64_t k, const Values* sa = nullptr,
                            const Values* sw = nullptr) {
  const int64_t m = static_cast<int64_t>(offsets.back());
  Values y(m * n, 0.0);
  for (size_t e = 0; e + 1 < offsets.size(); ++e) {
    for (auto r = static_cast<int64_t>(offsets[e]); r < offsets[e + 1]; ++r) {
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0;
        for (int64_t q = 0; q < k; ++q) {
          acc += a[r * k + q] * w[(e * n + j) * k + q];
        }
        if (sa != nullptr) acc *= (*sa)[r] * (*sw)[e * n + j];
        y[r * n + j] = acc;
      }
    }
  }
  return y;
}

class MoeE2eTest : public E2eTest {
 protected:
  // The device map of `counts` cut into BM-row tiles, `extra` slots past
  // the last tile, checked against the model; returns it.
  HostTensor TileMap(const std::vector<int64_t>& counts, int64_t bm,
                     int64_t extra) {
    const std::vector<double> offsets = OffsetsOf(counts);
    const int64_t slots = TilesNeeded(counts, bm) + extra;
    HostTensor off(DType::kI32, {static_cast<int64_t>(offsets.size())});
    off.SetValues(offsets);
    HostTensor tiles(DType::kI32, {slots, 2});
    const runtime::CpuKernel* kernel =
        Kernel("moe_gemm.tile", "moe_tile_map", {{"BM", bm}});
    if (kernel == nullptr) return tiles;
    SCOPED_TRACE(DescribeKernel(kernel));
    EXPECT_TRUE(Launch().In(off).Out(tiles).Run(*kernel));
    EXPECT_TRUE(AllClose(tiles, TileMapModel(offsets, bm, slots), Exact()));
    return tiles;
  }
  // The FP8 GEMM with BM-row tiles.
  void Fp8Case(int64_t bm);
};

TEST_F(MoeE2eTest, TileMapCutsEverySegmentIntoTilesInOrder) {
  TileMap({130, 0, 1, 64, 7}, 64, 0);
  TileMap({130, 0, 1, 64, 7}, 128, 0);
  TileMap({0, 0, 0, 5}, 64, 0);
}

TEST_F(MoeE2eTest, TileMapSlotsPastTheLastTileStoreNothing) {
  TileMap({10, 70}, 64, 9);
  TileMap({0, 0}, 64, 3);  // no rows at all: every slot is past the end
}

TEST_F(MoeE2eTest, TileMapWalksMoreExpertsAndSlotsThanOneChunk) {
  std::vector<int64_t> counts;
  for (int64_t e = 0; e < 150; ++e)
    counts.push_back((e * 37) % 5 == 0 ? 0 : (e * 53) % 150);
  TileMap(counts, 64, 70);  // 150 experts (3 chunks of 64), > 64 slots
}

TEST_F(MoeE2eTest, GroupedGemmMultipliesEverySegmentByItsExpert) {
  KILN_E2E_LOAD(kernel, "moe_gemm.tile", "moe_gemm");
  const std::vector<int64_t> counts{130, 0, 1, 64, 7};
  const std::vector<double> offsets = OffsetsOf(counts);
  const int64_t experts = 5, m = 202, n = 100, k = 70;
  for (int64_t extra : {0, 4}) {
    SCOPED_TRACE(::testing::Message() << "extra slots " << extra);
    HostTensor tiles = TileMap(counts, 64, extra);
    HostTensor a = Random(DType::kBF16, {m, k}, -1, 1);
    HostTensor w = Random(DType::kBF16, {experts, n, k}, -1, 1);
    HostTensor off(DType::kI32, {experts + 1});
    off.SetValues(offsets);
    HostTensor y(DType::kBF16, {m, n});
    const Values ref =
        GroupedGemmReference(a.Values(), w.Values(), offsets, n, k);
    ASSERT_TRUE(Launch().In(a).In(w).In(off).In(tiles).Out(y).Run(*kernel));
    EXPECT_TRUE(AllClose(y, ref, OutputTolerance(DType::kBF16, k)));
  }
}

TEST_F(MoeE2eTest, Fp8GroupedGemmAppliesTokenAndChannelScales) {
  for (int64_t bm : {64, 128}) Fp8Case(bm);
}

void MoeE2eTest::Fp8Case(int64_t bm) {
  SCOPED_TRACE(::testing::Message() << "BM=" << bm);
  KILN_E2E_LOAD(kernel, "moe_gemm.tile", "moe_gemm_fp8", {{"BM", bm}});
  const std::vector<int64_t> counts{3, 200, 0, 40};
  const std::vector<double> offsets = OffsetsOf(counts);
  const int64_t experts = 4, m = 243, n = 136, k = 160;
  HostTensor tiles = TileMap(counts, bm, 2);
  HostTensor a = Random(DType::kF8E4M3, {m, k}, -4, 4);
  HostTensor w = Random(DType::kF8E4M3, {experts, n, k}, -4, 4);
  HostTensor sa = Random(DType::kF32, {m}, 0.01, 0.1);
  HostTensor sw = Random(DType::kF32, {experts, n}, 0.01, 0.1);
  HostTensor off(DType::kI32, {experts + 1});
  off.SetValues(offsets);
  HostTensor y(DType::kBF16, {m, n});
  const Values sav = sa.Values(), swv = sw.Values();
  const Values ref =
      GroupedGemmReference(a.Values(), w.Values(), offsets, n, k, &sav, &swv);
  ASSERT_TRUE(
      Launch().In(a).In(w).In(sa).In(sw).In(off).In(tiles).Out(y).Run(*kernel));
  EXPECT_TRUE(AllClose(y, ref, OutputTolerance(DType::kBF16, k)));
}

}  // namespace
}  // namespace kiln::e2e
