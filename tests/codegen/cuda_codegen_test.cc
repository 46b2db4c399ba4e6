// The CUDA back end without a GPU: every kernel of every valid corpus program
// compiles to a cubin for sm_80, sm_90 and sm_90a through NVRTC (on sm_90a
// with no spills and no ptxas C75xx performance warning, e.g. serialised
// wgmma), the metadata reads
// back, NVRTC errors point at the generated line and the tile-IR statement,
// and the ptxas report is parsed.
#include "compiler/codegen/cuda/cuda_codegen.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "compiler/codegen/cuda/device_headers.h"
#include "compiler/codegen/cuda/nvrtc.h"
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
using ::testing::Not;

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CorpusKernel {
  std::string file;
  std::string kernel;
  std::string arch;
};

// sm_80, sm_90 and sm_90a; KILN_CUDA_TEST_ARCHS="sm_80,sm_86,..." for
// others.
std::vector<std::string> Archs() {
  std::vector<std::string> out;
  const char* env = std::getenv("KILN_CUDA_TEST_ARCHS");
  std::stringstream ss(env ? env : "sm_80,sm_90,sm_90a");
  for (std::string a; std::getline(ss, a, ',');) {
    if (!a.empty()) out.push_back(a);
  }
  return out;
}

std::vector<CorpusKernel> AllCorpusKernels() {
  std::vector<CorpusKernel> out;
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(KILN_CORPUS_DIR)) {
    if (e.path().extension() == ".tile") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const auto& f : files) {
    ParseResult parsed = Parse(ReadFile(f));
    for (const Kernel& k : parsed.program.kernels) {
      for (const std::string& arch : Archs()) {
        out.push_back({f.filename().string(), k.name, arch});
      }
    }
  }
  return out;
}

bool HaveNvrtc() { return cuda::NvrtcVersion().ok(); }

class CudaCorpusTest : public ::testing::TestWithParam<CorpusKernel> {};

TEST_P(CudaCorpusTest, CompilesToCubin) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  const CorpusKernel& c = GetParam();
  const std::string source =
      ReadFile(std::filesystem::path(KILN_CORPUS_DIR) / c.file);
  ParseResult parsed = Parse(source);
  const Kernel* k = parsed.program.Find(c.kernel);
  ASSERT_NE(k, nullptr);
  std::vector<TunableValues> space = EnumerateTuningSpace(*k, 1);
  ASSERT_FALSE(space.empty());
  CompileOptions options;
  options.target = c.arch;
  options.kernel = c.kernel;
  options.bindings = space[0];
  options.filename = c.file;
  absl::StatusOr<CompiledKernel> out = Compile(source, options);
  if (!k->cluster.empty() && c.arch != "sm_90" && c.arch != "sm_90a") {
    // Thread block clusters exist from sm_90 on: a clear error before.
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(out.status().message(), HasSubstr("cluster(...) needs"));
    return;
  }
  ASSERT_TRUE(out.ok()) << out.status();
  ASSERT_GE(out->binary.size(), 4u);
  EXPECT_EQ(out->binary.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_THAT(out->device_source, HasSubstr("kiln_" + c.kernel));
  absl::StatusOr<runtime::KernelMetadata> md =
      runtime::ParseKernelMetadata(out->metadata);
  ASSERT_TRUE(md.ok()) << md.status() << "\n" << out->metadata;
  EXPECT_EQ(md->target, c.arch);
  EXPECT_EQ(md->entry, "kiln_" + c.kernel);
  EXPECT_GT(md->ptxas.registers, 0);
  EXPECT_LE(md->ptxas.registers, 255);
  // ptxas C75xx warnings name code that runs slower than written (C7515:
  // wgmma serialised because other instructions touch its registers;
  // C7508: setmaxnreg ignored); the Hopper path must not produce them, nor
  // spill.
  EXPECT_THAT(out->build_log, Not(HasSubstr("C75"))) << out->build_log;
  if (c.arch == "sm_90a") {
    EXPECT_EQ(md->ptxas.spill_stores, 0) << out->build_log;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, CudaCorpusTest, ::testing::ValuesIn(AllCorpusKernels()),
    [](const ::testing::TestParamInfo<CorpusKernel>& info) {
      std::string n = info.param.file.substr(0, info.param.file.size() - 5) +
                      "_" + info.param.kernel + "_" + info.param.arch;
      return ::kiln::compiler::testing::TestNameOf(n);
    });

constexpr char kGemm[] = R"(
kernel g(A: f16[M, K], B: f16[K, N], C: f32[M, N])
  tune BM in [64, 256]
  grid(ceildiv(N, BM), ceildiv(M, BM)) threads(128) (bx, by) {
  alloc shared As: f16[BM, 32]
  alloc shared Bs: f16[32, BM]
  alloc fragment Acc: f32[BM, BM]
  clear Acc
  for k in pipelined(ceildiv(K, 32), stages=2) {
    copy A[by * BM:+BM, k * 32:+32] -> As
    copy B[k * 32:+32, bx * BM:+BM] -> Bs
    gemm As, Bs -> Acc
  }
  copy Acc -> C[by * BM:+BM, bx * BM:+BM]
}
)";

// kGemm for sm_80 with 64x64 tiles, keeping the PTX.
CompileOptions Sm80Gemm64Options() {
  CompileOptions o;
  o.target = "sm_80";
  o.bindings = {{"BM", 64}};
  o.keep_ptx = true;
  return o;
}

TEST(CudaCodegenTest, GemmUsesTensorCoresAndACpAsyncRing) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  const CompileOptions o = Sm80Gemm64Options();
  absl::StatusOr<CompiledKernel> out = Compile(kGemm, o);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->device_source, HasSubstr("kiln::gemm_ss<kiln::f16_t"));
  EXPECT_THAT(out->device_source, HasSubstr("2-stage cp.async ring"));
  EXPECT_THAT(out->layouts, HasSubstr("Acc: registers, mma accumulator"));
  EXPECT_THAT(out->ptx, HasSubstr("mma.sync.aligned.m16n8k16"));
  EXPECT_THAT(out->ptx, HasSubstr("ldmatrix"));
  EXPECT_THAT(out->ptx, HasSubstr("cp.async"));
  absl::StatusOr<runtime::KernelMetadata> md =
      runtime::ParseKernelMetadata(out->metadata);
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_EQ(md->block[0].Evaluate({}).value_or(-1), 128);
  // Two stages of a 64x32 and a 32x64 f16 tile.
  EXPECT_EQ(md->shared_bytes, 2 * (64 * 32 * 2 + 32 * 64 * 2));
  EXPECT_GT(md->ptxas.registers, 0);
  EXPECT_EQ(md->ptxas.spill_stores, 0) << out->build_log;
}

// Whether some basic block of the PTX (split at labels and branches)
// holds both needles.
bool OneBlockHolds(const std::string& ptx, const std::string& a,
                   const std::string& b) {
  bool has_a = false, has_b = false;
  for (absl::string_view line : absl::StrSplit(ptx, '\n')) {
    if (absl::StartsWith(absl::StripLeadingAsciiWhitespace(line), "$L") ||
        absl::StrContains(line, "bra")) {
      has_a = has_b = false;
      continue;
    }
    has_a |= absl::StrContains(line, a);
    has_b |= absl::StrContains(line, b);
    if (has_a && has_b) return true;
  }
  return false;
}

TEST(CudaCodegenTest, GemmMainLoopHasAWholeTileVersionWithStraightLineCopies) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  const CompileOptions o = Sm80Gemm64Options();
  absl::StatusOr<CompiledKernel> out = Compile(kGemm, o);
  ASSERT_TRUE(out.ok()) << out.status();
  // Tested at the first, second and last iteration; taken when whole.
  EXPECT_THAT(out->device_source, HasSubstr("kiln::g2s_tile_whole<"));
  EXPECT_THAT(out->device_source,
              HasSubstr("const long long k = kiln::min_(kiln_lo + 1, "
                        "kiln_hi - 1);"));
  EXPECT_THAT(out->device_source, HasSubstr("if (kiln_whole) {"));
  EXPECT_THAT(out->device_source,
              HasSubstr("__builtin_assume(threadIdx.x < 128u);"));
  // Copies known whole, S - 1 ahead, clamped to the last tile.
  EXPECT_THAT(out->device_source, HasSubstr(", 128, true>("));
  EXPECT_THAT(out->device_source, HasSubstr("kiln::min_(k + 1, kiln_hi - 1);"));
  // The general loop stays for ragged tiles.
  EXPECT_THAT(out->device_source, HasSubstr("if (kiln_next < kiln_hi)"));
  // The point: the next stage's copies and this stage's mma.sync share a
  // basic block, so ptxas can interleave them.
  EXPECT_TRUE(OneBlockHolds(out->ptx, "cp.async.cg", "mma.sync"));
  absl::StatusOr<runtime::KernelMetadata> md =
      runtime::ParseKernelMetadata(out->metadata);
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_EQ(md->ptxas.spill_stores, 0) << out->build_log;

  // Not where a copy's start is not affine in the loop variable (its
  // wholeness at the ends says nothing about the middle), nor in a fused
  // loop.
  std::string not_affine = kGemm;
  absl::StrReplaceAll({{"k * 32:+32, bx", "k / 2 * 32:+32, bx"}}, &not_affine);
  std::string fused = kGemm;
  absl::StrReplaceAll(
      {{"    gemm As, Bs -> Acc\n",
        "    gemm As, Bs -> Acc\n"
        "    parallel (i, j) in (BM, BM) { Acc[i, j] *= 0.5 }\n"}},
      &fused);
  for (const std::string& src : {not_affine, fused}) {
    ASSERT_NE(src, kGemm);
    absl::StatusOr<CompiledKernel> other = Compile(src, o);
    ASSERT_TRUE(other.ok()) << other.status();
    EXPECT_THAT(other->device_source, HasSubstr("2-stage cp.async ring"));
    EXPECT_THAT(other->device_source, Not(HasSubstr("kiln_whole")));
    EXPECT_FALSE(OneBlockHolds(other->ptx, "cp.async.cg", "mma.sync"));
  }
}

TEST(CudaCodegenTest, AttentionKeepsRowStatisticsAndPInRegisters) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  const std::string source = ReadFile(std::filesystem::path(KILN_CORPUS_DIR) /
                                      "flash_attention_fwd.tile");
  CompileOptions o;
  o.target = "sm_90";
  o.kernel = "flash_attention_fwd";
  o.bindings = {{"BM", 64}, {"BN", 64}, {"STAGES", 2}};
  absl::StatusOr<CompiledKernel> out = Compile(source, o);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->layouts,
              HasSubstr("acc_o: registers, mma accumulator [64, 128] over "
                        "4x1 warps"));
  EXPECT_THAT(out->layouts,
              HasSubstr("scores_max: registers, rows of the mma accumulator"));
  EXPECT_THAT(out->layouts,
              HasSubstr("acc_s_cast: registers, mma A operands packed from "
                        "acc_s"));
  EXPECT_THAT(out->device_source, HasSubstr("kiln::gemm_rs<"));
  EXPECT_THAT(out->device_source, HasSubstr("kiln::acc_to_a_operand<"));
  EXPECT_THAT(out->device_source, HasSubstr("2-stage cp.async ring"));
  EXPECT_EQ(out->binary.substr(0, 4),
            "\x7f"
            "ELF");
}

// Masks in element loops compare the element index in 32 bits against a
// bound computed once per statement (clamped to the index's range), not
// in 64-bit index arithmetic per element; comparisons that are not linear
// in the element indices are left as written.
// Causal attention's blocks run longer as the query block index grows:
// they start longest first. Not when the work does not grow with x
// (non-causal), nor when it shrinks.
TEST(CudaCodegenTest, BlocksWhoseLoopsGrowWithXStartLongestFirst) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  const std::string source = ReadFile(std::filesystem::path(KILN_CORPUS_DIR) /
                                      "flash_attention_fwd.tile");
  const std::string causal_loop =
      "pipelined(ceildiv(min(S, (bx + 1) * BM), BN), stages=STAGES)";
  ASSERT_THAT(source, HasSubstr(causal_loop));
  std::string shrinking = source;
  absl::StrReplaceAll(
      {{causal_loop, "pipelined(ceildiv(S, BN) - bx, stages=STAGES)"}},
      &shrinking);
  const std::string reversed =
      "long long bx = gridDim.x - 1 - blockIdx.x;  // longest first";
  struct Want {
    const std::string* src;
    std::string kernel;
    bool reversed;
  };
  for (const Want& w :
       {Want{&source, "flash_attention_fwd_causal", true},
        Want{&source, "flash_attention_fwd", false},
        Want{&shrinking, "flash_attention_fwd_causal", false}}) {
    for (const char* target : {"sm_90", "sm_90a"}) {
      SCOPED_TRACE(w.kernel + " " + target);
      CompileOptions o;
      o.target = target;
      o.kernel = w.kernel;
      o.bindings = {{"BM", 64}, {"BN", 64}, {"STAGES", 2}};
      absl::StatusOr<CompiledKernel> out = Compile(*w.src, o);
      ASSERT_TRUE(out.ok()) << out.status();
      if (w.reversed) {
        EXPECT_THAT(out->device_source, HasSubstr(reversed));
      } else {
        EXPECT_THAT(out->device_source, Not(HasSubstr("longest first")));
        EXPECT_THAT(out->device_source,
                    HasSubstr("long long bx = blockIdx.x;"));
      }
    }
  }
}

// O /= logsum in attention's epilogue: an f32 division of register
// fragment elements by their row's value is a multiplication by the row's
// correctly rounded reciprocal (within 1 ulp), computed once per row. A
// division by a value that is not an accumulator row vector's (softmax's row
// sum, held in the row registers of thread-owned chunks; a constant) stays
// a division.
TEST(CudaCodegenTest, DivisionByARowValueInARegisterFragmentIsByItsReciprocal) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  const std::string dir = KILN_CORPUS_DIR;
  for (const char* target : {"sm_90", "sm_90a"}) {
    SCOPED_TRACE(target);
    CompileOptions o;
    o.target = target;
    o.kernel = "flash_attention_fwd";
    o.bindings = {{"BM", 64}, {"BN", 64}, {"STAGES", 2}};
    o.keep_ptx = true;
    absl::StatusOr<CompiledKernel> fa = Compile(
        ReadFile(std::filesystem::path(dir) / "flash_attention_fwd.tile"), o);
    ASSERT_TRUE(fa.ok()) << fa.status();
    EXPECT_THAT(fa->device_source, HasSubstr(" * kiln::rcp_rn(logsum["));
    EXPECT_THAT(fa->ptx, HasSubstr("rcp.rn.f32"));
    EXPECT_THAT(fa->ptx, Not(HasSubstr("div.rn.f32")));
    o.kernel = "softmax";
    o.bindings = {{"BM", 4}, {"BN", 256}};
    absl::StatusOr<CompiledKernel> sm =
        Compile(ReadFile(std::filesystem::path(dir) / "softmax.tile"), o);
    ASSERT_TRUE(sm.ok()) << sm.status();
    EXPECT_THAT(sm->device_source, Not(HasSubstr("rcp_rn")));
    EXPECT_THAT(sm->device_source,
                HasSubstr(") / row_sum[row_sum_L::slot(kiln_q"));
  }
}

// A copy between a thread-owned fragment and a tensor tests once, for
// every thread alike, that the region lies inside the tensor with aligned
// rows; there its chunks go unchecked, whether the shapes are constants or
// run-time symbols (the phrasings run alike), and the per-chunk edge tests
// remain only on the other branch.
// The softmax of tests/codegen/phrasings/softmax/SPELLING.tile for sm_90a.
absl::StatusOr<CompiledKernel> CompileSoftmaxSpelling(const char* spelling) {
  CompileOptions o;
  o.target = "sm_90a";
  return Compile(ReadFile(std::filesystem::path(KILN_PHRASINGS_DIR) /
                          "softmax" / (std::string(spelling) + ".tile")),
                 o);
}

TEST(CudaCodegenTest, OwnedCopiesTestTheWholeRegionOnceAndSkipTheChunkChecks) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  for (const char* spelling : {"constant_shapes", "let_bound"}) {
    SCOPED_TRACE(spelling);
    absl::StatusOr<CompiledKernel> k = CompileSoftmaxSpelling(spelling);
    ASSERT_TRUE(k.ok()) << k.status();
    const std::string& src = k->device_source;
    const bool symbolic = std::string(spelling) == "let_bound";
    const std::string m = symbolic ? "M" : "(16384LL)";
    const std::string n = symbolic ? "N" : "(4096LL)";
    // Rows bx * 4 .. + 4 and columns t * 256 .. + 256 inside X, its first
    // element and its row stride aligned to the 8-element chunk.
    EXPECT_THAT(src, HasSubstr("(((long long)(((long long)(bx * (4LL))) + "
                               "(4LL))) <= " +
                               m + ")"));
    EXPECT_THAT(src, HasSubstr("(((long long)(((long long)(t * (256LL))) + "
                               "(256LL))) <= " +
                               n + ")"));
    EXPECT_THAT(src, HasSubstr(", 16) && (X_s0) % 8 == 0) {"));
    // Three copies (two loads of X, one store to Y), each with one such
    // test, and each whole branch copies its chunk with no edge test
    // before it.
    size_t tests = 0;
    for (size_t at = src.find("% 8 == 0) {"); at != std::string::npos;
         at = src.find("% 8 == 0) {", at + 1)) {
      ++tests;
      const size_t next_if = src.find("if (", at);
      const size_t chunk = src.find("kiln::copy_chunk<8>(", at);
      ASSERT_NE(chunk, std::string::npos);
      EXPECT_LT(chunk, next_if) << src.substr(at, 600);
    }
    EXPECT_EQ(tests, 3u);
  }
}

// TileLang's RMSNorm with four rows of 4096 per 128-thread block holds 128
// f32 per thread in registers (the register budget counts the fragments
// live together, not all declared). The edge path of each owned copy
// computes the tensor's extent relative to the region once (kiln_lo /
// kiln_hi per dim) and tests each chunk's constant indices against it, so
// ptxas keeps the fragment in registers on that path too: no spills.
TEST(CudaCodegenTest, AWideOwnedFragmentKeepsItsRegistersOnTheEdgePath) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  constexpr char kRms[] = R"(
kernel rms(A: f32[M, 4096], B: f32[M, 4096])
  grid(ceildiv(M, 4)) threads(128) (bx) {
  alloc shared staged: f32[4, 4096]
  alloc fragment squares: f32[4, 4096]
  alloc fragment vals: f32[4, 4096]
  alloc fragment factor: f32[4]
  copy A[bx * 4:+4, :] -> staged
  copy staged -> vals
  parallel (r, c) in (4, 4096) {
    squares[r, c] = vals[r, c] * vals[r, c]
  }
  reduce.sum squares -> factor, dim=1
  parallel (r1) in (4) {
    factor[r1] = rsqrt(factor[r1] / 4096.0)
  }
  parallel (r2, c2) in (4, 4096) {
    vals[r2, c2] *= factor[r2]
  }
  copy vals -> B[bx * 4:+4, :]
}
)";
  CompileOptions o;
  o.target = "sm_90a";
  absl::StatusOr<CompiledKernel> k = Compile(kRms, o);
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_THAT(k->layouts, HasSubstr("vals: registers, thread-owned chunks of "
                                    "4 columns over 128 threads, 128 per "
                                    "thread"));
  const std::string& src = k->device_source;
  EXPECT_THAT(src, HasSubstr("const int kiln_lo"));
  EXPECT_THAT(src, HasSubstr("const int kiln_hi"));
  absl::StatusOr<runtime::KernelMetadata> md =
      runtime::ParseKernelMetadata(k->metadata);
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_EQ(md->ptxas.spill_stores, 0) << k->build_log;
  EXPECT_GE(md->ptxas.registers, 128);  // the fragment is in registers
}

// Tile copies into shared memory stay in flight until a statement reads
// their tiles: A's and B's cp.async copies are both issued, the
// accumulator is cleared under them, and one wait and one barrier come
// before the gemm that reads both (not a wait and a barrier per copy).
TEST(CudaCodegenTest, TileCopiesStayInFlightUntilTheirFirstReader) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  constexpr char kMm[] = R"(
kernel mm(A: f16[M, 64], B: f16[64, N], C: f32[M, N])
  grid(ceildiv(N, 64), ceildiv(M, 64)) threads(128) (bx, by) {
  alloc shared As: f16[64, 64]
  alloc shared Bs: f16[64, 64]
  alloc fragment Acc: f32[64, 64]
  copy A[by * 64:+64, :] -> As
  copy B[:, bx * 64:+64] -> Bs
  clear Acc
  gemm As, Bs -> Acc
  copy Acc -> C[by * 64:+64, bx * 64:+64]
}
)";
  for (const char* target : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(target);
    CompileOptions o;
    o.target = target;
    absl::StatusOr<CompiledKernel> k = Compile(kMm, o);
    ASSERT_TRUE(k.ok()) << k.status();
    const std::string& src = k->device_source;
    const size_t a = src.find("g2s_tile_async<unsigned short, As_L");
    const size_t b = src.find("g2s_tile_async<unsigned short, Bs_L");
    const size_t clear = src.find("// tile 9:3");
    const size_t gemm = src.find("// tile 10:3");
    ASSERT_NE(a, std::string::npos) << src;
    ASSERT_NE(b, std::string::npos) << src;
    ASSERT_NE(gemm, std::string::npos) << src;
    ASSERT_LT(a, b);
    ASSERT_LT(b, clear);
    ASSERT_LT(clear, gemm);
    auto count = [&](const std::string& what, size_t from, size_t to) {
      int n = 0;
      for (size_t i = src.find(what, from); i < to; i = src.find(what, i + 1)) {
        ++n;
      }
      return n;
    };
    EXPECT_EQ(count("cp_async_wait", a, gemm), 0) << src;
    EXPECT_EQ(count("__syncthreads", a, gemm), 0) << src;
    const size_t op = src.find("kiln::gemm", gemm);
    EXPECT_EQ(count("cp_async_wait<0>", gemm, op), 1) << src;
    EXPECT_EQ(count("__syncthreads", gemm, op), 1) << src;
  }
}

TEST(CudaCodegenTest, SerialLoopsRunTheirWholeTilesFirstWithTheMasksFolded) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  for (const char* spelling : {"constant_shapes", "let_bound"}) {
    SCOPED_TRACE(spelling);
    absl::StatusOr<CompiledKernel> k = CompileSoftmaxSpelling(spelling);
    ASSERT_TRUE(k.ok()) << k.status();
    const std::string& src = k->device_source;
    // The first loop's whole tiles, then its edge ones.
    const size_t whole = src.find("for (long long t = 0LL; t < kiln_full");
    const size_t edge = src.find("for (long long t = kiln_full");
    ASSERT_NE(whole, std::string::npos) << src;
    ASSERT_NE(edge, std::string::npos);
    ASSERT_LT(whole, edge);
    const std::string first = src.substr(whole, edge - whole);
    const std::string rest = src.substr(edge);
    // Whole tiles: the chunks unchecked and the -inf mask past the row's
    // end (`t * 256 + j >= N`) gone, proven never to fire.
    EXPECT_THAT(first, HasSubstr("kiln::copy_chunk<8>("));
    EXPECT_THAT(first, Not(HasSubstr("chunk_aligned")));
    EXPECT_THAT(first, Not(HasSubstr("0x7ff0000000000000")));
    EXPECT_THAT(rest, HasSubstr("chunk_aligned"));
    EXPECT_THAT(rest, HasSubstr("0x7ff0000000000000"));
    // The first part ends at the last column tile inside the row:
    // floor((N - 256) / 256) + 1, or 16 for N = 4096.
    EXPECT_THAT(src, HasSubstr(std::string(spelling) == "let_bound"
                                   ? "kiln::floordiv<long long>(((long "
                                     "long)(N - (256LL))), (256LL))"
                                   : "? (16LL) : (0LL)"));
  }
}

TEST(CudaCodegenTest, ElementMasksCompareIn32BitsAgainstAHoistedBound) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  const std::string source = ReadFile(std::filesystem::path(KILN_CORPUS_DIR) /
                                      "flash_attention_fwd.tile");
  CompileOptions o;
  o.target = "sm_90a";
  o.bindings = {{"BM", 64}, {"BN", 64}, {"STAGES", 2}};
  o.kernel = "flash_attention_fwd";
  absl::StatusOr<CompiledKernel> full = Compile(source, o);
  ASSERT_TRUE(full.ok()) << full.status();
  // k * BN + j < S: j in [0, 64), the bound S - k * BN clamped to [-1, 64].
  EXPECT_THAT(full->device_source,
              HasSubstr("(int)kiln::min_(kiln::max_(0LL + (-1LL) * ((long "
                        "long)(k * (64LL))) + (1LL) * S, -1LL), 64LL);"));
  EXPECT_THAT(full->device_source, HasSubstr("((((int)(j)) < kiln_cmp"));
  o.kernel = "flash_attention_fwd_causal";
  absl::StatusOr<CompiledKernel> causal = Compile(source, o);
  ASSERT_TRUE(causal.ok()) << causal.status();
  // bx * BM + i >= k * BN + j: i - j in [-63, 63].
  EXPECT_THAT(causal->device_source,
              HasSubstr("((((int)(((int)(i)) - ((int)(j)))) >= kiln_cmp"));
  EXPECT_THAT(causal->device_source, HasSubstr(", -64LL), 64LL);"));
  EXPECT_THAT(causal->build_log, Not(HasSubstr("C75"))) << causal->build_log;
  // Where every element passes (a key tile wholly inside the sequence, or
  // wholly below the diagonal), a branch runs the statement without the
  // comparison: the largest j is 63, the smallest i - j is -63.
  EXPECT_THAT(full->device_source, HasSubstr("if (63 < kiln_cmp"));
  EXPECT_THAT(full->device_source, HasSubstr("= (true ? acc_s[kiln_q"));
  EXPECT_THAT(causal->device_source, HasSubstr("if (-63 >= kiln_cmp"));

  const std::string quadratic = R"(
kernel sq(X: f32[N], Y: f32[N])
  grid(ceildiv(N, 128)) threads(128) (b) {
  alloc fragment t: f32[128]
  parallel (i) in (128) {
    t[i] = select(i * i < N, 1.0, 0.0)
  }
  copy t -> Y[b * 128:+128]
}
)";
  CompileOptions q;
  q.target = "sm_80";
  absl::StatusOr<CompiledKernel> sq = Compile(quadratic, q);
  ASSERT_TRUE(sq.ok()) << sq.status();
  EXPECT_THAT(sq->device_source, Not(HasSubstr("kiln_cmp")));
}

// Shared tiles whose lives (the top-level statements that use them) do not
// overlap share bytes, and writing one waits at a barrier for the reads of
// the other; attention's output staging tile takes the query tile's bytes
// (FA2's tile then fits twice per SM).
TEST(CudaCodegenTest, SharedTilesWithDisjointLivesShareBytesBehindABarrier) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  const std::string two = R"(
kernel alias(A: f32[N], B: f32[N], D: f32[N])
  grid(ceildiv(N, 128)) threads(128) (b) {
  alloc shared X: f32[128]
  alloc shared Y: f32[128]
  alloc fragment r: f32[128]
  alloc fragment s: f32[128]
  copy A[b * 128:+128] -> X
  parallel (i) in (128) {
    r[i] = X[127 - i]
  }
  copy B[b * 128:+128] -> Y
  parallel (j) in (128) {
    s[j] = Y[127 - j] + r[j]
  }
  copy s -> D[b * 128:+128]
}
)";
  CompileOptions o;
  o.target = "sm_80";
  absl::StatusOr<CompiledKernel> k = Compile(two, o);
  ASSERT_TRUE(k.ok()) << k.status();
  const std::string& src = k->device_source;
  EXPECT_THAT(src, HasSubstr("X = reinterpret_cast<float*>(kiln_smem + 0);"));
  EXPECT_THAT(src, HasSubstr("Y = reinterpret_cast<float*>(kiln_smem + 0);"));
  // Other threads read X[127 - i]: the copy into Y waits for them.
  const size_t read_x = src.find("= X[");
  const size_t write_y = src.find("Y[(");
  ASSERT_NE(read_x, std::string::npos);
  ASSERT_NE(write_y, std::string::npos);
  EXPECT_NE(src.substr(read_x, write_y - read_x).find("__syncthreads();"),
            std::string::npos);

  const std::string attention = ReadFile(
      std::filesystem::path(KILN_CORPUS_DIR) / "flash_attention_fwd.tile");
  o.bindings = {{"BM", 128}, {"BN", 64}, {"STAGES", 2}};
  o.kernel = "flash_attention_fwd";
  absl::StatusOr<CompiledKernel> fa = Compile(attention, o);
  ASSERT_TRUE(fa.ok()) << fa.status();
  EXPECT_THAT(fa->device_source,
              HasSubstr("Qs = reinterpret_cast<unsigned short*>(kiln_smem + "
                        "0);"));
  EXPECT_THAT(fa->device_source,
              HasSubstr("Os = reinterpret_cast<unsigned short*>(kiln_smem + "
                        "0);"));
  // Q 32 KiB, K and V 16 KiB each in two stages; no separate 32 KiB for O.
  EXPECT_THAT(fa->metadata, HasSubstr("shared-bytes 98304\n"));
}

// sm_90a: the corpus GEMM and attention (unedited) take the Hopper path by
// themselves (wgmma from 1024-byte-aligned swizzled panels), at the tile
// configurations the benchmarks and the autotuner use, with no spills and no
// ptxas C75xx warning (serialised wgmma).
TEST(CudaCodegenTest, Sm90aLowersCorpusGemmsToWgmmaWithoutSerialisation) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  struct Config {
    std::string file, kernel;
    std::map<std::string, int64_t> bindings;
    std::string accumulator;  // the layout line it must get
    bool tma = false;         // a warp-specialised TMA main loop
    int64_t block = 256;      // launched threads with the producer
    int tma_rank = 2;         // of the operands' tensor maps
    // Text replaced in the program first (the block size).
    std::string edit_from, edit_to;
  };
  const std::vector<Config> configs = {
      {"gemm.tile",
       "gemm",
       {{"BM", 128}, {"BN", 128}, {"BK", 64}, {"STAGES", 3}},
       "Acc: registers, wgmma accumulator [128, 128] over 1 warpgroups",
       true},
      {"gemm.tile",
       "gemm",
       {{"BM", 64}, {"BN", 256}, {"BK", 32}, {"STAGES", 4}},
       "Acc: registers, wgmma accumulator [64, 256]",
       true},
      {"gemm.tile",
       "gemm",
       {{"BM", 128}, {"BN", 64}, {"BK", 32}, {"STAGES", 4}},
       "Acc: registers, wgmma accumulator [128, 64]",
       true},
      {"gemm.tile",
       "gemm",
       {{"BM", 64}, {"BN", 64}, {"BK", 32}, {"STAGES", 2}},
       "Acc: registers, wgmma accumulator [64, 64]",
       true},
      {"gemm_fp8.tile",
       "gemm_fp8",
       {{"BM", 128}, {"BN", 128}, {"BK", 128}, {"STAGES", 3}},
       "Acc: registers, wgmma accumulator [128, 128] over 2 warpgroups",
       true,
       384},
      // 128 x 256: the product is promoted 128 columns at a time (the
      // whole product beside the accumulator would spill); 128 x 192: whole.
      {"gemm_fp8.tile",
       "gemm_fp8",
       {{"BM", 128}, {"BN", 256}, {"BK", 128}, {"STAGES", 3}},
       "Acc: registers, wgmma accumulator [128, 256] over 2 warpgroups",
       true,
       384},
      {"gemm_fp8.tile",
       "gemm_fp8",
       {{"BM", 128}, {"BN", 192}, {"BK", 128}, {"STAGES", 4}},
       "Acc: registers, wgmma accumulator [128, 192] over 2 warpgroups",
       true,
       384},
      {"gemm_bias_gelu.tile",
       "gemm_bias_gelu",
       {{"BM", 128}, {"BN", 128}, {"BK", 64}},
       "Acc: registers, wgmma accumulator [128, 128]",
       true},
      // Attention: the K/V ring becomes TMA (4-d tensor maps over BSHD)
      // with the softmax between the gemms run by the consumers.
      {"flash_attention_fwd.tile",
       "flash_attention_fwd",
       {{"BM", 64}, {"BN", 64}, {"STAGES", 2}},
       "acc_o: registers, wgmma accumulator [64, 128]",
       true,
       256,
       4},
      // One warpgroup over 128 rows: P does not fit in registers beside
      // the accumulators, so it goes through shared memory, which the
      // consumers' loop may not write without a barrier: cp.async ring.
      {"flash_attention_fwd.tile",
       "flash_attention_fwd_causal",
       {{"BM", 128}, {"BN", 64}, {"STAGES", 2}},
       "acc_s: registers, wgmma accumulator [128, 64]"},
      // Two consumer warpgroups of 64 rows each (ping-pong).
      {"flash_attention_fwd.tile",
       "flash_attention_fwd_causal",
       {{"BM", 128}, {"BN", 128}, {"STAGES", 2}},
       "acc_s: registers, wgmma accumulator [128, 128] over 2 warpgroups",
       true,
       384,
       4,
       "threads(128)",
       "threads(256)"},
  };
  for (const Config& c : configs) {
    SCOPED_TRACE(c.file + " " + c.kernel);
    CompileOptions o;
    o.target = "sm_90a";
    o.kernel = c.kernel;
    o.bindings = c.bindings;
    o.keep_ptx = true;
    std::string source =
        ReadFile(std::filesystem::path(KILN_CORPUS_DIR) / c.file);
    for (size_t at = c.edit_from.empty() ? std::string::npos
                                         : source.find(c.edit_from);
         at != std::string::npos;
         at = source.find(c.edit_from, at + c.edit_to.size())) {
      source.replace(at, c.edit_from.size(), c.edit_to);
    }
    if (!c.edit_from.empty()) {
      // (Attention's 128x128 score tile is outside the corpus bound.)
      const std::string bound = "BM * BN <= 8192";
      for (size_t at = source.find(bound); at != std::string::npos;
           at = source.find(bound, at + bound.size())) {
        source.replace(at, bound.size(), "BM * BN <= 16384");
      }
    }
    absl::StatusOr<CompiledKernel> out = Compile(source, o);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_THAT(out->layouts, HasSubstr(c.accumulator)) << out->layouts;
    EXPECT_THAT(out->layouts, HasSubstr("wgmma operand")) << out->layouts;
    EXPECT_THAT(out->ptx, HasSubstr("wgmma.mma_async.sync.aligned.m64n"));
    const bool attention = c.file == "flash_attention_fwd.tile";
    if (attention && c.tma) {
      // P stays in registers as the A operand of the second wgmma (at
      // BM = 128 it would not fit beside the accumulators: shared memory).
      EXPECT_THAT(out->layouts,
                  HasSubstr("acc_s_cast: registers, mma A operands packed"));
      EXPECT_THAT(out->device_source, HasSubstr("kiln::gemm_wg_rs<"));
      EXPECT_THAT(out->device_source, HasSubstr("kiln::acc_to_a_operand_wg<"));
    }
    if (c.file == "gemm_fp8.tile") {
      // k32 e4m3 wgmma, each tile's product promoted to the f32
      // accumulator (the first step of a tile overwrites: scale-d 0, the
      // product's registers written without being read or zeroed first).
      EXPECT_THAT(out->ptx, HasSubstr("k32.f32.e4m3.e4m3"));
      EXPECT_THAT(out->device_source, HasSubstr("kiln::gemm_wg_promoted<"));
      const int64_t bn = c.bindings.at("BN");
      // The instruction's wrapper is the device library's
      // (kiln/wgmma_instr.cuh): the descriptor form, whose mma_first
      // gemm_wg_promoted takes for a product's first step.
      const int64_t n = bn == 256 ? 128 : bn;
      EXPECT_THAT(out->device_source,
                  HasSubstr(absl::StrCat("KILN_WGMMA_SS(kiln_wgmma_m64n", n,
                                         "k32_e4m3_nn, ", n, ", ", n / 2,
                                         ", 32, e4m3, \"1, 1\");")));
      const std::string chunk = bn == 256 ? ", 128>" : ">";
      EXPECT_THAT(
          out->device_source,
          HasSubstr(absl::StrCat("gemm_wg_promoted<kiln_wgmma_m64n",
                                 bn == 256 ? 128 : bn, "k32_e4m3_nn, 128, ", bn,
                                 ", 128, 32, 2, false, true, As_L, "
                                 "Bs_L",
                                 chunk)));
      // Every wgmma of a stage has completed when the body ends (the
      // promotion waits): the stage is freed at once, not one iteration
      // later, and the two warpgroups issue without taking turns.
      EXPECT_THAT(out->device_source,
                  HasSubstr("kiln::mbar_arrive(&kiln_empty[kiln_slot]);"));
      EXPECT_THAT(out->device_source, Not(HasSubstr("wgmma_wait<1>")));
      EXPECT_THAT(out->ptx, Not(HasSubstr("bar.arrive")));
    }
    EXPECT_THAT(out->ptx, Not(HasSubstr("mma.sync.aligned.m16n8k16")));
    EXPECT_THAT(out->build_log, Not(HasSubstr("C75"))) << out->build_log;
    absl::StatusOr<runtime::KernelMetadata> md =
        runtime::ParseKernelMetadata(out->metadata);
    ASSERT_TRUE(md.ok()) << md.status();
    EXPECT_EQ(md->target, "sm_90a");
    EXPECT_EQ(md->ptxas.spill_stores, 0) << out->build_log;
    if (c.tma) {
      // A producer warpgroup beside the program's 128 threads, one tensor
      // map per operand, TMA loads on mbarriers; the cp.async ring stays
      // as the fallback for tensors TMA cannot describe.
      EXPECT_EQ(md->block[0].AsConstant(), c.block);
      // A GEMM is persistent: the resident blocks walk the tiles, so that
      // a tile's epilogue overlaps the producer's loads for the next. So
      // is attention over two consumer warpgroups (a block fills an SM);
      // with one, several blocks share an SM and overlap one another.
      const bool two_wg_attention = attention && c.block == 384;
      EXPECT_EQ(md->persistent, !attention || two_wg_attention);
      // And one for the output: the accumulator goes to it through shared
      // memory (stmatrix) and TMA stores, straight from the accumulator
      // where the program staged it in a shared tile of its own (fp8,
      // attention: that tile is not allocated). Persistent attention has
      // one more, for Q, which its producer loads per tile.
      EXPECT_EQ(md->tensor_maps.size(), two_wg_attention ? 4u : 3u);
      if (two_wg_attention) {
        const std::string& src = out->device_source;
        // Q in two slots (128x128 with two K/V stages leaves room), the
        // next tile's going out while this one's is read; a slot is freed
        // after the last iteration's Q K^T.
        EXPECT_THAT(src, HasSubstr("Qs loaded by the producer (TMA) for each "
                                   "tile"));
        EXPECT_THAT(src, HasSubstr("constexpr int kiln_qslots = 2;"));
        EXPECT_THAT(src,
                    HasSubstr("kiln::wgmma_wait<0>();\n        if (k == "
                              "kiln_hi - 1 && threadIdx.x % 32 == 0) "
                              "kiln::mbar_arrive(&kiln_qempty[(kiln_q - 1) % "
                              "kiln_qslots]);"));
        // Causal work grows with x: each block walks mirrored pairs.
        EXPECT_THAT(src, HasSubstr("bx = kiln_t % 2 ? kiln_p : kiln_grid0 - 1 "
                                   "- kiln_p;"));
        // No consumer barrier between tiles on the TMA path.
        EXPECT_THAT(src, HasSubstr("if (!kiln_tma) {\n    "
                                   "kiln::fence_proxy_async();"));
        // O /= logsum: one reciprocal per row register (two per thread),
        // not a division per element.
        EXPECT_THAT(src, HasSubstr("* kiln::rcp_rn(logsum[acc_o_L::row_reg("));
        size_t rcp = 0;
        for (size_t at = out->ptx.find("rcp.rn.f32"); at != std::string::npos;
             at = out->ptx.find("rcp.rn.f32", at + 1)) {
          ++rcp;
        }
        EXPECT_EQ(rcp, 2u);
        EXPECT_THAT(out->ptx, Not(HasSubstr("div.rn.f32")));
      }
      if (c.file != "gemm.tile") {
        EXPECT_THAT(out->device_source,
                    ::testing::ContainsRegex("// [A-Za-z]s: not allocated"));
      }
      EXPECT_THAT(out->ptx, HasSubstr("stmatrix.sync.aligned.m8n8.x4"));
      EXPECT_THAT(out->ptx, HasSubstr("cp.async.bulk.tensor." +
                                      std::to_string(c.tma_rank) +
                                      "d.global.shared::cta"));
      EXPECT_THAT(out->ptx, HasSubstr("cp.async.bulk.tensor." +
                                      std::to_string(c.tma_rank) + "d"));
      EXPECT_THAT(out->ptx, HasSubstr("mbarrier.try_wait.parity"));
      EXPECT_THAT(out->ptx, HasSubstr("cp.async.cg.shared.global"));
    } else {
      EXPECT_EQ(md->block[0].AsConstant(), 128);
      EXPECT_TRUE(md->tensor_maps.empty());
      EXPECT_FALSE(md->persistent);
    }
    // Attention with one warpgroup (registers to spare) is
    // software-pipelined: iteration k issues S = Q K^T, then P V of
    // iteration k - 1, and waits for S alone (wgmma_wait<1>) before the
    // softmax; K and V have barriers of their own, K freed once S has
    // completed, V once P V has. Two warpgroups of 128x128 fragments keep
    // the plain order: each gemm waited for at once, one barrier per stage
    // freed when the iteration ends.
    if (attention && c.tma) {
      const bool pipelined = c.block == 256;
      EXPECT_EQ(
          out->device_source.find("software-pipelined") != std::string::npos,
          pipelined);
      if (pipelined) {
        EXPECT_THAT(out->device_source,
                    HasSubstr("unsigned long long kiln_full[4], "
                              "kiln_empty[4];"));
        EXPECT_THAT(out->device_source,
                    HasSubstr("kiln::wgmma_wait<1>();\n          "
                              "kiln::wgmma_fence_operands(acc_s);\n     "
                              "     if (threadIdx.x % 32 == 0) "
                              "kiln::mbar_arrive(&kiln_empty[0 + "
                              "kiln_slot]);"));
        EXPECT_THAT(out->device_source,
                    HasSubstr("kiln::mbar_wait(&kiln_full[2 + (kiln_it + 1) "
                              "% 2], ((kiln_it - 1) / 2) & 1);"));
      } else {
        EXPECT_THAT(out->device_source,
                    HasSubstr("unsigned long long kiln_full[2], "
                              "kiln_empty[2];"));
        EXPECT_THAT(out->device_source,
                    HasSubstr("kiln::wgmma_wait<0>();\n        if "
                              "(threadIdx.x % 32 == 0) "
                              "kiln::mbar_arrive(&kiln_empty[kiln_slot]);"));
      }
    }
  }
}

// The software-pipelined attention loop runs the rescale and P V of
// iteration k - 1 inside iteration k; where they use the loop variable or
// a let of the body, the loop keeps its order (and still compiles, warp-
// specialised).
TEST(CudaCodegenTest, PipelinedLoopKeepsOrderWhenTheLatePartUsesTheIteration) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  const std::string corpus = ReadFile(std::filesystem::path(KILN_CORPUS_DIR) /
                                      "flash_attention_fwd.tile");
  const std::string rescale = "acc_o[io, jo] *= scores_scale[io]";
  auto edited = [&](const std::string& with, const std::string& prelude) {
    std::string src = corpus;
    for (size_t at = src.find(rescale); at != std::string::npos;
         at = src.find(rescale, at + with.size())) {
      src.replace(at, rescale.size(), with);
    }
    const std::string head = "    copy K[bz, k * BN:+BN, by, :] -> Ks\n";
    for (size_t at = src.find(head);
         at != std::string::npos && !prelude.empty();
         at = src.find(head, at + head.size() + prelude.size())) {
      src.insert(at + head.size(), prelude);
    }
    return src;
  };
  CompileOptions o;
  o.target = "sm_90a";
  o.kernel = "flash_attention_fwd";
  o.bindings = {{"BM", 64}, {"BN", 64}, {"STAGES", 2}};
  absl::StatusOr<CompiledKernel> base = Compile(corpus, o);
  ASSERT_TRUE(base.ok()) << base.status();
  EXPECT_THAT(base->device_source, HasSubstr("software-pipelined"));
  for (const std::string& src :
       {edited("acc_o[io, jo] *= scores_scale[io] * f32(min(k, 1) + 1 - "
               "min(k, 1))",
               ""),
        edited("acc_o[io, jo] *= scores_scale[io] * one",
               "    let one = "
               "1.0\n")}) {
    absl::StatusOr<CompiledKernel> out = Compile(src, o);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_THAT(out->device_source, Not(HasSubstr("software-pipelined")));
    EXPECT_THAT(out->device_source, HasSubstr("consumers: wait for the "
                                              "stage's TMA loads, run the "
                                              "body"));
    EXPECT_THAT(out->build_log, Not(HasSubstr("C75"))) << out->build_log;
  }
}

// Two consumer warpgroups and the producer (384 threads): the producer
// gives registers back with setmaxnreg so that each consumer can hold a
// 64x256 f32 accumulator, and ptxas honours it (no C7508).
// The corpus GEMM over two consumer warpgroups (threads(256)) for sm_90a,
// 128 x 256 tiles, with C of type `c_type`.
absl::StatusOr<CompiledKernel> CompileTwoWarpgroupGemm(
    int64_t bk, int64_t stages, const std::string& c_type = "f16") {
  std::string source =
      ReadFile(std::filesystem::path(KILN_CORPUS_DIR) / "gemm.tile");
  source.replace(source.find("threads(128)"), 12, "threads(256)");
  source.replace(source.find("C: f16"), 6, "C: " + c_type);
  CompileOptions o;
  o.target = "sm_90a";
  o.bindings = {{"BM", 128}, {"BN", 256}, {"BK", bk}, {"STAGES", stages}};
  o.keep_ptx = true;
  return Compile(source, o);
}

TEST(CudaCodegenTest, TwoConsumerWarpgroupsRebalanceRegisters) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  absl::StatusOr<CompiledKernel> out = CompileTwoWarpgroupGemm(32, 4);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->layouts,
              HasSubstr("Acc: registers, wgmma accumulator [128, 256] over 2 "
                        "warpgroups, 128 per thread"));
  EXPECT_THAT(out->ptx, HasSubstr("setmaxnreg.dec.sync.aligned.u32 40"));
  EXPECT_THAT(out->ptx, HasSubstr("setmaxnreg.inc.sync.aligned.u32 232"));
  EXPECT_THAT(out->build_log, Not(HasSubstr("C75"))) << out->build_log;
  absl::StatusOr<runtime::KernelMetadata> md =
      runtime::ParseKernelMetadata(out->metadata);
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_EQ(md->block[0].AsConstant(), 384);
  EXPECT_EQ(md->ptxas.spill_stores, 0) << out->build_log;
}

// setmaxnreg.inc waits until the registers it asks for are free in the
// block's own allocation (ptxas's count per thread, times the block):
// the producer's decrease and the consumers' increase must stay within it,
// or the kernel hangs. Two and four consumer warpgroups.
TEST(CudaCodegenTest, RegisterRebalanceStaysWithinTheLaunchAllocation) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  for (const auto& [threads, bm, bk] :
       std::vector<std::tuple<int, int, int>>{{256, 128, 64}, {512, 256, 32}}) {
    SCOPED_TRACE(threads);
    std::string source =
        ReadFile(std::filesystem::path(KILN_CORPUS_DIR) / "gemm.tile");
    source.replace(source.find("threads(128)"), 12,
                   "threads(" + std::to_string(threads) + ")");
    CompileOptions o;
    o.target = "sm_90a";
    o.bindings = {{"BM", bm}, {"BN", 128}, {"BK", bk}, {"STAGES", 3}};
    o.keep_ptx = true;
    absl::StatusOr<CompiledKernel> out = Compile(source, o);
    ASSERT_TRUE(out.ok()) << out.status();
    absl::StatusOr<runtime::KernelMetadata> md =
        runtime::ParseKernelMetadata(out->metadata);
    ASSERT_TRUE(md.ok()) << md.status();
    auto value = [&](const std::string& op) {
      const std::string key = "setmaxnreg." + op + ".sync.aligned.u32 ";
      const size_t at = out->ptx.find(key);
      EXPECT_NE(at, std::string::npos) << op;
      return at == std::string::npos
                 ? 0
                 : std::stoi(out->ptx.substr(at + key.size()));
    };
    const int dec = value("dec"), inc = value("inc");
    EXPECT_GT(inc, dec);
    EXPECT_EQ(md->block[0].AsConstant(), threads + 128);
    EXPECT_LE(128 * dec + threads * inc, md->ptxas.registers * (threads + 128))
        << "dec " << dec << " inc " << inc << " launch " << md->ptxas.registers;
  }
}

// The warp-specialised GEMM's epilogue: each consumer warpgroup writes its
// rows of the accumulator to shared memory with stmatrix (128-byte
// swizzle) and one thread stores them with TMA, 64 x 64 at a time, from a
// tensor map of C the runtime builds (box 64 x 64). An f32 C keeps the
// register stores.
TEST(CudaCodegenTest, GemmEpilogueStoresThroughTma) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  absl::StatusOr<CompiledKernel> out = CompileTwoWarpgroupGemm(32, 2);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->device_source, HasSubstr("kiln::r2g_acc_tma<"));
  EXPECT_THAT(out->ptx, HasSubstr("stmatrix.sync.aligned.m8n8.x4.shared.b16"));
  EXPECT_THAT(out->ptx,
              HasSubstr("cp.async.bulk.tensor.2d.global.shared::cta"));
  EXPECT_THAT(out->ptx, HasSubstr("cp.async.bulk.wait_group 0"));
  EXPECT_THAT(out->build_log, Not(HasSubstr("C75"))) << out->build_log;
  absl::StatusOr<runtime::KernelMetadata> md =
      runtime::ParseKernelMetadata(out->metadata);
  ASSERT_TRUE(md.ok()) << md.status();
  ASSERT_EQ(md->tensor_maps.size(), 3u);
  EXPECT_EQ(md->tensor_maps[2].param, "C");
  EXPECT_EQ(md->tensor_maps[2].swizzle, 128);
  EXPECT_EQ(md->tensor_maps[2].box, (std::vector<int64_t>{64, 64}));
  // The staging chunks: 2 x 8 KiB per consumer warpgroup past the ring.
  EXPECT_EQ(md->shared_bytes, 2 * (128 * 32 + 32 * 256) * 2 + 32768 + 1024);
  EXPECT_EQ(md->ptxas.spill_stores, 0) << out->build_log;

  absl::StatusOr<CompiledKernel> plain = CompileTwoWarpgroupGemm(32, 2, "f32");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_THAT(plain->device_source, Not(HasSubstr("r2g_acc_tma")));
  EXPECT_THAT(plain->device_source, HasSubstr("kiln::r2g_acc<float"));
}

// Where the shared-memory plan leaves no room for the Hopper extras, the
// emitter prints what the plan says: two-warpgroup causal attention with
// three K/V stages fills 224 KiB with its tiles, so the accumulator is
// stored from registers (no staging chunks, no tensor map of O) and Q has
// one slot; the kernel launches with the plan's bytes.
TEST(CudaCodegenTest, NoRoomLeftKeepsTheRegisterStoresAndOneQSlot) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  // (Two warpgroups over a 128 x 128 score tile, outside the corpus bound.)
  const std::string source = absl::StrReplaceAll(
      ReadFile(std::filesystem::path(KILN_CORPUS_DIR) /
               "flash_attention_fwd.tile"),
      {{"threads(128)", "threads(256)"},
       {"BM * BN <= 8192", "BM * BN <= 16384"},
       {"tune STAGES in [1, 2]", "tune STAGES in [1, 2, 3]"}});
  for (const auto& [stages, room] :
       std::vector<std::pair<int64_t, bool>>{{2, true}, {3, false}}) {
    SCOPED_TRACE(stages);
    CompileOptions o;
    o.target = "sm_90a";
    o.kernel = "flash_attention_fwd_causal";
    o.bindings = {{"BM", 128}, {"BN", 128}, {"STAGES", stages}};
    absl::StatusOr<CompiledKernel> out = Compile(source, o);
    ASSERT_TRUE(out.ok()) << out.status();
    absl::StatusOr<runtime::KernelMetadata> md =
        runtime::ParseKernelMetadata(out->metadata);
    ASSERT_TRUE(md.ok()) << md.status();
    // Q, K, V and (with room) O.
    EXPECT_EQ(md->tensor_maps.size(), room ? 4u : 3u);
    EXPECT_EQ(out->device_source.find("r2g_acc_tma") != std::string::npos,
              room);
    EXPECT_THAT(out->device_source,
                HasSubstr(absl::StrCat(
                    "constexpr int kiln_qslots = ", room ? 2 : 1, ";")));
    // Q, then K and V with their stages (32 KiB each), then the extras.
    const int64_t tiles = 32768 * (1 + 2 * stages);
    EXPECT_EQ(md->shared_bytes, tiles + (room ? 32768 + 32768 : 0) + 1024);
  }
}

// The FP8 GEMM asks for cluster(2, 1, 1): its persistent blocks walk the
// tiles in pairs along x, each loading half of the A tile (a tensor map of
// half the rows) and multicasting it to both; each consumer warp frees a
// stage in both blocks; the pair meets at a cluster barrier after setup
// and before leaving. The producer keeps enough registers for that (no
// spills). GEMMs that do not ask, or kernels that are not persistent
// (attention), launch without clusters.
TEST(CudaCodegenTest, Fp8GemmPairsBlocksInClustersWithMulticast) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  CompileOptions o;
  o.target = "sm_90a";
  o.bindings = {{"BM", 128}, {"BN", 128}, {"BK", 128}, {"STAGES", 4}};
  o.keep_ptx = true;
  absl::StatusOr<CompiledKernel> out = Compile(
      ReadFile(std::filesystem::path(KILN_CORPUS_DIR) / "gemm_fp8.tile"), o);
  ASSERT_TRUE(out.ok()) << out.status();
  absl::StatusOr<runtime::KernelMetadata> md =
      runtime::ParseKernelMetadata(out->metadata);
  ASSERT_TRUE(md.ok()) << md.status();
  EXPECT_EQ(md->cluster[0].AsConstant(), 2);
  EXPECT_TRUE(md->persistent);
  ASSERT_GE(md->tensor_maps.size(), 2u);
  EXPECT_EQ(md->tensor_maps[0].param, "A");
  EXPECT_EQ(md->tensor_maps[0].box, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(md->tensor_maps[1].box, (std::vector<int64_t>{128, 128}));
  EXPECT_THAT(out->ptx, HasSubstr(".multicast::cluster"));
  EXPECT_THAT(out->ptx, HasSubstr("mapa.shared::cluster"));
  EXPECT_THAT(out->ptx, HasSubstr("barrier.cluster.arrive"));
  EXPECT_THAT(out->device_source, HasSubstr("kiln_t += gridDim.x / 2"));
  EXPECT_THAT(out->build_log, Not(HasSubstr("C75"))) << out->build_log;
  EXPECT_EQ(md->ptxas.spill_stores, 0) << out->build_log;

  o.bindings = {{"BM", 128}, {"BN", 128}, {"BK", 64}, {"STAGES", 3}};
  absl::StatusOr<CompiledKernel> gemm = Compile(
      ReadFile(std::filesystem::path(KILN_CORPUS_DIR) / "gemm.tile"), o);
  ASSERT_TRUE(gemm.ok()) << gemm.status();
  absl::StatusOr<runtime::KernelMetadata> plain =
      runtime::ParseKernelMetadata(gemm->metadata);
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->cluster[0].AsConstant(), 1);
  EXPECT_THAT(gemm->ptx, Not(HasSubstr("multicast")));

  // A program's cluster(...) on a kernel that is not persistent.
  std::string attention = ReadFile(std::filesystem::path(KILN_CORPUS_DIR) /
                                   "flash_attention_fwd.tile");
  attention.replace(attention.find("threads(128)"), 12,
                    "threads(128) cluster(2, 1, 1)");
  o.kernel = "flash_attention_fwd";
  o.bindings = {{"BM", 64}, {"BN", 64}, {"STAGES", 2}};
  absl::StatusOr<CompiledKernel> fa = Compile(attention, o);
  ASSERT_TRUE(fa.ok()) << fa.status();
  absl::StatusOr<runtime::KernelMetadata> fa_md =
      runtime::ParseKernelMetadata(fa->metadata);
  ASSERT_TRUE(fa_md.ok()) << fa_md.status();
  EXPECT_EQ(fa_md->cluster[0].AsConstant(), 1);
}

TEST(CudaCodegenTest, Sm90KeepsTheMmaSyncPath) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  CompileOptions o;
  o.target = "sm_90";
  o.bindings = {{"BM", 64}};
  o.keep_ptx = true;
  absl::StatusOr<CompiledKernel> out = Compile(kGemm, o);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->ptx, HasSubstr("mma.sync.aligned.m16n8k16"));
  EXPECT_THAT(out->ptx, Not(HasSubstr("wgmma")));
}

TEST(CudaCodegenTest, SharedMemoryOverTheArchLimitIsAnError) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  CompileOptions o;
  o.target = "sm_86";
  // A 256x256 f32 accumulator is too big for registers: 256 KiB of shared.
  o.bindings = {{"BM", 256}};
  absl::StatusOr<CompiledKernel> out = Compile(kGemm, o);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("bytes of shared memory"));
}

TEST(CudaCodegenTest, PagedLoadsComeFromTheTmaProducer) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  // Paged decode with 64-row head tiles, four stages: each chunk's page is
  // read from the block table by the producer, which loads the chunk by TMA
  // at that page (checked on an H100: the GPU corpus case bh64).
  const std::string paged =
      ReadFile(std::filesystem::path(KILN_CORPUS_DIR) / "paged_decode.tile");
  CompileOptions o;
  o.target = "sm_90a";
  o.kernel = "paged_decode_split";
  o.bindings = {{"BH", 64}, {"BN", 64}, {"STAGES", 4}};
  absl::StatusOr<CompiledKernel> out = Compile(paged, o);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->plan, HasSubstr("warp-specialised TMA ring over loop c"));
  EXPECT_THAT(out->plan, HasSubstr("per iteration   page, off"));
  const std::string& src = out->device_source;
  const size_t producer = src.find("if (threadIdx.x >= 128)");
  const size_t consumers = src.find("kiln::consumer_sync<128>();");
  ASSERT_NE(producer, std::string::npos);
  ASSERT_NE(consumers, std::string::npos);
  const std::string prod = src.substr(producer, consumers - producer);
  EXPECT_THAT(prod, HasSubstr("const int page = "));
  EXPECT_THAT(prod, HasSubstr("BlockTable["));
  // The consumers synchronise among themselves: a block barrier would
  // wait for the producer, which has left.
  EXPECT_THAT(src.substr(consumers), Not(HasSubstr("__syncthreads()")));

  // MLA decode: the producer beside two column-split consumer warpgroups
  // whose row statistics meet in shared scratch (matched the CPU target on
  // an H100 once a tile's two preloads shared one slot: NOTES step 47).
  const std::string mla =
      ReadFile(std::filesystem::path(KILN_CORPUS_DIR) / "mla_decode.tile");
  o.kernel = "mla_decode_split";
  o.bindings = {{"BN", 32}, {"STAGES", 2}, {"H", 128}, {"NS", 1}};
  absl::StatusOr<CompiledKernel> split = Compile(mla, o);
  ASSERT_TRUE(split.ok()) << split.status();
  EXPECT_THAT(split->plan, HasSubstr("warp-specialised TMA ring over loop c"));
  EXPECT_THAT(split->plan,
              HasSubstr("warpgroups      2 consumer + 1 producer"));
  EXPECT_THAT(split->plan, HasSubstr("per-tile loads  Qs, QPes"));
  EXPECT_THAT(split->device_source, HasSubstr("kiln::regs_dec<"));
}

// A persistent warp-specialised kernel that loads two tiles per walk tile
// ahead of its loop (the producer's per-tile loads, as MLA's Qs and QPes):
// both belong to one tile, one slot and one barrier phase, so the
// consumers count the tile once. (Counting each load as a tile sent the
// second to the next tile's slot, which a block's last tile never fills:
// MLA hung on an H100 that way, bench/gpu/NOTES.md step 47.)
TEST(CudaCodegenTest, ATilesPreloadsShareOneSlot) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  const std::string text = R"(
kernel latent_decode(Q: bf16[B, H, 192], KV: bf16[P, PS, 192],
                     Table: i32[B, MAXP], Lens: i32[B], O: f32[B, H, 128])
  assume PS >= 1
  grid(ceildiv(H, 64), B) threads(256) (hx, b) {
  alloc shared Qn: bf16[64, 128]
  alloc shared Qr: bf16[64, 64]
  alloc shared Kn: bf16[64, 128]
  alloc shared Kr: bf16[64, 64]
  alloc fragment s: f32[64, 64]
  alloc fragment p: bf16[64, 64]
  alloc fragment acc: f32[64, 128]
  let len = Lens[b]
  let chunks = ceildiv(PS, 64)
  let total = ceildiv(len, PS) * chunks
  copy Q[b, hx * 64:+64, 0:+128] -> Qn
  copy Q[b, hx * 64:+64, 128:+64] -> Qr
  fill acc, 0
  for c in pipelined(0, total, stages=2) {
    let page = Table[b, c / chunks]
    let off = c % chunks * 64
    copy KV[page, off:+64, 0:+128] -> Kn
    copy KV[page, off:+64, 128:+64] -> Kr
    gemm Qn, Kn -> s transpose_b clear_accum
    gemm Qr, Kr -> s transpose_b
    copy s -> p
    gemm p, Kn -> acc
  }
  copy acc -> O[b, hx * 64:+64, :]
}
)";
  CompileOptions o;
  o.target = "sm_90a";
  absl::StatusOr<CompiledKernel> out = Compile(text, o);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->plan, HasSubstr("per-tile loads  Qn, Qr"));
  EXPECT_THAT(out->plan, HasSubstr("persistent      yes"));
  const std::string& src = out->device_source;
  const size_t consumers = src.find("kiln::regs_inc<");
  ASSERT_NE(consumers, std::string::npos);
  const std::string cons = src.substr(consumers);
  auto count = [](const std::string& hay, const std::string& needle) {
    int n = 0;
    for (size_t at = hay.find(needle); at != std::string::npos;
         at = hay.find(needle, at + 1)) {
      ++n;
    }
    return n;
  };
  // Both loads wait on the tile's barrier; the tile count moves once.
  EXPECT_EQ(count(cons,
                  "kiln::mbar_wait(&kiln_qfull[kiln_q % kiln_qslots], "
                  "(kiln_q / kiln_qslots) & 1);"),
            2);
  EXPECT_EQ(count(cons, "++kiln_q;"), 1);
  // The producer begins a tile once per tile too (in the loop, or with no
  // iterations).
  EXPECT_EQ(count(src.substr(0, consumers), "++kiln_q;"), 2);
}

// A fragment the plan keeps in shared memory (a region of it is copied
// out), updated from its own value over the rows of a column-split
// accumulator: every row has a copy in each lane of its quad and in each
// column slice, and only one of them may read-modify-write the shared
// element (DSL MLA's running sum `l_run` was updated by every copy, a race
// between the warpgroups).
TEST(CudaCodegenTest, ASharedFragmentRowIsUpdatedByOneCopy) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  const std::string text = R"(
kernel rows(A: bf16[64, 64], B: bf16[512, 64], O: f32[64, 512], G: f32[16])
  grid(1) threads(256) (bx) {
  alloc shared a: bf16[64, 64]
  alloc shared b: bf16[512, 64]
  alloc fragment acc: f32[64, 512]
  alloc fragment m: f32[64]
  alloc fragment l: f32[64]
  copy A -> a
  copy B -> b
  fill l, 1
  gemm a, b -> acc transpose_b clear_accum policy=full_col
  reduce.max acc -> m, dim=1
  parallel (i) in (64) {
    l[i] = l[i] * 2 + m[i]
  }
  parallel (r, c) in (64, 512) {
    acc[r, c] = acc[r, c] / l[r]
  }
  copy acc -> O
  copy l[0:+16] -> G
}
)";
  CompileOptions o;
  o.target = "sm_90a";
  absl::StatusOr<CompiledKernel> out = Compile(text, o);
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(out->plan, HasSubstr("l: shared (fragment)"));
  EXPECT_THAT(out->plan, HasSubstr("a copy in each of 2 column slices"));
  const std::string& src = out->device_source;
  const size_t store = src.find("l[(i)] = ((l[(i)] * ");
  ASSERT_NE(store, std::string::npos);
  const size_t guard =
      src.rfind("if ((threadIdx.x & 3) == 0 && m_L::first_slice())", store);
  ASSERT_NE(guard, std::string::npos);
  EXPECT_EQ(src.find('}', guard), src.find('}', store));  // (same block)
}

TEST(CudaCodegenTest, KeyDependsOnTargetAndToolchainNamesDeviceLibrary) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  CompileOptions o;
  o.bindings = {{"BM", 64}};
  o.target = "sm_80";
  auto k80 = BinaryKey(kGemm, o);
  o.target = "sm_90";
  auto k90 = BinaryKey(kGemm, o);
  ASSERT_TRUE(k80.ok() && k90.ok());
  EXPECT_NE(*k80, *k90);
  auto id = CudaToolchainIdentity("sm_90a");
  ASSERT_TRUE(id.ok());
  EXPECT_THAT(*id, HasSubstr("sm_90a kiln-device-" +
                             cuda::DeviceHeadersHash().substr(0, 16)));
  EXPECT_THAT(*id, HasSubstr("nvrtc-"));
}

TEST(CudaCodegenTest, DeviceHeadersAreEmbedded) {
  std::vector<std::string> names;
  for (const cuda::DeviceHeader& h : cuda::DeviceHeaders()) {
    names.push_back(h.name);
    EXPECT_GT(std::string(h.text).size(), 100u) << h.name;
  }
  EXPECT_THAT(names,
              ::testing::IsSupersetOf(
                  {"kiln/kiln.cuh", "kiln/mma.cuh", "kiln/global_to_shared.cuh",
                   "kiln/shared_to_register.cuh", "kiln/reduce.cuh"}));
  EXPECT_EQ(cuda::DeviceHeadersHash().size(), 64u);
}

TEST(CudaCodegenTest, NvrtcErrorNamesGeneratedLineAndTileStatement) {
  if (!HaveNvrtc()) GTEST_SKIP() << "NVRTC is not installed on this host";
  const std::string src =
      "#include \"kiln/kiln.cuh\"\n"
      "extern \"C\" __global__ void kiln_bad(float* x) {\n"
      "  // tile 7:3\n"
      "  x[0] = undefined_thing;\n"
      "}\n";
  auto out = cuda::CompileToCubin(src, "kiln_bad.cu", "sm_80", false);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out.status().message(), HasSubstr("kiln_bad.cu(4): error"));
  EXPECT_THAT(out.status().message(),
              HasSubstr("generated line 4 |   x[0] = undefined_thing;"));
  EXPECT_THAT(out.status().message(),
              HasSubstr("tile-IR statement at line:col 7:3"));
}

TEST(CudaCodegenTest, PtxasReportIsParsed) {
  cuda::PtxasInfo info = cuda::ParsePtxasLog(
      "ptxas info    : Compiling entry function 'kiln_g' for 'sm_80'\n"
      "ptxas info    : Function properties for kiln_g\n"
      "    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n"
      "ptxas info    : Used 168 registers, used 1 barriers, 1024 bytes smem, "
      "380 bytes cmem[0]\n");
  EXPECT_EQ(info.registers, 168);
  EXPECT_EQ(info.stack_bytes, 16);
  EXPECT_EQ(info.spill_stores, 8);
  EXPECT_EQ(info.spill_loads, 4);
  EXPECT_EQ(info.static_shared_bytes, 1024);
}

TEST(CudaCodegenTest, UnknownTargetListsCudaTargets) {
  CompileOptions o;
  o.target = "sm_75";
  o.bindings = {{"BM", 64}};
  auto out = Compile(kGemm, o);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("sm_80, sm_86, sm_89, sm_90"));
}

}  // namespace
}  // namespace kiln::compiler
