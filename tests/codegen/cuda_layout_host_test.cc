// The CUDA device library's shared-memory layouts (kiln/shared_layout.cuh)
// compiled for the host: their index arithmetic is plain C++, so every
// (row, column) of a tile can be checked to land on its own element of the
// tile. The rest of the library (PTX asm) is not included: the scalar
// header's include guard is pre-defined and the one type it would give is
// declared here.
#include <cstddef>
#include <set>
#include <string>

#include "gtest/gtest.h"

#define __device__
#define __forceinline__ inline
#define KILN_DEVICE_SCALAR_CUH_
namespace kiln {
typedef unsigned u32;
}  // namespace kiln
inline size_t __cvta_generic_to_shared(const void* p) {
  return reinterpret_cast<size_t>(p);
}
#include "kiln/shared_layout.cuh"

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

}  // namespace
