// The HIP back end without an AMD GPU: every kernel of every valid corpus
// program compiles to a gfx90a code object through hiprtc (skipped where
// libamdhip64 is not installed), GEMMs use MFMA from an LDS ring, binary
// keys differ between CUDA and HIP and between gfx architectures, gfx942
// is refused by an old hiprtc with the version it needs, and an absent
// hiprtc is FailedPrecondition. Generated-source goldens are in
// gpu_source_test.cc.
#include "compiler/codegen/hip/hip_codegen.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "compiler/codegen/cuda/cuda_codegen.h"
#include "compiler/codegen/hip/device_headers.h"
#include "compiler/codegen/hip/hiprtc.h"
#include "compiler/compile.h"
#include "compiler/ir/parser.h"
#include "compiler/tuning_space.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/kernel_metadata.h"
#include "tests/compiler/corpus_util.h"

namespace kiln::compiler {
namespace {

using ::testing::HasSubstr;

using testing::CorpusFiles;
using testing::ReadFileOrDie;
using testing::TestNameOf;

bool HaveHiprtc() { return hip::HiprtcVersion().ok(); }

#define KILN_SKIP_WITHOUT_HIPRTC()                                       \
  if (!HaveHiprtc())                                                     \
  GTEST_SKIP() << "hiprtc (libamdhip64) is not installed on this host: " \
               << hip::HiprtcVersion().status().message()

struct CorpusKernel {
  std::string file;
  std::string kernel;
};

std::vector<CorpusKernel> AllCorpusKernels() {
  std::vector<CorpusKernel> out;
  for (const std::filesystem::path& f : CorpusFiles()) {
    for (const Kernel& k : Parse(ReadFileOrDie(f)).program.kernels) {
      out.push_back({f.filename().string(), k.name});
    }
  }
  return out;
}

void PrintTo(const CorpusKernel& c, std::ostream* os) {
  *os << c.file << ":" << c.kernel;
}

class HipCorpusTest : public ::testing::TestWithParam<CorpusKernel> {};

TEST_P(HipCorpusTest, CompilesToGfx90aCodeObject) {
  KILN_SKIP_WITHOUT_HIPRTC();
  const CorpusKernel& c = GetParam();
  const std::string source =
      ReadFileOrDie(testing::TestDataDir() / "corpus" / c.file);
  ParseResult parsed = Parse(source);
  const Kernel* k = parsed.program.Find(c.kernel);
  ASSERT_NE(k, nullptr);
  std::vector<TunableValues> space = EnumerateTuningSpace(*k, 1);
  ASSERT_FALSE(space.empty());
  CompileOptions options;
  options.target = "gfx90a";
  options.kernel = c.kernel;
  options.bindings = space[0];
  options.filename = c.file;
  absl::StatusOr<CompiledKernel> out = Compile(source, options);
  if (!k->cluster.empty()) {
    // Thread block clusters are CUDA's (sm_90): a clear error.
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(), HasSubstr("cluster(...) needs"));
    return;
  }
  if (testing::ExceedsGfx90aSharedMemory(c.kernel)) {
    // A documented back-end limit (64 KiB of LDS per block), located.
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(),
                HasSubstr("bytes of shared memory per block; gfx90a allows"));
    return;
  }
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_GE(out->binary.size(), 4u);
  EXPECT_EQ(out->binary.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_THAT(out->binary, HasSubstr("kiln_" + c.kernel));
  EXPECT_THAT(out->device_source, HasSubstr("#include \"kiln/kiln.hip.h\""));
  absl::StatusOr<runtime::KernelMetadata> md =
      runtime::ParseKernelMetadata(out->metadata);
  ASSERT_TRUE(md.ok()) << md.status() << "\n" << out->metadata;
  EXPECT_EQ(md->target, "gfx90a");
  EXPECT_EQ(md->entry, "kiln_" + c.kernel);
  EXPECT_LE(md->shared_bytes, 64 * 1024);
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, HipCorpusTest, ::testing::ValuesIn(AllCorpusKernels()),
    [](const ::testing::TestParamInfo<CorpusKernel>& info) {
      std::string n = info.param.file.substr(0, info.param.file.size() - 5) +
                      "_" + info.param.kernel;
      return TestNameOf(n);
    });

constexpr char kGemm[] = R"(
kernel g(A: bf16[M, K], B: bf16[K, N], C: f32[M, N])
  tune BM in [64, 128]
  grid(ceildiv(N, BM), ceildiv(M, BM)) threads(256) (bx, by) {
  alloc shared As: bf16[BM, 32]
  alloc shared Bs: bf16[32, BM]
  alloc fragment Acc: f32[BM, BM]
  clear Acc
  for k in pipelined(ceildiv(K, 32), stages=3) {
    copy A[by * BM:+BM, k * 32:+32] -> As
    copy B[k * 32:+32, bx * BM:+BM] -> Bs
    gemm As, Bs -> Acc
  }
  copy Acc -> C[by * BM:+BM, bx * BM:+BM]
}
)";

TEST(HipCodegenTest, GemmUsesMfmaFromAnLdsRing) {
  KILN_SKIP_WITHOUT_HIPRTC();
  CompileOptions o;
  o.bindings = {{"BM", 64}};
  o.target = "gfx90a";
  absl::StatusOr<CompiledKernel> out = Compile(kGemm, o);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->device_source,
              HasSubstr("kiln::gemm_ss<kiln::bf16_t, 64, 64, 32, 2, 2"));
  EXPECT_THAT(out->device_source, HasSubstr("3-stage LDS ring"));
  EXPECT_THAT(out->device_source, HasSubstr("__launch_bounds__(256)\n"));
  // 4 wavefronts of 64 over a 64 x 64 tile: 32 x 32 each, 2 x 2 MFMA tiles
  // of 4 registers.
  EXPECT_THAT(out->layouts, HasSubstr("Acc: registers, mma accumulator "
                                      "[64, 64] over 2x2 warps, 16 per "
                                      "thread"));
  absl::StatusOr<runtime::KernelMetadata> md =
      runtime::ParseKernelMetadata(out->metadata);
  ASSERT_TRUE(md.ok()) << md.status();
  // Three stages of a 64x32 and a 32x64 bf16 tile.
  EXPECT_EQ(md->shared_bytes, 3 * (64 * 32 * 2 + 32 * 64 * 2));
  // The MFMA instruction is in the code object (its name in the symbol-free
  // ELF is not: check the code object compiled at all).
  EXPECT_EQ(out->binary.substr(0, 4),
            "\x7f"
            "ELF");
}

TEST(HipCodegenTest, LdsOverSixtyFourKibIsAnError) {
  KILN_SKIP_WITHOUT_HIPRTC();
  // 128 x 160 f32 in LDS: 80 KiB (read transposed, so its elements pass
  // between threads and it cannot live in registers).
  constexpr char kBig[] = R"(
kernel big(X: f32[M, N], Y: f32[N, M])
  grid(ceildiv(N, 160), ceildiv(M, 128)) threads(256) (bx, by) {
  alloc shared S: f32[128, 160]
  alloc fragment T: f32[160, 128]
  copy X[by * 128:+128, bx * 160:+160] -> S
  parallel (i, j) in (160, 128) {
    T[i, j] = S[j, i]
  }
  copy T -> Y[bx * 160:+160, by * 128:+128]
}
)";
  CompileOptions o;
  o.target = "gfx90a";
  absl::StatusOr<CompiledKernel> out = Compile(kBig, o);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(),
              HasSubstr("bytes of shared memory per block; gfx90a allows "
                        "65536"));
}

TEST(HipCodegenTest, BinaryKeyDiffersBetweenGfxArchs) {
  KILN_SKIP_WITHOUT_HIPRTC();
  CompileOptions o;
  o.bindings = {{"BM", 64}};
  o.target = "gfx90a";
  auto k90a = BinaryKey(kGemm, o);
  o.target = "gfx908";
  auto k908 = BinaryKey(kGemm, o);
  ASSERT_TRUE(k90a.ok()) << k90a.status();
  ASSERT_TRUE(k908.ok()) << k908.status();
  EXPECT_NE(*k90a, *k908);
  auto id = HipToolchainIdentity("gfx90a");
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, "hiprtc-" + *hip::HiprtcVersion() + " gfx90a kiln-device-" +
                     hip::DeviceHeadersHash().substr(0, 16));
}

TEST(HipCodegenTest, BinaryKeyDiffersBetweenCudaAndHip) {
  KILN_SKIP_WITHOUT_HIPRTC();
  CompileOptions o;
  o.bindings = {{"BM", 64}};
  o.target = "gfx90a";
  auto hip_key = BinaryKey(kGemm, o);
  ASSERT_TRUE(hip_key.ok()) << hip_key.status();
  o.target = "sm_90a";
  auto cuda_key = BinaryKey(kGemm, o);
  if (!cuda_key.ok()) {
    // Without NVRTC there is no sm_90a key; the identities must differ
    // anyway (toolchain and device library).
    EXPECT_EQ(cuda_key.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(*HipToolchainIdentity("gfx90a"), HasSubstr("hiprtc-"));
    GTEST_SKIP() << "NVRTC is not installed: " << cuda_key.status();
  }
  EXPECT_NE(*hip_key, *cuda_key);
}

TEST(HipCodegenTest, Gfx942NeedsRocm6) {
  CompileOptions o;
  o.bindings = {{"BM", 64}};
  o.target = "gfx942";
  absl::StatusOr<CompiledKernel> out = Compile(kGemm, o);
  auto version = hip::HiprtcVersion();
  if (version.ok() && version->rfind("5.", 0) != 0 &&
      version->rfind("4.", 0) != 0) {
    GTEST_SKIP() << "this host's hiprtc (" << *version << ") knows gfx942";
  }
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(out.status().message(),
              HasSubstr("gfx942 (MI300X) needs hiprtc from ROCm 6.0 or newer"));
  if (version.ok()) {
    EXPECT_THAT(out.status().message(),
                HasSubstr("toolchain too old: gfx942 (MI300X) needs hiprtc "
                          "from ROCm 6.0 or newer; this host's hiprtc is " +
                          *version));
  }
  EXPECT_TRUE(IsHipTarget("gfx942"));
}

// In a child process: exits 0 when compiling for gfx90a with hiprtc pointed
// at a library that does not exist is FailedPrecondition naming it.
void CompileWithoutHiprtcAndExit() {
  setenv("KILN_HIPRTC_LIBRARY", "libkiln-no-such-hiprtc.so", 1);
  CompileOptions o;
  o.bindings = {{"BM", 64}};
  o.target = "gfx90a";
  absl::StatusOr<CompiledKernel> out = Compile(kGemm, o);
  const bool ok =
      !out.ok() &&
      out.status().code() == absl::StatusCode::kFailedPrecondition &&
      out.status().message().find("hiprtc is not installed") !=
          std::string::npos &&
      out.status().message().find("libkiln-no-such-hiprtc.so") !=
          std::string::npos;
  std::exit(ok ? 0 : 1);
}

TEST(HipCodegenTest, AbsentHiprtcIsFailedPrecondition) {
  // hiprtc is loaded once per process: check in a fresh one.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(CompileWithoutHiprtcAndExit(), ::testing::ExitedWithCode(0), "");
}

TEST(HipCodegenTest, DeviceHeadersAreEmbedded) {
  std::vector<std::string> names;
  for (const hip::DeviceHeader& h : hip::DeviceHeaders()) {
    names.push_back(h.name);
    EXPECT_GT(std::string(h.text).size(), 100u) << h.name;
  }
  EXPECT_THAT(names, ::testing::IsSupersetOf(
                         {"kiln/kiln.hip.h", "kiln/mma.hip.h",
                          "kiln/global_to_shared.hip.h", "kiln/reduce.hip.h",
                          "kiln/shared_to_register.hip.h"}));
  EXPECT_EQ(hip::DeviceHeadersHash().size(), 64u);
}

TEST(HipCodegenTest, HiprtcErrorNamesGeneratedLineAndTileStatement) {
  KILN_SKIP_WITHOUT_HIPRTC();
  const std::string src =
      "#include \"kiln/kiln.hip.h\"\n"
      "extern \"C\" __global__ void kiln_bad(float* x) {\n"
      "  // tile 7:3\n"
      "  x[0] = undefined_thing;\n"
      "}\n";
  auto out = hip::CompileToCodeObject(src, "kiln_bad.hip", "gfx90a");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("undefined_thing"));
  EXPECT_THAT(out.status().message(),
              HasSubstr("generated line 4 |   x[0] = undefined_thing;"));
  EXPECT_THAT(out.status().message(),
              HasSubstr("from the tile-IR statement at line:col 7:3"));
}

TEST(HipCodegenTest, LogAnnotationReadsClangDiagnostics) {
  const std::string log =
      "kiln_k.hip:2:5: error: no member named 'x'\n"
      "kiln_k.hip:9:1: warning: beyond the source\n";
  const std::string annotated =
      hip::AnnotateHipLog(log, "// tile 3:4\n  bad();\n");
  EXPECT_THAT(annotated, HasSubstr("generated line 2 |   bad();\n"
                                   "  from the tile-IR statement at "
                                   "line:col 3:4\n"));
  EXPECT_THAT(annotated, HasSubstr("beyond the source\n"));
}

}  // namespace
}  // namespace kiln::compiler
