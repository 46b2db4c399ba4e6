#include "cache/compression.h"

#include <gtest/gtest.h>

#include "tests/cache/test_util.h"

namespace kiln::cache {
namespace {

using ::kiln::cache::testing::Bytes;

TEST(CompressionTest, CompressesWhatPaysAndRoundTrips) {
  for (size_t size : {size_t{1000}, size_t{300000}, size_t{2000000}}) {
    std::string text;
    while (text.size() < size) text += "ld.global.f32 %f1, [%rd4+16];\n";
    std::optional<std::string> packed = CompressIfSmaller(text, 1);
    ASSERT_TRUE(packed.has_value()) << size;
    EXPECT_LT(packed->size(), text.size() / 4);
    absl::StatusOr<std::string> back = Decompress(*packed, text.size());
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, text);
  }
}

TEST(CompressionTest, IncompressibleOrDisabledStaysRaw) {
  EXPECT_FALSE(CompressIfSmaller(Bytes(1, 5000), 3).has_value());
  EXPECT_FALSE(CompressIfSmaller(Bytes(2, 1 << 20), 3).has_value());
  EXPECT_FALSE(CompressIfSmaller(std::string(5000, 'a'), 0).has_value());
  EXPECT_FALSE(CompressIfSmaller("tiny", 3).has_value());
}

TEST(CompressionTest, DecompressChecksTheSizeBeforeAllocating) {
  std::string text(10000, 'x');
  std::string packed = *CompressIfSmaller(text, 1);
  EXPECT_TRUE(absl::IsDataLoss(Decompress(packed, 9999).status()));
  EXPECT_TRUE(absl::IsDataLoss(Decompress(packed, 1ull << 40).status()));
  EXPECT_TRUE(
      absl::IsDataLoss(Decompress(packed.substr(0, 8), 10000).status()));
  EXPECT_TRUE(absl::IsDataLoss(Decompress("garbage", 10).status()));
}

}  // namespace
}  // namespace kiln::cache
