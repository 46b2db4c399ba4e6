// The launch-metadata reader (runtime/kernel_metadata.h): the documented
// example parses, and every malformed document is an error naming its line.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/kernel_metadata.h"

namespace kiln::runtime {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The example of compiler/docs/kernel-handle.md.
constexpr char kExample[] = R"(kiln-kernel 1
name gemm
target cpu
entry kiln_gemm
symbols M N K
param A tensor f16 M K
param alpha scalar f32
strides A K 1
grid (ceildiv N 128) (ceildiv M 128) 1
block 128 1 1
cluster 1 1 1
shared-bytes 0
assume (== (% K 64) 0) K % 64 == 0
)";

// A complete document with one record replaced (or appended when `record`
// is new).
std::string With(const std::string& find, const std::string& replace) {
  std::string text = kExample;
  size_t at = text.find(find);
  if (at == std::string::npos) return text + replace + "\n";
  text.replace(at, find.size(), replace);
  return text;
}

std::string ErrorOf(const std::string& text) {
  absl::StatusOr<KernelMetadata> md = ParseKernelMetadata(text);
  EXPECT_FALSE(md.ok()) << text;
  EXPECT_EQ(md.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(md.status().message());
}

TEST(CpuKernelMetadataTest, ParsesTheDocumentedExample) {
  // The example's symbols N is bound by no tensor dim: give B one.
  absl::StatusOr<KernelMetadata> md = ParseKernelMetadata(
      With("param alpha", "param B tensor bf16 K N\nparam alpha"));
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_EQ(md->name, "gemm");
  EXPECT_EQ(md->target, "cpu");
  EXPECT_EQ(md->entry, "kiln_gemm");
  EXPECT_THAT(md->symbols, ElementsAre("M", "N", "K"));
  ASSERT_EQ(md->params.size(), 3u);
  EXPECT_EQ(md->params[1].dtype, DType::kBF16);
  EXPECT_EQ(md->params[2].name, "alpha");
  EXPECT_FALSE(md->params[2].is_tensor);
  ASSERT_EQ(md->params[0].strides.size(), 2u);
  EXPECT_EQ(md->params[0].strides[0].text(), "K");
  EXPECT_EQ(*md->grid[0].Evaluate({{"N", 300}, {"M", 1}}), 3);
  EXPECT_EQ(md->block[0].AsConstant(), 128);
  EXPECT_EQ(md->shared_bytes, 0);
  ASSERT_EQ(md->assumptions.size(), 1u);
  EXPECT_EQ(md->assumptions[0].text, "K % 64 == 0");
}

TEST(CpuKernelMetadataTest, CommentsBlankLinesAndOptionalRecords) {
  std::string text =
      "# written by a test\n\nkiln-kernel 1\nname k\ntarget cpu\n"
      "entry e\nsymbols\n# no params\ngrid 1 1 1\nblock 1 1 1\n";
  absl::StatusOr<KernelMetadata> md = ParseKernelMetadata(text);
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_TRUE(md->symbols.empty());
  EXPECT_EQ(md->cluster[0].AsConstant(), 1);
  EXPECT_EQ(md->shared_bytes, 0);
}

TEST(CpuKernelMetadataTest, ErrorsNameTheLine) {
  EXPECT_EQ(ErrorOf(""), "empty metadata: no 'kiln-kernel 1'");
  EXPECT_EQ(ErrorOf("name k\n"),
            "line 1: expected 'kiln-kernel 1' as the first record");
  EXPECT_THAT(ErrorOf(With("kiln-kernel 1", "kiln-kernel 2")),
              HasSubstr("line 1: metadata version 2 is not supported"));
  EXPECT_THAT(ErrorOf(With("shared-bytes 0", "warp-size 32")),
              HasSubstr("line 12: unknown record 'warp-size'"));
  EXPECT_THAT(ErrorOf(With("name gemm", "name gemm\nname again")),
              HasSubstr("line 3: duplicate 'name' record"));
  EXPECT_THAT(ErrorOf(With("param A tensor f16", "param A tensor f17")),
              HasSubstr("line 6: unknown dtype 'f17'"));
  EXPECT_THAT(ErrorOf(With("param A tensor", "param A matrix")),
              HasSubstr("line 6: parameter kind must be"));
  EXPECT_THAT(ErrorOf(With("param alpha scalar f32", "param A scalar f32")),
              HasSubstr("line 7: duplicate parameter 'A'"));
  EXPECT_THAT(ErrorOf(With("strides A K 1", "strides A K")),
              HasSubstr("line 8: 'A' has 2 dims but 1 strides"));
  EXPECT_THAT(ErrorOf(With("strides A K 1", "strides Z 1")),
              HasSubstr("line 8: strides for unknown parameter 'Z'"));
  EXPECT_THAT(ErrorOf(With("strides A K 1", "strides alpha 1")),
              HasSubstr("line 8: strides for scalar parameter"));
  EXPECT_THAT(ErrorOf(With("grid (ceildiv N 128) (ceildiv M 128) 1",
                           "grid (ceildiv N 128) 1")),
              HasSubstr("line 9: 'grid' takes 3 expressions; found 2"));
  EXPECT_THAT(ErrorOf(With("(ceildiv N 128)", "(ceildiv N 128")),
              HasSubstr("line 9: unbalanced parentheses"));
  EXPECT_THAT(ErrorOf(With("(ceildiv N 128)", "(pow N 2)")),
              HasSubstr("line 9: expression '(pow N 2)'"));
  EXPECT_THAT(ErrorOf(With("shared-bytes 0", "shared-bytes -4")),
              HasSubstr("line 12: bad shared-bytes '-4'"));
  EXPECT_THAT(
      ErrorOf(With("param A tensor f16 M K", "param A tensor f16 M 1.5")),
      HasSubstr("line 6: dim '1.5' is neither"));
}

TEST(CpuKernelMetadataTest, WritesRecordMarksTensorParameters) {
  // The example with B (line 7) and `writes ...` after the strides (line 9).
  auto with_writes = [](const std::string& writes) {
    std::string text =
        With("param alpha", "param B tensor f16 K N\nparam alpha");
    const std::string strides = "strides A K 1\n";
    text.insert(text.find(strides) + strides.size(), writes + "\n");
    return text;
  };
  absl::StatusOr<KernelMetadata> md =
      ParseKernelMetadata(with_writes("writes B"));
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_FALSE(md->params[0].written);
  EXPECT_TRUE(md->params[1].written);
  EXPECT_FALSE(md->params[2].written);
  EXPECT_THAT(ErrorOf(with_writes("writes Q")),
              HasSubstr("line 10: 'writes' names unknown parameter 'Q'"));
  EXPECT_THAT(ErrorOf(with_writes("writes alpha")),
              HasSubstr("line 10: 'writes' names scalar parameter 'alpha'"));
  EXPECT_THAT(ErrorOf(with_writes("writes")),
              HasSubstr("line 10: 'writes' takes one or more parameters"));
  EXPECT_THAT(ErrorOf(with_writes("writes A\nwrites B")),
              HasSubstr("line 11: duplicate 'writes' record"));
  // Named before its parameter: unknown there.
  EXPECT_THAT(ErrorOf(With("param A tensor", "writes A\nparam A tensor")),
              HasSubstr("line 6: 'writes' names unknown parameter 'A'"));
}

TEST(CpuKernelMetadataTest, CrossRecordChecks) {
  EXPECT_THAT(ErrorOf(With("block 128 1 1\n", "")),
              HasSubstr("missing 'block' record"));
  EXPECT_THAT(ErrorOf(With("param A tensor f16 M K", "param A tensor f16 M Q")),
              HasSubstr("line 6: dim symbol 'Q' is not in the symbols record"));
  // The example's N is in `symbols` but no tensor dim binds it.
  EXPECT_THAT(ErrorOf(kExample),
              HasSubstr("symbol 'N' is not a dim of any tensor parameter"));
  const std::string with_b =
      With("param alpha", "param B tensor f16 K N\nparam alpha");
  EXPECT_THAT(ErrorOf(with_b + "assume (> alpha 0) alpha > 0\n"),
              HasSubstr("uses 'alpha', which is neither a dynamic symbol"));
  EXPECT_THAT(ErrorOf(with_b + "assume (> Z 0) Z > 0\n"), HasSubstr("'Z'"));
}

}  // namespace
}  // namespace kiln::runtime
