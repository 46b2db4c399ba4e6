// The GPU planning passes (compiler/codegen/gpu/planners.h), no toolchain
// needed:
// - the facts they decide from: loop bounds through lets, and how a bound
//   moves along a block index, proven (composition, then the prover);
// - each planner's decision on small programs;
// - phrasing invariance: every spelling of one kernel in
//   tests/codegen/phrasings/NAME/ (constant or symbolic shapes, let-bound or
//   inline bounds, min(ceildiv) or ceildiv(min), and the Python DSL's IR of
//   the TileLang wording, tests/python/goldens/) plans the same on every
//   GPU target, and that plan matches plan_golden/NAME.TARGET.plan;
// - plan goldens of the corpus GEMMs, attention and paged decode kernels.
// KILN_UPDATE_GOLDENS=1 rewrites the goldens instead of comparing.
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "compiler/codegen/gpu/kernel_plan.h"
#include "compiler/codegen/gpu/trip_trend.h"
#include "compiler/compile.h"
#include "compiler/ir/parser.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/compiler/corpus_util.h"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

const char* const kTargets[] = {"sm_80", "sm_90a", "gfx90a"};

// The plan of the only (or named) kernel of `text` for `target`.
absl::StatusOr<std::string> PlanOf(const std::string& text,
                                   const std::string& target,
                                   std::map<std::string, int64_t> bind = {},
                                   const std::string& kernel = "") {
  CompileOptions o;
  o.target = target;
  o.kernel = kernel;
  o.bindings = std::move(bind);
  o.plan_only = true;
  auto k = Compile(text, o);
  if (!k.ok()) return k.status();
  return k->plan;
}

// ------------------------------------------------------------ facts

// The first top-level loop's stop of `text`'s only kernel, resolved, and
// how it moves along x.
gpu::Trend StopTrend(const std::string& text) {
  ParseResult parsed = Parse(text);
  EXPECT_TRUE(parsed.ok()) << text;
  if (parsed.program.kernels.empty()) return gpu::Trend::kUnknown;
  const Kernel& k = parsed.program.kernels[0];
  for (const Stmt& s : k.body) {
    if (auto* f = std::get_if<ForStmt>(&s.node)) {
      const Expr stop = gpu::ResolveLets(f->stop, gpu::TopLevelLets(k, &s));
      return gpu::TrendAlongBlock(k, stop, k.block_vars[0]);
    }
  }
  ADD_FAILURE() << "no loop";
  return gpu::Trend::kUnknown;
}

std::string LoopKernel(const std::string& lets, const std::string& stop) {
  return "kernel k(X: f32[S, 64]) grid(ceildiv(S, 64), 4) threads(64) (bx, "
         "by) {\n  alloc fragment t: f32[64]\n" +
         lets + "  for i in serial(" + stop +
         ") {\n    copy X[bx * 64:+64, 0] -> t\n  }\n}\n";
}

TEST(TripTrendTest, ComposesMonotoneForms) {
  using gpu::Trend;
  EXPECT_EQ(StopTrend(LoopKernel("", "ceildiv(min(S, (bx + 1) * 64), 32)")),
            Trend::kRising);
  EXPECT_EQ(StopTrend(LoopKernel(
                "", "min(ceildiv(S, 32), ceildiv((bx + 1) * 64, 32))")),
            Trend::kRising);
  EXPECT_EQ(StopTrend(LoopKernel("", "ceildiv(S, 32)")), Trend::kConstant);
  EXPECT_EQ(StopTrend(LoopKernel("", "S - bx * 64")), Trend::kFalling);
  EXPECT_EQ(StopTrend(LoopKernel("", "by + 3")), Trend::kConstant);
}

TEST(TripTrendTest, LetBoundBoundsResolve) {
  using gpu::Trend;
  EXPECT_EQ(
      StopTrend(LoopKernel("  let n = min(ceildiv(S, 32), ceildiv((bx + 1) * "
                           "64, 32))\n",
                           "n")),
      Trend::kRising);
  // Chained lets, the later one over the earlier.
  EXPECT_EQ(StopTrend(LoopKernel(
                "  let hi = min(S, (bx + 1) * 64)\n  let n = ceildiv(hi, 32)\n",
                "n")),
            Trend::kRising);
  EXPECT_EQ(StopTrend(LoopKernel("  let n = ceildiv(S, 32)\n", "n")),
            Trend::kConstant);
}

TEST(TripTrendTest, TheProverDecidesWhatCompositionCannot) {
  using gpu::Trend;
  // (bx + 1) * 64 - bx * 32 rises, though it is a difference of two rising
  // terms.
  EXPECT_EQ(StopTrend(LoopKernel("", "(bx + 1) * 64 - bx * 32")),
            Trend::kRising);
  EXPECT_EQ(StopTrend(LoopKernel("", "bx * 32 - bx * 64 + S")),
            Trend::kFalling);
}

TEST(TripTrendTest, DataDependentBoundsAreUnknown) {
  const std::string text =
      "kernel k(X: f32[S, 64], L: i32[S]) grid(ceildiv(S, 64)) threads(64) "
      "(bx) {\n  alloc fragment t: f32[64]\n  let n = L[bx]\n  for i in "
      "serial(n) {\n    copy X[bx * 64:+64, 0] -> t\n  }\n}\n";
  EXPECT_EQ(StopTrend(text), gpu::Trend::kUnknown);
}

// ------------------------------------------------------------ planners

// TileLang's causal attention (the DSL's IR, tests/python/goldens) with
// `from` replaced by `to`.
// A test file's text with its first `from` replaced by `to`.
std::string FileWith(const fs::path& path, const std::string& from,
                     const std::string& to) {
  std::string text = testing::ReadFileOrDie(path);
  if (!from.empty()) {
    EXPECT_TRUE(testing::ReplaceFirst(&text, from, to));
  }
  return text;
}

std::string Attention(const std::string& from = "",
                      const std::string& to = "") {
  return FileWith(testing::TestDataDir().parent_path() / "python" / "goldens" /
                      "attention_causal_tilelang.tile",
                  from, to);
}

TEST(PlanKernelTest, TileLangCausalAttentionTakesTheHopperPath) {
  auto plan = PlanOf(Attention(), "sm_90a");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr("warp-specialised TMA ring over loop k"));
  EXPECT_THAT(*plan, HasSubstr("persistent      yes"));
  EXPECT_THAT(*plan, HasSubstr("walk            mirrored-pairs-x"));
  EXPECT_THAT(*plan, HasSubstr("along x         start constant, stop rising"));
  EXPECT_THAT(*plan, HasSubstr("per-tile loads  Q_shared"));
  EXPECT_THAT(*plan, HasSubstr("ring tiles      K_shared, V_shared"));
  EXPECT_THAT(*plan,
              HasSubstr("epilogue          acc_o -> Output (O_shared not "
                        "allocated)"));
  EXPECT_THAT(*plan, HasSubstr("threads         256 (launched 384)"));
  // (Two consumer warpgroups already overlap one another's softmax.)
  EXPECT_THAT(*plan, HasSubstr("overlap         none"));
}

TEST(PlanKernelTest, OneConsumerWarpgroupIsNotPersistentAndStartsLongestFirst) {
  // The corpus wording, 64-row query tiles over one warpgroup.
  auto plan = PlanOf(testing::ReadFileOrDie(testing::TestDataDir() / "corpus" /
                                            "flash_attention_fwd.tile"),
                     "sm_90a", {{"BM", 64}, {"BN", 64}, {"STAGES", 2}},
                     "flash_attention_fwd_causal");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr("warp-specialised TMA ring"));
  EXPECT_THAT(*plan, HasSubstr("warpgroups      1 consumer + 1 producer"));
  EXPECT_THAT(*plan, HasSubstr("persistent      no"));
  EXPECT_THAT(*plan, HasSubstr("walk            longest-first-x"));
  EXPECT_THAT(*plan, HasSubstr("per-tile loads  none"));
  EXPECT_THAT(*plan, HasSubstr("overlap         the gemm into acc_o of k - 1 "
                               "runs under k, after the gemm into acc_s"));
}

TEST(PlanKernelTest, OneStageKeepsTheLoopAsWritten) {
  auto plan = PlanOf(Attention("stages=2", "stages=1"), "sm_90a");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr("pipeline          as written"));
  EXPECT_THAT(*plan, HasSubstr("walk            longest-first-x"));
}

TEST(PlanKernelTest, WithoutTmaTilesShareBytes) {
  auto plan = PlanOf(Attention(), "sm_80");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr("pipeline          as written"));
  EXPECT_THAT(*plan, HasSubstr("walk            longest-first-x"));
  EXPECT_THAT(*plan, HasSubstr("tiles with disjoint lives share bytes"));
  EXPECT_THAT(*plan, Not(HasSubstr("not allocated")));
}

TEST(PlanKernelTest, AStartMovingAlongXKeepsTheGridOrder) {
  auto plan = PlanOf(Attention("pipelined(loop_range, stages=2)",
                               "pipelined(bx, loop_range, stages=2)"),
                     "sm_80");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr("start rising"));
  EXPECT_THAT(*plan, HasSubstr("walk            grid"));
}

TEST(PlanKernelTest, PrintIrAfterAllShowsThePlanAsTheLastPass) {
  CompileOptions o;
  o.target = "sm_90a";
  o.plan_only = true;
  o.print_ir_after_all = true;
  auto k = Compile(Attention(), o);
  ASSERT_TRUE(k.ok()) << k.status();
  const size_t after = k->ir_dump.find("// ----- after plan -----");
  ASSERT_NE(after, std::string::npos) << k->ir_dump;
  EXPECT_GT(after, k->ir_dump.find("// ----- after pipeline-loops -----"));
  EXPECT_NE(
      k->ir_dump.find("// plan   walk            mirrored-pairs-x", after),
      std::string::npos);
  EXPECT_NE(k->ir_dump.find("// layout acc_o: registers", after),
            std::string::npos);
  // The printed plan is the one --print-plan shows.
  EXPECT_THAT(k->plan, HasSubstr("walk            mirrored-pairs-x"));
}

TEST(PlanKernelTest, TheCpuTargetHasNoPlan) {
  auto plan = PlanOf(Attention(), "cpu");
  ASSERT_FALSE(plan.ok());
  EXPECT_EQ(plan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(plan.status().message()),
              HasSubstr("GPU targets only"));
}

// ------------------------------------------------------------ rings

std::string Gemm(const std::string& from = "", const std::string& to = "") {
  return FileWith(fs::path(KILN_PHRASINGS_DIR) / "gemm" / "floor_division.tile",
                  from, to);
}

TEST(RingPlanTest, AGemmMainLoopRingsBothTilesWithAWholeTileVersion) {
  auto plan = PlanOf(Gemm(), "sm_80");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr("ring over loop k\n  stages          3\n"
                               "  tiles           A_shared, B_shared\n"
                               "  second version  straight-line copies"));
  // HIP has no whole-tile version; Hopper's ring is the TMA ring's
  // fallback and has none either.
  auto hip = PlanOf(Gemm(), "gfx90a");
  ASSERT_TRUE(hip.ok()) << hip.status();
  EXPECT_THAT(*hip, HasSubstr("tiles           A_shared, B_shared\n"));
  EXPECT_THAT(*hip, Not(HasSubstr("second version")));
  auto hopper = PlanOf(Gemm(), "sm_90a");
  ASSERT_TRUE(hopper.ok()) << hopper.status();
  EXPECT_THAT(*hopper, HasSubstr("fallback of     the TMA ring"));
  EXPECT_THAT(*hopper, Not(HasSubstr("second version")));
}

// B's start is a let over the loop variable, and (a page index) an element
// of a tensor the kernel only reads.
std::string PageLikeGemm() {
  return Gemm("    copy B[k * 32:+32, bx * 128:+128] -> B_shared",
              "    let kb = k * 32\n"
              "    let row = i32(A[0, k]) + kb\n"
              "    copy B[row:+32, bx * 128:+128] -> B_shared");
}

// B's start depends on an element of C, which the kernel writes.
std::string StaleStartGemm() {
  return Gemm("    copy B[k * 32:+32, bx * 128:+128] -> B_shared",
              "    let kb = i32(C[0, k]) * 32\n"
              "    copy B[kb:+32, bx * 128:+128] -> B_shared");
}

TEST(RingPlanTest, LetsBeforeARingCopyAreEvaluatedAhead) {
  // B's start is a let over the loop variable, and (a page index) an
  // element of a tensor the kernel only reads: each issue evaluates them
  // for the iteration it loads. The loop is no longer only ring copies and
  // gemms (no whole-tile version).
  auto plan = PlanOf(PageLikeGemm(), "sm_80");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr("  tiles           A_shared, B_shared\n"
                               "  loaded ahead    kb, row\n"));
  EXPECT_THAT(*plan, Not(HasSubstr("second version")));
}

TEST(RingPlanTest, TheTmaProducerEvaluatesThoseLetsForEachIteration) {
  // The same page-like start on Hopper: the producer reads A[0, k] for the
  // iteration it loads, so the loop keeps its TMA ring.
  auto plan = PlanOf(PageLikeGemm(), "sm_90a");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr("warp-specialised TMA ring over loop k"));
  EXPECT_THAT(*plan, HasSubstr("  per iteration   kb, row\n"));
  EXPECT_THAT(*plan, HasSubstr("  loaded ahead    kb, row\n"
                               "  fallback of     the TMA ring\n"));
  // An element of a tensor the kernel writes could be stale when read
  // ahead: no producer, no TMA ring.
  auto stale = PlanOf(StaleStartGemm(), "sm_90a");
  ASSERT_TRUE(stale.ok()) << stale.status();
  EXPECT_THAT(*stale, HasSubstr("pipeline          as written"));
}

TEST(RingPlanTest, ACopyTheRingCannotIssueAheadStaysInTheBody) {
  // B's start depends on an element of C, which the kernel writes (a
  // value read ahead could be stale): A still rings, B is copied in the
  // body.
  auto plan = PlanOf(StaleStartGemm(), "sm_80");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan, HasSubstr("  tiles           A_shared\n"));
  EXPECT_THAT(*plan, Not(HasSubstr("loaded ahead")));
  // One stage: no ring.
  auto one = PlanOf(Gemm("stages=3", "stages=1"), "sm_80");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_THAT(*one, Not(HasSubstr("ring over loop")));
}

// ------------------------------------------------------------ shared layout

// The `shared memory` section of a plan (up to the next section).
std::string SharedSection(const std::string& plan) {
  const size_t from = plan.find("shared memory");
  const size_t to = plan.find("\nfragments", from);
  return plan.substr(from, to - from);
}

TEST(SharedLayoutTest, TilesThenEachRingsFurtherStagesThenTheLaunchedSize) {
  for (const auto& [stages, hi] :
       std::map<std::string, std::string>{{"2", "24576"}, {"4", "40960"}}) {
    SCOPED_TRACE(stages);
    auto plan = PlanOf(Gemm("stages=3", "stages=" + stages), "sm_80");
    ASSERT_TRUE(plan.ok()) << plan.status();
    const int64_t s = std::stoll(stages);
    // 128 x 32 and 32 x 128 f16 tiles: 8 KiB each per stage.
    EXPECT_THAT(SharedSection(*plan),
                HasSubstr(absl::StrCat("  A_shared        [0, 8192)\n"
                                       "  B_shared        [8192, 16384)\n"
                                       "  A_shared stages 1..",
                                       s - 1, " [16384, ", hi, ")\n")));
    EXPECT_THAT(
        SharedSection(*plan),
        HasSubstr(absl::StrCat("launched        ", 16384 * s, " bytes")));
  }
}

TEST(SharedLayoutTest, ATileWhoseLifeMeetsNoOtherTakesTheirBytes) {
  // sm_80 attention: O_shared, written after the loop, reuses Q_shared's
  // bytes; K and V, live together with Q, do not.
  auto plan = PlanOf(Attention(), "sm_80");
  ASSERT_TRUE(plan.ok()) << plan.status();
  const std::string sh = SharedSection(*plan);
  EXPECT_THAT(sh, HasSubstr("  Q_shared        [0, 32768)\n"));
  EXPECT_THAT(sh, HasSubstr("  K_shared        [32768, 65536)\n"));
  EXPECT_THAT(sh, HasSubstr("  O_shared        [0, 32768)\n"));
  // Warp-specialised, nothing shares (the producer writes behind the
  // consumers' barriers), and the tiles are 1024-aligned wgmma operands.
  auto hopper = PlanOf(Attention(), "sm_90a");
  ASSERT_TRUE(hopper.ok()) << hopper.status();
  EXPECT_THAT(SharedSection(*hopper), HasSubstr("one region per tile"));
  EXPECT_THAT(SharedSection(*hopper), Not(HasSubstr("O_shared")));
}

TEST(SharedLayoutTest, HopperExtrasTakeOnlyTheRoomLeft) {
  // Two K/V stages: the TMA store staging (2 x 8 KiB per consumer
  // warpgroup) and Q's second slot both fit in 227 KiB.
  auto two = PlanOf(Attention(), "sm_90a");
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_THAT(SharedSection(*two),
              HasSubstr("  TMA store staging [163840, 196608)\n"
                        "  Q_shared (second slot) [196608, 229376)\n"
                        "  launched        230400 bytes"));
  EXPECT_THAT(*two, HasSubstr("  TMA stores      acc_o -> Output\n"));
  // Three stages leave room for neither: the stores stay in registers
  // (no map for Output), Q keeps one slot, and the kernel still fits.
  auto three = PlanOf(Attention("stages=2", "stages=3"), "sm_90a");
  ASSERT_TRUE(three.ok()) << three.status();
  const std::string sh = SharedSection(*three);
  EXPECT_THAT(sh, HasSubstr("  K_shared stages 1..2 [98304, 163840)\n"
                            "  V_shared stages 1..2 [163840, 229376)\n"
                            "  launched        230400 bytes"));
  EXPECT_THAT(sh, Not(HasSubstr("staging")));
  EXPECT_THAT(sh, Not(HasSubstr("second slot")));
  EXPECT_THAT(*three, HasSubstr("  TMA stores      none\n"));
  EXPECT_THAT(*three, Not(HasSubstr("Output, box")));
  EXPECT_THAT(*three, HasSubstr("2: V, box"));
}

TEST(SharedLayoutTest, TensorMapsInTheOrderTheKernelTakesThem) {
  auto plan = PlanOf(Gemm(), "sm_90a");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_THAT(*plan,
              HasSubstr("tensor maps\n"
                        "  0: A, box 32 x 128 (innermost first), 64-byte "
                        "swizzle\n"
                        "  1: B, box 64 x 32 (innermost first), 128-byte "
                        "swizzle\n"
                        "  2: C, box 64 x 64 (innermost first), 128-byte "
                        "swizzle\n"
                        "  TMA stores      C_local -> C\n"));
  // Without the Hopper path there are none.
  auto ampere = PlanOf(Gemm(), "sm_80");
  ASSERT_TRUE(ampere.ok()) << ampere.status();
  EXPECT_THAT(*ampere, Not(HasSubstr("tensor maps")));
}

// ------------------------------------------------------------ thread-owned

// A row kernel: `body` between the fragment allocs and the end, 128
// threads, 4 x 256 tiles of a bf16 X.
std::string RowKernel(const std::string& body) {
  return "kernel k(X: bf16[M, N], Y: bf16[M, N], Z: f32[M, N])\n"
         "  grid(ceildiv(M, 4)) threads(128) (bx) {\n"
         "  alloc fragment xs: f32[4, 256]\n"
         "  alloc fragment ys: f32[4, 256]\n"
         "  alloc fragment s: f32[4]\n" +
         body + "}\n";
}

std::string Layout(const std::string& plan, const std::string& tile) {
  const size_t at = plan.find("  " + tile + ": ");
  if (at == std::string::npos) return "";
  const size_t end = plan.find('\n', at);
  return plan.substr(at + tile.size() + 4, end - at - tile.size() - 4);
}

TEST(FragmentPlanTest, FragmentElementsUsedOutsideParallelStayInShared) {
  // xs is read element by element outside `parallel` (every thread sees
  // each element): it stays in shared memory, where it would otherwise be
  // thread-owned like ys.
  const std::string k = RowKernel(
      "  copy X[bx * 4:+4, 0:+256] -> xs\n"
      "  copy X[bx * 4:+4, 0:+256] -> ys\n"
      "  s[0] = 0.0\n"
      "  for r in serial(4) {\n"
      "    s[0] += xs[r, 0]\n"
      "  }\n"
      "  parallel (i, j) in (4, 256) {\n"
      "    ys[i, j] = ys[i, j] * s[0]\n"
      "  }\n"
      "  copy ys -> Y[bx * 4:+4, 0:+256]\n");
  // A row vector of an accumulator read at one row outside `parallel`
  // (each thread holds only its rows in registers).
  const std::string rows =
      Gemm("  copy C_local -> C[by * 128:+128, bx * 128:+128]",
           "  alloc fragment m: f32[128]\n"
           "  reduce.max C_local -> m, dim=1\n"
           "  let top = m[5]\n"
           "  parallel (i, j) in (128, 128) {\n"
           "    C_local[i, j] = C_local[i, j] - m[i] + top\n"
           "  }\n"
           "  copy C_local -> C[by * 128:+128, bx * 128:+128]");
  // P (the second gemm's A operand) read at one element outside
  // `parallel`: not packed into registers from the accumulator.
  auto packed = PlanOf(Attention("    copy acc_s -> acc_s_cast\n",
                                 "    copy acc_s -> acc_s_cast\n"
                                 "    let p0 = f32(acc_s_cast[0, 0])\n"
                                 "    fill logsum, p0\n"),
                       "sm_90a");
  ASSERT_TRUE(packed.ok()) << packed.status();
  EXPECT_THAT(Layout(*packed, "acc_s_cast"), StartsWith("shared"));
  EXPECT_EQ(Layout(*PlanOf(Attention(), "sm_90a"), "acc_s_cast"),
            "registers, mma A operands packed from acc_s");
  for (const char* target : {"sm_80", "sm_90a", "gfx90a"}) {
    auto with_rows = PlanOf(rows, target);
    ASSERT_TRUE(with_rows.ok()) << with_rows.status();
    EXPECT_EQ(Layout(*with_rows, "m"), "shared (fragment)") << target;
    EXPECT_THAT(Layout(*with_rows, "C_local"), HasSubstr("accumulator"))
        << target;
    auto plan = PlanOf(k, target);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(Layout(*plan, "xs"), "shared (fragment)") << target;
    EXPECT_EQ(Layout(*plan, "s"), "shared (fragment)") << target;
    EXPECT_THAT(Layout(*plan, "ys"), HasSubstr("thread-owned")) << target;
  }
}

TEST(FragmentPlanTest, AFragmentBesideAnAccumulatorMirrorsItsRegisters) {
  // The block-scaled FP8 GEMM's accumulator is written only element for
  // element beside the gemm's product (its promotion): it takes the
  // product's wgmma layout, and the main loop stays warp-specialised.
  const std::string text = testing::ReadFileOrDie(
      testing::TestDataDir() / "corpus" / "gemm_fp8_blockscaled.tile");
  auto plan = PlanOf(text, "sm_90a", {{"BM", 128}, {"STAGES", 3}});
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Layout(*plan, "Acc"), Layout(*plan, "Part"));
  EXPECT_THAT(Layout(*plan, "Acc"), HasSubstr("wgmma accumulator"));
  EXPECT_THAT(*plan, HasSubstr("warp-specialised TMA ring over loop k"));
  EXPECT_THAT(*plan, HasSubstr("TMA stores      Acc -> C"));
  // Read at one element outside `parallel`: it stays in shared memory.
  auto uniform = PlanOf(
      FileWith(testing::TestDataDir() / "corpus" / "gemm_fp8_blockscaled.tile",
               "  copy Acc -> C",
               "  let a0 = Acc[0, 0]\n  fill scale, a0\n"
               "  copy Acc -> C"),
      "sm_90a", {{"BM", 128}, {"STAGES", 3}});
  ASSERT_TRUE(uniform.ok()) << uniform.status();
  EXPECT_EQ(Layout(*uniform, "Acc"), "shared (fragment)");
}

TEST(FragmentPlanTest, AnAccumulatorTooWideForOneWarpgroupSplitsItsColumns) {
  // MLA decode: 64 heads x 512 latent columns over two warpgroups. The rows
  // are one 64-row wgmma tile, so the warpgroups split the columns (256
  // each, 128 registers per thread) and both accumulators stay on wgmma;
  // P, whose rows each warpgroup needs whole, goes through shared memory
  // as the second gemm's A operand. The row statistics stay in registers,
  // a copy in each column slice (their reductions meet in the scratch).
  const std::string text = testing::ReadFileOrDie(testing::TestDataDir() /
                                                  "corpus" / "mla_decode.tile");
  auto plan =
      PlanOf(text, "sm_90a", {{"BN", 64}, {"STAGES", 1}}, "mla_decode_split");
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_EQ(Layout(*plan, "acc_o"),
            "registers, wgmma accumulator [64, 512] over 1x2 warpgroups, 128 "
            "per thread");
  EXPECT_EQ(Layout(*plan, "acc_s"),
            "registers, wgmma accumulator [64, 64] over 1x2 warpgroups, 16 per "
            "thread");
  EXPECT_EQ(Layout(*plan, "acc_s_cast"),
            "shared, wgmma operand (swizzled panels, 1024-byte aligned)");
  for (const char* row : {"m", "m_prev", "alpha", "rowsum", "l"}) {
    EXPECT_EQ(Layout(*plan, row),
              "registers, rows of the wgmma accumulator layout [64] over 1 "
              "warpgroups, 2 per thread, a copy in each of 2 column slices")
        << row;
  }
  // sm_80 keeps mma.sync's warp grid.
  auto ampere =
      PlanOf(text, "sm_80", {{"BN", 64}, {"STAGES", 1}}, "mla_decode_split");
  ASSERT_TRUE(ampere.ok()) << ampere.status();
  EXPECT_THAT(Layout(*ampere, "acc_o"), HasSubstr("mma accumulator [64, 512]"));
}

TEST(FragmentPlanTest, RowsOfAColumnSplitAccumulatorAreCopiedPerSlice) {
  // 16 rows over four warps: the warps split the columns, and a row vector
  // reduced from the accumulator is held by every column slice (the
  // reduction meets in the scratch) and stored by the first. One that is
  // atomically added to a tensor would be added once per copy: it stays in
  // shared memory.
  const std::string k =
      "kernel k(A: bf16[M, 64], B: bf16[64, 128], Out: f32[M], Sum: f32[M])\n"
      "  grid(ceildiv(M, 16)) threads(128) (bx) {\n"
      "  alloc shared As: bf16[16, 64]\n"
      "  alloc shared Bs: bf16[64, 128]\n"
      "  alloc fragment C: f32[16, 128]\n"
      "  alloc fragment m: f32[16]\n"
      "  alloc fragment s: f32[16]\n"
      "  copy A[bx * 16:+16, :] -> As\n"
      "  copy B -> Bs\n"
      "  gemm As, Bs -> C clear_accum policy=full_col\n"
      "  reduce.max C -> m, dim=1\n"
      "  reduce.sum C -> s, dim=1\n"
      "  copy m -> Out[bx * 16:+16]\n"
      "  atomic_add Sum[bx * 16:+16], s\n"
      "}\n";
  // (128 threads: four 32-lane warps, two 64-lane wavefronts.)
  for (const auto& [target, slices] :
       {std::pair{"sm_80", 4}, {"sm_90a", 4}, {"gfx90a", 2}}) {
    auto plan = PlanOf(k, target);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_THAT(Layout(*plan, "C"),
                HasSubstr(absl::StrCat("[16, 128] over 1x", slices, " warps")))
        << target;
    EXPECT_THAT(Layout(*plan, "m"),
                AllOf(StartsWith("registers, rows of the mma accumulator"),
                      HasSubstr(absl::StrCat("a copy in each of ", slices,
                                             " column slices"))))
        << target;
    EXPECT_EQ(Layout(*plan, "s"), "shared (fragment)") << target;
  }
}

TEST(FragmentPlanTest, WarpgroupsSplitRowsFirstThenColumns) {
  auto tile = [](int64_t rows, int64_t cols, DType dt = DType::kBF16) {
    gpu::TileInfo t;
    t.dtype = dt;
    t.dims = {rows, cols};
    return t;
  };
  // The grid chosen, or {0, 0} when none fits.
  auto grid = [](int64_t m, int64_t n, int64_t k, int64_t threads,
                 const gpu::TileInfo& a, const gpu::TileInfo& b,
                 bool transpose_b) {
    int wm = 0, wn = 0;
    if (!gpu::ChooseWarpgroups(m, n, k, threads, a, b, transpose_b, &wm, &wn)) {
      return std::make_pair(0, 0);
    }
    return std::make_pair(wm, wn);
  };
  const std::pair<int, int> none{0, 0};
  // Rows divide among the warpgroups: a row split, as before.
  EXPECT_EQ(grid(128, 256, 64, 256, tile(128, 64), tile(256, 64), true),
            std::make_pair(2, 1));
  // One 64-row tile over two warpgroups: the columns split.
  EXPECT_EQ(grid(64, 512, 64, 256, tile(64, 64), tile(64, 512), false),
            std::make_pair(1, 2));
  // 128 rows over four warpgroups: two row slices of two column slices.
  EXPECT_EQ(grid(128, 256, 64, 512, tile(128, 64), tile(256, 64), true),
            std::make_pair(2, 2));
  // A slice of an N-major B must start on its 64-element swizzle panels.
  EXPECT_EQ(grid(64, 64, 64, 256, tile(64, 64), tile(64, 64), false), none);
  EXPECT_EQ(grid(64, 64, 64, 256, tile(64, 64), tile(64, 64), true),
            std::make_pair(1, 2));
  // fp8 promotes its product per warpgroup: no column split.
  EXPECT_EQ(grid(64, 256, 128, 256, tile(64, 128, DType::kF8E4M3),
                 tile(256, 128, DType::kF8E4M3), true),
            none);
  // More than 256 columns per warpgroup do not fit one instruction.
  EXPECT_EQ(grid(64, 1024, 64, 256, tile(64, 64), tile(64, 1024), false), none);
}

TEST(FragmentPlanTest,
     AConstantBoxOfAnAccumulatorStoredToATensorStaysInRegisters) {
  // TileLang's decode kernels store the valid rows of a head group smaller
  // than the tile (`T.copy(acc_o[:valid, :], O[...])`): each thread stores
  // its elements inside the box, and the accumulator keeps its registers.
  const std::string box =
      Gemm("  copy C_local -> C[by * 128:+128, bx * 128:+128]",
           "  copy C_local[8:+40, 0:+96] -> "
           "C[by * 128:+40, bx * 128:+96]");
  for (const char* target : {"sm_80", "sm_90a", "gfx90a"}) {
    auto plan = PlanOf(box, target);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_THAT(Layout(*plan, "C_local"), HasSubstr("accumulator")) << target;
  }
}

// A loop over the column tiles of 4 rows, its body `body`.
std::string ColumnLoop(const std::string& body) {
  return "kernel k(X: bf16[M, N], Y: bf16[M, N], P: i32[64])\n"
         "  grid(ceildiv(M, 4)) threads(128) (bx) {\n"
         "  alloc fragment xs: f32[4, 256]\n"
         "  for t in serial(ceildiv(N, 256)) {\n" +
         body + "  }\n}\n";
}

TEST(FullTilesPlanTest,
     LoopsWhoseOwnedCopiesMoveWithTheLoopRunWholeTilesFirst) {
  // A start through a let, and a column offset.
  const std::string k = ColumnLoop(
      "    let c0 = t * 256 + 0\n"
      "    copy X[bx * 4:+4, c0:+256] -> xs\n"
      "    copy xs -> Y[bx * 4:+4, t * 256:+256]\n");
  for (const char* target : kTargets) {
    SCOPED_TRACE(target);
    auto plan = PlanOf(k, target);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_THAT(*plan, HasSubstr("whole tiles first over loop t\n"
                                 "  unchecked       X -> xs, xs -> Y\n"));
  }
}

TEST(FullTilesPlanTest, CopiesNotMovingAffinelyForwardsStayChecked) {
  for (const char* body : {
           // a page index loaded from a tensor
           "    copy X[bx * 4:+4, P[t] * 256:+256] -> xs\n",
           // falling with the loop variable
           "    copy X[bx * 4:+4, (7 - t) * 256:+256] -> xs\n",
           // not affine
           "    copy X[bx * 4:+4, t * t:+256] -> xs\n",
       }) {
    SCOPED_TRACE(body);
    auto plan = PlanOf(ColumnLoop(body), "sm_90a");
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_THAT(*plan, Not(HasSubstr("whole tiles first")));
  }
}

TEST(OwnedFragmentTest, ElementWiseFragmentsLiveInRegisters) {
  const std::string k = RowKernel(
      "  copy X[bx * 4:+4, 0:+256] -> xs\n"
      "  parallel (i, j) in (4, 256) {\n"
      "    ys[i, j] = xs[i, j] * 2.0\n"
      "  }\n"
      "  reduce.sum ys -> s, dim=1\n"
      "  copy ys -> Y[bx * 4:+4, 0:+256]\n");
  for (const char* target : kTargets) {
    SCOPED_TRACE(target);
    auto plan = PlanOf(k, target);
    ASSERT_TRUE(plan.ok()) << plan.status();
    // 16 bytes of bf16 per chunk: 8 columns; 1024 elements over 128
    // threads: 8 registers each.
    EXPECT_EQ(Layout(*plan, "xs"),
              "registers, thread-owned chunks of 8 columns over 128 threads, "
              "8 per thread");
    EXPECT_EQ(Layout(*plan, "ys"), Layout(*plan, "xs"));
    // The reduction's destination: the row registers of the same chunks.
    EXPECT_EQ(Layout(*plan, "s"),
              "registers, rows of thread-owned chunks of 8 columns over 128 "
              "threads, 1 per thread (32 lanes per row)");
  }
}

TEST(OwnedFragmentTest, RowVectorsOfOwnedFragmentsLiveInTheirRowsLanes) {
  // A softmax step: the rows' max and sum in registers, read by the
  // element-wise parallels, updated by a row parallel.
  const std::string rows = RowKernel(
      "  alloc fragment m: f32[4]\n"
      "  copy X[bx * 4:+4, 0:+256] -> xs\n"
      "  reduce.max xs -> m, dim=1\n"
      "  parallel (r) in (4) {\n"
      "    m[r] = m[r] * 0.5\n"
      "  }\n"
      "  parallel (i, j) in (4, 256) {\n"
      "    xs[i, j] = exp(xs[i, j] - m[i])\n"
      "  }\n"
      "  reduce.sum xs -> s, dim=1\n"
      "  parallel (i2, j2) in (4, 256) {\n"
      "    xs[i2, j2] = xs[i2, j2] / s[i2]\n"
      "  }\n"
      "  copy xs -> Y[bx * 4:+4, 0:+256]\n");
  for (const char* target : kTargets) {
    SCOPED_TRACE(target);
    auto plan = PlanOf(rows, target);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_THAT(Layout(*plan, "m"),
                ::testing::StartsWith("registers, rows of thread-owned"));
    EXPECT_EQ(Layout(*plan, "s"), Layout(*plan, "m"));
  }
  // Copied out or read outside a parallel: shared memory as before.
  for (const std::string& use : {std::string("  copy s -> Z[bx * 4:+4, 0]\n"),
                                 std::string("  fill ys, s[0]\n")}) {
    SCOPED_TRACE(use);
    auto plan = PlanOf(RowKernel("  copy X[bx * 4:+4, 0:+256] -> xs\n"
                                 "  reduce.sum xs -> s, dim=1\n" +
                                 use),
                       "sm_90a");
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(Layout(*plan, "s"), "shared (fragment)");
  }
}

TEST(OwnedFragmentTest, ARowParallelStoringToATensorKeepsItsRowsInRegisters) {
  // A norm's per-row statistics stored to a tensor (LayerNorm's Mean): the
  // rows stay in registers and one lane per row stores.
  const std::string k = RowKernel(
      "  copy X[bx * 4:+4, 0:+256] -> xs\n"
      "  reduce.sum xs -> s, dim=1\n"
      "  parallel (r) in (4) {\n"
      "    s[r] = s[r] / 256.0\n"
      "    Z[bx * 4 + r, 0] = s[r]\n"
      "  }\n"
      "  parallel (i, j) in (4, 256) {\n"
      "    xs[i, j] = xs[i, j] - s[i]\n"
      "  }\n"
      "  copy xs -> Y[bx * 4:+4, 0:+256]\n");
  for (const char* target : kTargets) {
    SCOPED_TRACE(target);
    auto plan = PlanOf(k, target);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_THAT(Layout(*plan, "s"), StartsWith("registers, rows of"));
  }
}

TEST(OwnedFragmentTest, ARowWiderThanTheBlockTakesOneRegisterPerThread) {
  // 1 x 4096 f32 over 128 threads: each thread holds 8 chunks of the one
  // row, which share one row register (its 128 lanes span 4 waves).
  const std::string k =
      "kernel k(A: f32[M, 4096], B: f32[M, 4096])\n"
      "  grid(M) threads(128) (bx) {\n"
      "  alloc fragment a: f32[1, 4096]\n"
      "  alloc fragment s: f32[1]\n"
      "  copy A[bx:+1, :] -> a\n"
      "  reduce.sum a -> s, dim=1\n"
      "  parallel (i, j) in (1, 4096) {\n"
      "    a[i, j] = a[i, j] * s[i]\n"
      "  }\n"
      "  copy a -> B[bx:+1, :]\n"
      "}\n";
  for (const char* target : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(target);
    auto plan = PlanOf(k, target);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(Layout(*plan, "s"),
              "registers, rows of thread-owned chunks of 4 columns over 128 "
              "threads, 1 per thread (128 lanes per row)");
  }
}

// Plans `k` for every target: `tiles` held in thread-owned registers and
// no shared bytes for `staging`.
void ExpectOwnedEverywhere(const std::string& k,
                           const std::vector<const char*>& tiles,
                           const std::string& staging) {
  for (const char* target : kTargets) {
    SCOPED_TRACE(target);
    auto plan = PlanOf(k, target);
    ASSERT_TRUE(plan.ok()) << plan.status();
    for (const char* tile : tiles) {
      EXPECT_THAT(Layout(*plan, tile), StartsWith("registers, thread-owned"))
          << tile;
    }
    EXPECT_THAT(*plan, Not(HasSubstr("  " + staging + "  ")));
  }
}

TEST(OwnedFragmentTest, AStagingSharedTileMetOnlyElementWiseLivesInRegisters) {
  // TileLang's habit: a row staged through shared memory, then copied or
  // read element-wise into fragments; gamma [D] read by the trailing
  // variable of a (1, D) loop. No element passes between threads, so
  // registers hold them and the kernel needs no shared tile at all.
  const std::string k =
      "kernel k(X: bf16[M, 1024], G: bf16[1024], Y: bf16[M, 1024])\n"
      "  grid(M) threads(128) (bx) {\n"
      "  alloc shared xs_s: bf16[1, 1024]\n"
      "  alloc shared g_s: bf16[1024]\n"
      "  alloc fragment x: f32[1, 1024]\n"
      "  copy X[bx:+1, 0:+1024] -> xs_s\n"
      "  copy G -> g_s\n"
      "  parallel (i, j) in (1, 1024) {\n"
      "    x[i, j] = f32(xs_s[i, j])\n"
      "  }\n"
      "  parallel (i2, j2) in (1, 1024) {\n"
      "    xs_s[i2, j2] = bf16(x[i2, j2] * f32(g_s[j2]))\n"
      "  }\n"
      "  copy xs_s -> Y[bx:+1, 0:+1024]\n"
      "}\n";
  ExpectOwnedEverywhere(k, {"xs_s", "g_s", "x"}, "xs_s");
  // Read transposed (TileLang's transpose), by a gemm, or outside a
  // parallel: threads exchange elements through it, so it stays shared.
  const std::map<std::string, std::string> exchanges = {
      {"transposed",
       "  parallel (i, j) in (32, 32) {\n"
       "    o[i, j] = t[j, i]\n"
       "  }\n"},
      {"a gemm operand", "  gemm t, t -> acc\n"},
      {"outside a parallel", "  fill o, t[0, 0]\n"},
  };
  for (const auto& [what, use] : exchanges) {
    SCOPED_TRACE(what);
    auto plan = PlanOf(
        "kernel k(X: f16[M, 32], Y: f16[M, 32])\n"
        "  grid(ceildiv(M, 32)) threads(128) (bx) {\n"
        "  alloc shared t: f16[32, 32]\n"
        "  alloc fragment o: f16[32, 32]\n"
        "  alloc fragment acc: f32[32, 32]\n"
        "  copy X[bx * 32:+32, 0:+32] -> t\n" +
            use + "  copy o -> Y[bx * 32:+32, 0:+32]\n}\n",
        "sm_90a");
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_THAT(Layout(*plan, "t"), StartsWith("shared"));
  }
}

TEST(OwnedFragmentTest, ARankOneTileReducesAsOneRow) {
  // TileLang's online softmax: x [BN] reduced whole into max_x [1].
  const std::string k =
      "kernel k(X: f16[M, 2048], Y: f16[M, 2048])\n"
      "  grid(M) threads(128) (bx) {\n"
      "  alloc fragment x: f16[2048]\n"
      "  alloc fragment m: f32[1]\n"
      "  copy X[bx, 0:+2048] -> x\n"
      "  reduce.max x -> m, dim=0\n"
      "  parallel (j) in (2048) {\n"
      "    x[j] = f16(exp(f32(x[j]) - m[0]))\n"
      "  }\n"
      "  copy x -> Y[bx, 0:+2048]\n"
      "}\n";
  for (const char* target : kTargets) {
    SCOPED_TRACE(target);
    auto plan = PlanOf(k, target);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_THAT(Layout(*plan, "x"), StartsWith("registers, thread-owned"));
  }
}

TEST(OwnedFragmentTest, AReductionFusesWithTheParallelWritingItsSource) {
  // RMSNorm's square-then-sum: the squares are never all live at once.
  const std::string fused = RowKernel(
      "  copy X[bx * 4:+4, 0:+256] -> xs\n"
      "  parallel (i, j) in (4, 256) {\n"
      "    ys[i, j] = xs[i, j] * xs[i, j]\n"
      "  }\n"
      "  reduce.sum ys -> s, dim=1\n"
      "  copy xs -> Y[bx * 4:+4, 0:+256]\n");
  for (const char* target : kTargets) {
    SCOPED_TRACE(target);
    auto plan = PlanOf(fused, target);
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_THAT(*plan, HasSubstr("reduction fused   ys -> s with the parallel "
                                 "writing ys\n"));
  }
  // Not fused: the parallel writes another fragment too, or a statement
  // stands between.
  const std::map<std::string, std::string> apart = {
      {"two outputs",
       "  parallel (i, j) in (4, 256) {\n"
       "    ys[i, j] = xs[i, j] * xs[i, j]\n"
       "    xs[i, j] = xs[i, j] + 1.0\n"
       "  }\n"
       "  reduce.sum ys -> s, dim=1\n"},
      {"a statement between",
       "  parallel (i, j) in (4, 256) {\n"
       "    ys[i, j] = xs[i, j] * xs[i, j]\n"
       "  }\n"
       "  copy xs -> Y[bx * 4:+4, 0:+256]\n"
       "  reduce.sum ys -> s, dim=1\n"},
  };
  for (const auto& [what, body] : apart) {
    SCOPED_TRACE(what);
    auto plan = PlanOf(RowKernel("  copy X[bx * 4:+4, 0:+256] -> xs\n" + body +
                                 "  copy ys -> Y[bx * 4:+4, 0:+256]\n"),
                       "sm_90a");
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_THAT(*plan, Not(HasSubstr("reduction fused")));
  }
}

TEST(OwnedFragmentTest, TheChunkFollowsTheNarrowestTensorAndTheBlock) {
  // Copied to f32 only: 4 columns per chunk.
  auto f32 = PlanOf(RowKernel("  copy Z[bx * 4:+4, 0:+256] -> xs\n"
                              "  copy xs -> Z[bx * 4:+4, 0:+256]\n"),
                    "sm_90a");
  ASSERT_TRUE(f32.ok()) << f32.status();
  EXPECT_THAT(Layout(*f32, "xs"), HasSubstr("chunks of 4 columns"));
  // 256 threads over 4 x 256: 8-column chunks would leave threads without
  // one; 4 columns spread evenly.
  std::string wide = RowKernel(
      "  copy X[bx * 4:+4, 0:+256] -> xs\n"
      "  copy xs -> Y[bx * 4:+4, 0:+256]\n");
  wide.replace(wide.find("threads(128)"), 12, "threads(256)");
  auto w = PlanOf(wide, "sm_90a");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(Layout(*w, "xs"),
            "registers, thread-owned chunks of 4 columns over 256 threads, "
            "4 per thread");
}

TEST(OwnedFragmentTest, TheRegisterBudgetHoldsWhereFragmentsAreLiveTogether) {
  // TileLang's RMSNorm with four rows per block: 128 f32 per thread in
  // each of staged, vals and squares. Only vals is whole at any point
  // (staged dies in the copy that fills vals; squares is a fused
  // reduction's temporary), so all three take registers, not 192 KiB of
  // shared memory.
  const std::string rms =
      "kernel k(A: f32[M, 4096], B: f32[M, 4096])\n"
      "  grid(ceildiv(M, 4)) threads(128) (bx) {\n"
      "  alloc shared staged: f32[4, 4096]\n"
      "  alloc fragment squares: f32[4, 4096]\n"
      "  alloc fragment vals: f32[4, 4096]\n"
      "  alloc fragment factor: f32[4]\n"
      "  copy A[bx * 4:+4, :] -> staged\n"
      "  copy staged -> vals\n"
      "  parallel (r, c) in (4, 4096) {\n"
      "    squares[r, c] = vals[r, c] * vals[r, c]\n"
      "  }\n"
      "  reduce.sum squares -> factor, dim=1\n"
      "  parallel (r1) in (4) {\n"
      "    factor[r1] = rsqrt(factor[r1] / 4096.0)\n"
      "  }\n"
      "  parallel (r2, c2) in (4, 4096) {\n"
      "    vals[r2, c2] *= factor[r2]\n"
      "  }\n"
      "  copy vals -> B[bx * 4:+4, :]\n"
      "}\n";
  ExpectOwnedEverywhere(rms, {"staged", "squares", "vals"}, "staged");
  // Two fragments of 64 registers live together fit; a third live with
  // them does not, and one live at the peak goes to shared memory. Used
  // one after the other, the three fit again; inside a loop, a fragment is
  // live over the whole loop.
  const std::string a_plus_b =
      "  copy X[bx * 4:+4, :] -> a\n"
      "  copy X[bx * 4:+4, :] -> b\n"
      "  parallel (i, j) in (4, 2048) {\n"
      "    a[i, j] = a[i, j] + b[i, j]\n"
      "  }\n"
      "  copy a -> Y[bx * 4:+4, :]\n";
  const std::string c_alone =
      "  copy X[bx * 4:+4, :] -> c\n"
      "  copy c -> Y[bx * 4:+4, :]\n";
  const std::string c_across =
      "  copy X[bx * 4:+4, :] -> a\n"
      "  copy X[bx * 4:+4, :] -> b\n"
      "  copy X[bx * 4:+4, :] -> c\n"
      "  copy c -> Y[bx * 4:+4, :]\n"
      "  parallel (i, j) in (4, 2048) {\n"
      "    a[i, j] = a[i, j] + b[i, j]\n"
      "  }\n"
      "  copy a -> Y[bx * 4:+4, :]\n";
  const std::map<std::string, std::pair<std::string, int>> cases = {
      {"two", {a_plus_b, 0}},
      {"three live together", {c_across, 1}},
      {"three apart", {c_alone + a_plus_b, 0}},
      {"three in a loop",
       {"  for t in serial(4) {\n" + c_alone + a_plus_b + "  }\n", 1}},
  };
  for (const auto& [what, body_shared] : cases) {
    SCOPED_TRACE(what);
    auto plan = PlanOf(
        "kernel k(X: f32[M, 2048], Y: f32[M, 2048])\n"
        "  grid(ceildiv(M, 4)) threads(128) (bx) {\n"
        "  alloc fragment a: f32[4, 2048]\n"
        "  alloc fragment b: f32[4, 2048]\n"
        "  alloc fragment c: f32[4, 2048]\n" +
            body_shared.first + "}\n",
        "sm_90a");
    ASSERT_TRUE(plan.ok()) << plan.status();
    int shared = 0;
    for (const char* tile : {"a", "b", "c"}) {
      shared += Layout(*plan, tile) == "shared (fragment)";
    }
    EXPECT_EQ(shared, body_shared.second) << *plan;
  }
}

TEST(OwnedFragmentTest, AnyOtherUseKeepsTheFragmentShared) {
  const std::map<std::string, std::string> uses = {
      {"a scan",
       "  copy X[bx * 4:+4, 0:+256] -> xs\n"
       "  cumsum xs -> ys, dim=1, reverse=false\n"},
      {"an atomic add",
       "  copy X[bx * 4:+4, 0:+256] -> xs\n"
       "  atomic_add Z[bx * 4:+4, 0:+256], xs\n"},
      {"a transposed index",
       "  copy X[bx * 4:+4, 0:+256] -> xs\n"
       "  parallel (i, j) in (4, 256) {\n"
       "    ys[i, j] = xs[i, 255 - j]\n"
       "  }\n"},
      {"a slice", "  copy X[bx * 4:+4, 0:+128] -> xs[0:+4, 0:+128]\n"},
      {"a reduction into it",
       "  alloc fragment r: f32[4, 256, 2]\n"
       "  reduce.sum r -> xs, dim=2\n"},
  };
  for (const auto& [what, body] : uses) {
    SCOPED_TRACE(what);
    auto plan = PlanOf(RowKernel(body), "sm_90a");
    ASSERT_TRUE(plan.ok()) << plan.status();
    EXPECT_EQ(Layout(*plan, "xs"), "shared (fragment)");
  }
}

// ------------------------------------------------------------ phrasings

// Every spelling of each kernel: phrasings/NAME/*.tile and the DSL's IR of
// TileLang's wording.
std::map<std::string, std::vector<fs::path>> Phrasings() {
  const fs::path dsl =
      testing::TestDataDir().parent_path() / "python" / "goldens";
  const std::map<std::string, std::string> dsl_of = {
      {"attention", "attention_tilelang.tile"},
      {"attention_causal", "attention_causal_tilelang.tile"},
      {"gemm", "gemm.tile"},
      {"rmsnorm", "rms_norm.tile"},
      {"softmax", "softmax.tile"},
  };
  std::map<std::string, std::vector<fs::path>> out;
  for (const auto& [name, file] : dsl_of) {
    const fs::path dir = fs::path(KILN_PHRASINGS_DIR) / name;
    for (const auto& e : fs::directory_iterator(dir)) {
      if (e.path().extension() == ".tile") out[name].push_back(e.path());
    }
    std::sort(out[name].begin(), out[name].end());
    out[name].push_back(dsl / file);
  }
  return out;
}

TEST(PhrasingTest, EverySetHasFourSpellings) {
  for (const auto& [name, files] : Phrasings()) {
    EXPECT_GE(files.size(), 4u) << name;
  }
}

class PhrasingInvarianceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(PhrasingInvarianceTest, EverySpellingPlansTheSame) {
  const std::string& name = GetParam();
  const std::vector<fs::path> files = Phrasings().at(name);
  for (const char* target : kTargets) {
    SCOPED_TRACE(target);
    std::string first;
    for (const fs::path& f : files) {
      auto plan = PlanOf(testing::ReadFileOrDie(f), target);
      ASSERT_TRUE(plan.ok()) << f << ": " << plan.status();
      if (first.empty()) {
        first = *plan;
        continue;
      }
      EXPECT_EQ(*plan, first) << f << " plans otherwise than " << files[0];
    }
    const fs::path golden = fs::path(KILN_PLAN_GOLDEN_DIR) /
                            ("phrasing." + name + "." + target + ".plan");
    if (testing::UpdateGoldens()) {
      testing::WriteFileOrDie(golden, first);
      continue;
    }
    EXPECT_EQ(first, testing::ReadFileOrDie(golden)) << "golden " << golden;
  }
}

INSTANTIATE_TEST_SUITE_P(Kernels, PhrasingInvarianceTest,
                         ::testing::Values("attention", "attention_causal",
                                           "gemm", "rmsnorm", "softmax"));

// ------------------------------------------------------------ corpus

struct CorpusPlan {
  std::string file, kernel;
  std::map<std::string, int64_t> bind;
};

class CorpusPlanTest : public ::testing::TestWithParam<CorpusPlan> {};

TEST_P(CorpusPlanTest, MatchesGolden) {
  const CorpusPlan& c = GetParam();
  const std::string text = testing::ReadFileOrDie(
      testing::TestDataDir() / "corpus" / (c.file + ".tile"));
  for (const char* target : kTargets) {
    SCOPED_TRACE(target);
    auto plan = PlanOf(text, target, c.bind, c.kernel);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const fs::path golden = fs::path(KILN_PLAN_GOLDEN_DIR) /
                            ("corpus." + c.kernel + "." + target + ".plan");
    if (testing::UpdateGoldens()) {
      testing::WriteFileOrDie(golden, *plan);
      continue;
    }
    EXPECT_EQ(*plan, testing::ReadFileOrDie(golden)) << "golden " << golden;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Corpus, CorpusPlanTest,
    ::testing::Values(
        CorpusPlan{"gemm",
                   "gemm",
                   {{"BM", 128}, {"BN", 128}, {"BK", 64}, {"STAGES", 3}}},
        CorpusPlan{"gemm_fp8",
                   "gemm_fp8",
                   {{"BM", 128}, {"BN", 192}, {"BK", 128}, {"STAGES", 4}}},
        CorpusPlan{"flash_attention_fwd",
                   "flash_attention_fwd_causal",
                   {{"BM", 64}, {"BN", 64}, {"STAGES", 2}}},
        CorpusPlan{"flash_attention_fwd",
                   "flash_attention_fwd",
                   {{"BM", 64}, {"BN", 64}, {"STAGES", 2}}},
        CorpusPlan{"mla_decode",
                   "mla_decode_split",
                   {{"BN", 64}, {"STAGES", 2}, {"H", 128}}},
        CorpusPlan{"paged_decode",
                   "paged_decode_split",
                   {{"BH", 64}, {"BN", 64}, {"STAGES", 4}}}),
    [](const ::testing::TestParamInfo<CorpusPlan>& info) {
      return testing::TestNameOf(info.param.kernel);
    });

}  // namespace
}  // namespace kiln::compiler
