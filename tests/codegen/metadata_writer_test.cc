// The metadata writer (compiler/codegen/metadata_writer.h) and its round
// trip through the runtime's reader (runtime/kernel_metadata.h).
#include "compiler/codegen/metadata_writer.h"

#include <string>
#include <vector>

#include "compiler/ir/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/kernel_metadata.h"
#include "tests/codegen/cpu_test_util.h"

namespace kiln {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The expression `text` as parsed inside an assumption.
compiler::Expr ParseExpr(const std::string& text) {
  const std::string program = "kernel k(A: f32[M, N, K], s: f32)\n  assume " +
                              text + "\n  grid(1) threads(1) (bx) {\n}\n";
  compiler::ParseResult r = compiler::Parse(program);
  EXPECT_TRUE(r.ok()) << text;
  if (!r.ok() || r.program.kernels[0].assumptions.empty()) {
    return compiler::Expr::Int(0);
  }
  return r.program.kernels[0].assumptions[0];
}

TEST(MetadataWriterTest, ToSExprWritesIntegerExpressionsInPrefixForm) {
  struct Case {
    const char* ir;
    const char* sexpr;
  };
  const Case cases[] = {
      {"ceildiv(N, 128)", "(ceildiv N 128)"},
      {"K % 64 == 0", "(== (% K 64) 0)"},
      {"-M + 3 * N / 2", "(+ (neg M) (/ (* 3 N) 2))"},
      {"M >= 1 && !(N < 2) || K != 0",
       "(|| (&& (>= M 1) (! (< N 2))) (!= K 0))"},
      {"min(M, max(N, 4))", "(min M (max N 4))"},
      {"abs(M - N)", "(max (- M N) (neg (- M N)))"},
      {"true", "1"},
      {"M <= 0x10", "(<= M 16)"},
      {"(K & 63) == 0", "(== (% K 64) 0)"},
      {"(7 & K) == 1", "(== (% K 8) 1)"},
      {"M << 3 > N >> 1", "(> (* M 8) (/ N 2))"},
  };
  for (const Case& c : cases) {
    std::optional<std::string> s = compiler::ToSExpr(ParseExpr(c.ir));
    ASSERT_TRUE(s.has_value()) << c.ir;
    EXPECT_EQ(*s, c.sexpr) << c.ir;
  }
  EXPECT_EQ(compiler::ToSExpr(compiler::Expr::Int(-5)), "-5");
}

TEST(MetadataWriterTest, ToSExprRejectsWhatTheFormatCannotSay) {
  for (const char* ir :
       {"M * 1.5 > 2.0", "M << N == 2", "(M & 6) == 0", "(M ^ 1) > 0",
        "(M | 1) > 0", "M << 63 > 0", "A[0, 0, 0] > 0.0",
        "select(M > 1, N, K) > 0", "i32(M) > 0", "exp(s) > 1.0"}) {
    EXPECT_FALSE(compiler::ToSExpr(ParseExpr(ir)).has_value()) << ir;
  }
}

TEST(MetadataWriterTest, DynamicSymbolsInFirstAppearanceOrder) {
  auto k = testing::ParseKernel(R"(
kernel k(A: f16[M, 64, K], s: i32, B: f16[K, N], C: f32[N, M])
  grid(1) threads(1) (bx) {
}
)");
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_THAT(compiler::DynamicSymbols(*k), ElementsAre("M", "K", "N"));
}

constexpr char kGemm[] = R"(
kernel gemm(A: f16[M, K] strides [K, 1], B: f16[K, 128], C: f32[M, 128],
            alpha: f32, splits: i32)
  assume K % 64 == 0, splits >= 1
  grid(ceildiv(128, 64), ceildiv(M, 128), splits) threads(128)
  cluster(2, 1, 1) (bx, by, bz) {
}
)";

TEST(MetadataWriterTest, WritesTheDocumentedFormat) {
  auto k = testing::ParseKernel(kGemm);
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<std::string> md =
      compiler::WriteKernelMetadata(*k, {"cpu", "kiln_gemm", 0});
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_EQ(*md,
            "kiln-kernel 1\n"
            "name gemm\n"
            "target cpu\n"
            "entry kiln_gemm\n"
            "symbols M K\n"
            "param A tensor f16 M K\n"
            "param B tensor f16 K 128\n"
            "param C tensor f32 M 128\n"
            "param alpha scalar f32\n"
            "param splits scalar i32\n"
            "strides A K 1\n"
            "grid (ceildiv 128 64) (ceildiv M 128) splits\n"
            "block 128 1 1\n"
            "cluster 2 1 1\n"
            "shared-bytes 0\n"
            "assume (== (% K 64) 0) K % 64 == 0\n"
            "assume (>= splits 1) splits >= 1\n");
}

TEST(MetadataWriterTest, RoundTripsThroughTheRuntimeReader) {
  auto k = testing::ParseKernel(kGemm);
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<std::string> text =
      compiler::WriteKernelMetadata(*k, {"sm_90a", "gemm_kernel", 4096});
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<runtime::KernelMetadata> md =
      runtime::ParseKernelMetadata(*text);
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_EQ(md->name, "gemm");
  EXPECT_EQ(md->target, "sm_90a");
  EXPECT_EQ(md->entry, "gemm_kernel");
  EXPECT_EQ(md->shared_bytes, 4096);
  EXPECT_THAT(md->symbols, ElementsAre("M", "K"));
  ASSERT_EQ(md->params.size(), 5u);
  EXPECT_EQ(md->params[0].name, "A");
  EXPECT_EQ(md->params[0].dtype, runtime::DType::kF16);
  ASSERT_EQ(md->params[0].shape.size(), 2u);
  EXPECT_EQ(md->params[0].shape[0].symbol, "M");
  EXPECT_EQ(md->params[1].shape[1].value, 128);
  EXPECT_FALSE(md->params[1].shape[1].is_symbol());
  EXPECT_FALSE(md->params[3].is_tensor);
  EXPECT_EQ(md->params[4].dtype, runtime::DType::kI32);
  ASSERT_EQ(md->params[0].strides.size(), 2u);
  const runtime::NameValues values = {{"M", 300}, {"K", 128}, {"splits", 3}};
  EXPECT_EQ(*md->params[0].strides[0].Evaluate(values), 128);
  EXPECT_EQ(*md->grid[0].Evaluate(values), 2);
  EXPECT_EQ(*md->grid[1].Evaluate(values), 3);
  EXPECT_EQ(*md->grid[2].Evaluate(values), 3);
  EXPECT_EQ(md->block[0].AsConstant(), 128);
  EXPECT_EQ(md->cluster[0].AsConstant(), 2);
  ASSERT_EQ(md->assumptions.size(), 2u);
  EXPECT_EQ(md->assumptions[0].text, "K % 64 == 0");
  EXPECT_EQ(*md->assumptions[0].expr.Evaluate(values), 1);
  EXPECT_EQ(*md->assumptions[0].expr.Evaluate({{"K", 100}}), 0);
  EXPECT_EQ(md->assumptions[1].text, "splits >= 1");
}

TEST(MetadataWriterTest, ListsTheTensorsTheKernelWrites) {
  // Written at any depth, by a copy, a fill, an element store under an
  // `if` in a parallel in a loop, an atomic add; tiles and read-only
  // tensors are not listed.
  auto k = testing::ParseKernel(R"(
kernel k(X: f32[N], Y: f32[N], Z: f32[N], W: f32[N], A: f32[N], R: f32[N],
         s: i32)
  grid(1) threads(32) (bx) {
  alloc fragment t: f32[32]
  copy X[0:+32] -> t
  copy t -> Y[0:+32]
  fill W[0:+32], 1.0
  for i in serial(s) {
    parallel (j) in (32) {
      if j < N {
        Z[j] = t[j] + R[j]
      }
    }
  }
  atomic_add A[0:+32], t
}
)");
  ASSERT_TRUE(k.ok()) << k.status();
  absl::StatusOr<std::string> text =
      compiler::WriteKernelMetadata(*k, {"cpu", "kiln_k", 0});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("\nwrites Y Z W A\ngrid "));
  absl::StatusOr<runtime::KernelMetadata> md =
      runtime::ParseKernelMetadata(*text);
  ASSERT_TRUE(md.ok()) << md.status();
  std::vector<std::string> written;
  for (const runtime::MetadataParam& p : md->params) {
    if (p.written) written.push_back(p.name);
  }
  EXPECT_THAT(written, ElementsAre("Y", "Z", "W", "A"));
  // A kernel that writes no tensor has no record.
  auto none = testing::ParseKernel(kGemm);
  ASSERT_TRUE(none.ok()) << none.status();
  text = compiler::WriteKernelMetadata(*none, {"cpu", "kiln_gemm", 0});
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, ::testing::Not(HasSubstr("writes")));
}

// A back end that decides the cluster (the GPU render: only kernels that
// pair their blocks are launched in clusters) overrides the program's
// cluster(...).
TEST(MetadataWriterTest, TheBackEndsClusterOverridesTheProgramsHeader) {
  auto k = testing::ParseKernel(kGemm);
  ASSERT_TRUE(k.ok()) << k.status();
  compiler::MetadataOptions o{"sm_90a", "gemm_kernel", 0};
  o.cluster = std::array<int64_t, 3>{1, 1, 1};
  absl::StatusOr<std::string> text = compiler::WriteKernelMetadata(*k, o);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, ::testing::HasSubstr("\ncluster 1 1 1\n"));
  o.cluster = std::array<int64_t, 3>{2, 1, 1};
  text = compiler::WriteKernelMetadata(*k, o);
  ASSERT_TRUE(text.ok()) << text.status();
  absl::StatusOr<runtime::KernelMetadata> md =
      runtime::ParseKernelMetadata(*text);
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_EQ(md->cluster[0].AsConstant(), 2);
  EXPECT_EQ(md->cluster[1].AsConstant(), 1);
}

// A compiler-added producer warpgroup and TMA tensor maps (sm_90a):
// `block` is the launched block and each map is a `tensormap` record the
// runtime reads back.
TEST(MetadataWriterTest, WritesTheLaunchedBlockAndTensorMaps) {
  auto k = testing::ParseKernel(kGemm);
  ASSERT_TRUE(k.ok()) << k.status();
  compiler::MetadataOptions o{"sm_90a", "gemm_kernel", 4096};
  o.block_threads = 256;
  o.tensor_maps = {{"A", 128, {64, 128}}, {"B", 64, {32, 64}}};
  absl::StatusOr<std::string> text = compiler::WriteKernelMetadata(*k, o);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("block 256 1 1\n"));
  EXPECT_THAT(*text,
              HasSubstr("tensormap A 128 64 128\ntensormap B 64 32 64\n"));
  absl::StatusOr<runtime::KernelMetadata> md =
      runtime::ParseKernelMetadata(*text);
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_EQ(md->block[0].AsConstant(), 256);
  ASSERT_EQ(md->tensor_maps.size(), 2u);
  EXPECT_EQ(md->tensor_maps[1].param, "B");
  EXPECT_EQ(md->tensor_maps[1].swizzle, 64);
  EXPECT_EQ(md->tensor_maps[1].box, (std::vector<int64_t>{32, 64}));
}

// The verifier rejects float facts; a kernel that skips it must get an
// error, never a launch check silently dropped.
TEST(MetadataWriterTest, FloatAssumptionsAreRejected) {
  auto k = testing::ParseKernel(R"(
kernel k(A: f32[N], alpha: f32, n: i32)
  assume n > 0, alpha > 0.5, N % 4 == 0
  grid(1) threads(1) (bx) {
}
)");
  ASSERT_TRUE(k.ok());
  absl::StatusOr<std::string> text =
      compiler::WriteKernelMetadata(*k, {"cpu", "k", 0});
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(text.status().message()),
              HasSubstr("assumption 'alpha > 0.5' is over floats"));
}

TEST(MetadataWriterTest, RejectsLaunchExpressionsTheRuntimeCannotEvaluate) {
  auto bit_op = testing::ParseKernel(R"(
kernel k(A: f32[N])
  assume (N ^ 1) > 0
  grid(1) threads(1) (bx) {
}
)");
  ASSERT_TRUE(bit_op.ok());
  absl::StatusOr<std::string> md =
      compiler::WriteKernelMetadata(*bit_op, {"cpu", "k", 0});
  ASSERT_FALSE(md.ok());
  EXPECT_THAT(
      md.status().message(),
      HasSubstr("assumption '(N ^ 1) > 0' is not an integer expression"));

  auto tunable_left = testing::ParseKernel(R"(
kernel k(A: f32[N])
  grid(ceildiv(N, BN)) threads(1) (bx) {
}
)");
  ASSERT_TRUE(tunable_left.ok());
  md = compiler::WriteKernelMetadata(*tunable_left, {"cpu", "k", 0});
  ASSERT_FALSE(md.ok());
  EXPECT_THAT(md.status().message(), HasSubstr("uses 'BN'"));
}

}  // namespace
}  // namespace kiln
