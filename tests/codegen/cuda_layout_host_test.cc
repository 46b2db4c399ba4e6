// The CUDA device library's shared-memory layouts (kiln/shared_layout.cuh,
// and the wgmma operand and accumulator layouts of kiln/wgmma.cuh) compiled
// for the host: their index arithmetic is plain C++, so every
// (row, column) of a tile can be checked to land on its own element of the
// tile. The rest of the library (PTX asm) is not included: the scalar
// header's include guard is pre-defined and the one type it would give is
// declared here.
#include <cstddef>
#include <set>
#include <string>
#include <vector>

#include "gtest/gtest.h"

#define __device__
#define __forceinline__ inline
#define KILN_DEVICE_SCALAR_CUH_
namespace kiln {
typedef unsigned u32;
typedef unsigned short u16;
typedef unsigned long long u64;
}  // namespace kiln
inline size_t __cvta_generic_to_shared(const void* p) {
  return reinterpret_cast<size_t>(p);
}
// The thread index the accumulator layouts read: set by the tests.
struct {
  unsigned x = 0;
} threadIdx;
#include "kiln/shared_layout.cuh"
#include "kiln/wgmma.cuh"

namespace {

// Every element of a ROWS x COLS tile maps to a distinct offset inside the
// tile, and each 16-byte chunk stays in its own row.
template <int ROWS, int COLS, int ELEM_BYTES>
void ExpectBijectiveWithinRows() {
  using L = kiln::Swizzled<ROWS, COLS, ELEM_BYTES>;
  std::set<int> seen;
  for (int r = 0; r < ROWS; ++r) {
    for (int c = 0; c < COLS; ++c) {
      const int off = L::offset(r, c);
      ASSERT_GE(off, r * COLS) << "row " << r << " col " << c;
      ASSERT_LT(off, (r + 1) * COLS) << "row " << r << " col " << c;
      ASSERT_TRUE(seen.insert(off).second)
          << "row " << r << " col " << c << " collides at " << off;
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(ROWS * COLS));
}

TEST(CudaSwizzledLayoutTest, PowerOfTwoChunkCountsPermuteWithinTheRow) {
  ExpectBijectiveWithinRows<64, 64, 2>();   // 8 chunks per row
  ExpectBijectiveWithinRows<128, 32, 2>();  // 4
  ExpectBijectiveWithinRows<32, 128, 2>();  // 16
  ExpectBijectiveWithinRows<64, 16, 2>();   // 2
  ExpectBijectiveWithinRows<64, 128, 1>();  // 8 (fp8)
}

TEST(CudaSwizzledLayoutTest, OtherChunkCountsStayInsideTheRow) {
  // 6 and 12 chunks (f16 tiles 48 and 96 wide, as a head dim of 96 gives):
  // an xor by up to 7 would leave the row.
  ExpectBijectiveWithinRows<64, 48, 2>();
  ExpectBijectiveWithinRows<64, 96, 2>();
  ExpectBijectiveWithinRows<32, 40, 2>();  // 5 chunks
  ExpectBijectiveWithinRows<16, 80, 2>();  // 10
}

TEST(CudaSwizzledLayoutTest, EightConsecutiveRowsUseEightChunkPositions) {
  // What the swizzle is for: column chunk 0 of rows 0..7 falls in eight
  // different 16-byte bank groups when a row has at least 8 chunks.
  using L = kiln::Swizzled<64, 64, 2>;
  std::set<int> groups;
  for (int r = 0; r < 8; ++r) groups.insert((L::offset(r, 0) % 64) / 8);
  EXPECT_EQ(groups.size(), 8u);
}

// The wgmma operand layout against the hardware's swizzle modes, written
// the way the PTX ISA describes them: in the unswizzled byte address of an
// element, bits [4, 4 + b) (the 16-byte chunk) are XORed with bits
// [7, 7 + b), b = log2(span / 16), each panel being ROWS rows of `span`
// bytes stored one after another. Every element must also land inside the
// tile without collisions.
template <int ROWS, int COLS, int ELEM_BYTES>
void ExpectHardwareSwizzle(int span) {
  using L = kiln::WgmmaTile<ROWS, COLS, ELEM_BYTES>;
  ASSERT_EQ(L::kSpan, span);
  const int per_row = span / ELEM_BYTES;
  const int bits = span == 128 ? 3 : span == 64 ? 2 : 1;
  std::set<int> seen;
  for (int r = 0; r < ROWS; ++r) {
    for (int c = 0; c < COLS; ++c) {
      const int plain =
          (c / per_row) * ROWS * span + r * span + (c % per_row) * ELEM_BYTES;
      const int swizzled = plain ^ (((plain >> 7) & ((1 << bits) - 1)) << 4);
      ASSERT_EQ(L::offset(r, c) * ELEM_BYTES, swizzled)
          << "row " << r << " col " << c;
      ASSERT_TRUE(seen.insert(L::offset(r, c)).second);
      ASSERT_LT(L::offset(r, c), ROWS * COLS);
    }
  }
}

TEST(WgmmaTileLayoutTest, MatchesTheHardwareSwizzleModes) {
  ExpectHardwareSwizzle<128, 64, 2>(128);  // f16 K tile of 64: one panel
  ExpectHardwareSwizzle<64, 256, 2>(128);  // four 64-column panels
  ExpectHardwareSwizzle<64, 32, 2>(64);    // BK = 32: 64-byte swizzle
  ExpectHardwareSwizzle<32, 96, 2>(64);    // 192-byte rows: three panels
  ExpectHardwareSwizzle<64, 16, 2>(32);    // 32-byte swizzle
  ExpectHardwareSwizzle<64, 128, 1>(128);  // fp8
}

TEST(WgmmaTileLayoutTest, DescriptorsEncodeStartStridesAndMode) {
  using A = kiln::WgmmaTile<128, 64, 2>;  // K-major A, 128-byte swizzle
  alignas(1024) static unsigned char smem[64 * 1024];
  const unsigned base =
      static_cast<unsigned>(__cvta_generic_to_shared(smem) & 0x3FFFF);
  auto field = [](unsigned long long d, int lo, int bits) {
    return static_cast<unsigned>((d >> lo) & ((1ull << bits) - 1));
  };
  // Rows 64.. of the tile, K step 16..31: 64 rows of 128 bytes, then 32
  // bytes into the swizzled row (the hardware applies the XOR).
  unsigned long long d = A::desc_k_major(smem, 64, 16);
  EXPECT_EQ(field(d, 0, 14), ((base + 64 * 128 + 32) & 0x3FFFF) >> 4);
  EXPECT_EQ(field(d, 32, 14), 1024u >> 4);  // 8 rows of one panel
  EXPECT_EQ(field(d, 62, 2), 1u);           // 128-byte swizzle
  EXPECT_EQ(field(d, 49, 3), 0u);           // base offset
  // MN-major B [K = 64, N = 256]: four panels of 64 x 128 bytes (the
  // leading offset), K step 32 = 32 rows down.
  using B = kiln::WgmmaTile<64, 256, 2>;
  d = B::desc_mn_major(smem, 0, 32);
  EXPECT_EQ(field(d, 0, 14), ((base + 32 * 128) & 0x3FFFF) >> 4);
  EXPECT_EQ(field(d, 16, 14), (64u * 128) >> 4);
  EXPECT_EQ(field(d, 32, 14), 1024u >> 4);
  // The second 64 columns of an MN-major A [K, M] are the next panel.
  d = B::desc_mn_major(smem, 64, 0);
  EXPECT_EQ(field(d, 0, 14), ((base + 64 * 128) & 0x3FFFF) >> 4);
  // 64-byte swizzle: 8 rows of 64 bytes per stride, mode 2.
  using C = kiln::WgmmaTile<64, 32, 2>;
  d = C::desc_k_major(smem, 0, 16);
  EXPECT_EQ(field(d, 0, 14), ((base + 32) & 0x3FFFF) >> 4);
  EXPECT_EQ(field(d, 32, 14), 512u >> 4);
  EXPECT_EQ(field(d, 62, 2), 2u);
}

// The wgmma accumulator layout covers every element of the tile once over
// the block's WGS_M x WGS_N warpgroups, row_reg names the WgRowLayout
// register holding the same row, and every row is held by each of its
// column slices but stored (lane 0 of its row group, first_slice) once.
template <int M, int N, int WGS_M, int WGS_N = 1>
void ExpectAccumulatorCovers() {
  using L = kiln::WgAccLayout<M, N, WGS_M, WGS_N>;
  using R = kiln::WgRowLayout<M, WGS_M, WGS_N>;
  std::set<std::pair<int, int>> seen;
  std::vector<int> holders(M, 0), storers(M, 0);
  for (unsigned t = 0; t < 128u * WGS_M * WGS_N; ++t) {
    threadIdx.x = t;
    for (int q = 0; q < L::kRegs; ++q) {
      const int r = L::row(q), c = L::col(q);
      ASSERT_TRUE(r >= 0 && r < M && c >= 0 && c < N) << t << " " << q;
      ASSERT_TRUE(seen.insert({r, c}).second) << "thread " << t << " reg " << q;
      ASSERT_EQ(R::row(L::row_reg(q)), r) << "thread " << t << " reg " << q;
    }
    for (int q = 0; q < R::kRegs; ++q) {
      const int r = R::row(q);
      ASSERT_TRUE(r >= 0 && r < M) << t << " " << q;
      ++holders[r];
      if (t % 4 == 0 && R::first_slice()) ++storers[r];
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(M * N));
  for (int r = 0; r < M; ++r) {
    EXPECT_EQ(holders[r], 4 * WGS_N) << "row " << r;  // 4 lanes per slice
    EXPECT_EQ(storers[r], 1) << "row " << r;
  }
  threadIdx.x = 0;
}

TEST(WgmmaAccumulatorLayoutTest, CoversTheTileOncePerElement) {
  ExpectAccumulatorCovers<64, 64, 1>();
  ExpectAccumulatorCovers<128, 128, 1>();
  ExpectAccumulatorCovers<128, 256, 2>();
  ExpectAccumulatorCovers<256, 8, 2>();
}

TEST(WgmmaAccumulatorLayoutTest, ColumnSlicesCoverTheTileAndCopyTheRows) {
  ExpectAccumulatorCovers<64, 512, 1, 2>();  // MLA's output
  ExpectAccumulatorCovers<64, 64, 1, 2>();
  ExpectAccumulatorCovers<128, 256, 2, 2>();
  ExpectAccumulatorCovers<64, 96, 1, 4>();
}

TEST(WgmmaAccumulatorLayoutTest, OneInstructionsRegistersAreContiguous) {
  // Registers [mi * N / 2, (mi + 1) * N / 2) are the m64nN instruction for
  // rows mi * 64 .. mi * 64 + 63: warp w holds rows 16 w + (0..15) of it,
  // lane l rows l / 4 and l / 4 + 8 (the PTX accumulator fragment).
  using L = kiln::WgAccLayout<128, 32, 1>;
  threadIdx.x = 32 * 2 + 5;  // warp 2, lane 5
  for (int q = 0; q < L::kRegs; ++q) {
    const int mi = q / 16, j = q % 16;
    EXPECT_EQ(L::row(q), mi * 64 + 2 * 16 + 5 / 4 + ((j % 4) / 2) * 8);
    EXPECT_EQ(L::col(q), (j / 4) * 8 + (5 % 4) * 2 + j % 2);
  }
  threadIdx.x = 0;
}

}  // namespace
