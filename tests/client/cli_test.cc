// Tests of the `kiln` CLI as a user runs it: exit statuses, what goes to
// stdout and stderr, for the offline IR commands and `kiln status`.
#include <regex>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/kilnd_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_kernels.h"

namespace kiln::cli {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::MatchesRegex;
using ::testing::Not;

// A small valid program (the example of compiler/docs/tile-ir.md).
constexpr char kGemm[] = R"(// C = A @ B
kernel gemm(A: f16[M, K], B: f16[K, N], C: f16[M, N])
  tune BM in [64, 128]
  tune BN in [64, 128]
  tune BK in [32, 64]
  grid(ceildiv(N, BN), ceildiv(M, BM)) threads(128) (bx, by) {
  alloc shared As: f16[BM, BK]
  alloc shared Bs: f16[BK, BN]
  alloc fragment Acc: f32[BM, BN]
  clear Acc
  for k in pipelined(ceildiv(K, BK), stages=2) {
    copy A[by * BM:+BM, k * BK:+BK] -> As
    copy B[k * BK:+BK, bx * BN:+BN] -> Bs
    gemm As, Bs -> Acc
  }
  copy Acc -> C[by * BM:+BM, bx * BN:+BN]
}
)";

testing::RunResult Kiln(std::vector<std::string> args) {
  args.insert(args.begin(), KILN_CLI_PATH);
  absl::StatusOr<testing::RunResult> result = testing::Run(args);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : testing::RunResult{};
}

TEST(CliTest, UsageErrorsExitWithTwo) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {},
           {"--no-such-flag"},
           {"no-such-command"},
           {"ir"},
           {"ir", "check"},
           {"ir", "fmt", "--bogus", "x.tile"},
           {"ir", "hash"},
           {"ir", "hash", "a.tile", "b.tile"},
           {"status", "--address"},
       }) {
    testing::RunResult result = Kiln(args);
    EXPECT_EQ(result.exit_code, 2)
        << "kiln " << ::testing::PrintToString(args) << "\n"
        << result.err;
  }
}

TEST(CliTest, HelpAndVersionExitWithZero) {
  testing::RunResult help = Kiln({"--help"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("status"));
  EXPECT_EQ(Kiln({"ir", "check", "--help"}).exit_code, 0);
  testing::RunResult version = Kiln({"--version"});
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_THAT(version.out, HasSubstr(KILN_VERSION));
}

TEST(CliTest, CheckProvePrintsEveryAccessAtTheGivenBindings) {
  testing::TempDir dir;
  std::string file = dir.File("gemm.tile");
  testing::WriteFile(file, kGemm);
  testing::RunResult result =
      Kiln({"ir", "check", "--prove", "-D", "BM=128", "-D", "M=256", file});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  // BM as given, the other tunables at their first candidates.
  EXPECT_THAT(result.out, HasSubstr("kernel gemm (BK=32, BM=128, BN=64, "
                                    "M=256)\n"));
  // With M fixed at 256 the rows of A are inside it; the columns of K are
  // tested, with the values that break them.
  EXPECT_THAT(result.out,
              HasSubstr(file + ":12:5: checked at run time: copy tensor "
                               "region A[by * 128:+128, k * 32:+32]: tests "
                               "`k * 32 + 32 <= K`"));
  EXPECT_THAT(result.out, HasSubstr(file + ":12:5: proven: copy tile region "
                                           "As\n"));
  EXPECT_THAT(result.out, HasSubstr(" 0 out of range, 0 races\n"));
  // A tunable off its candidates is the compile error it always is.
  testing::RunResult off =
      Kiln({"ir", "check", "--prove", "-D", "BM=96", file});
  EXPECT_EQ(off.exit_code, 1);
  EXPECT_THAT(off.err, HasSubstr("BM"));
}

TEST(CliTest, CheckOfAMissingFileFails) {
  testing::RunResult result = Kiln({"ir", "check", "/nonexistent/x.tile"});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err,
              HasSubstr("/nonexistent/x.tile: error: cannot read: No such "
                        "file or directory"));
  EXPECT_THAT(result.out, IsEmpty());
}

TEST(CliTest, CheckOfAnOversizedFileFails) {
  testing::TempDir dir;
  std::string big = dir.File("big.tile");
  testing::WriteFile(big, std::string((4 << 20) + 1, ' '));
  testing::RunResult result = Kiln({"ir", "check", big});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr(big + ": error: file is larger than"));
}

TEST(CliTest, CheckOfADirectoryFails) {
  testing::TempDir dir;
  EXPECT_EQ(Kiln({"ir", "check", dir.path()}).exit_code, 1);
}

TEST(CliTest, CheckAcceptsAValidFile) {
  testing::TempDir dir;
  std::string file = dir.File("gemm.tile");
  testing::WriteFile(file, kGemm);
  testing::RunResult result = Kiln({"ir", "check", file});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, IsEmpty());
  EXPECT_THAT(result.err, IsEmpty());
}

TEST(CliTest, CheckReportsErrorsWithLocations) {
  testing::TempDir dir;
  std::string good = dir.File("good.tile");
  std::string syntax = dir.File("syntax.tile");
  std::string semantic = dir.File("semantic.tile");
  testing::WriteFile(good, kGemm);
  testing::WriteFile(syntax,
                     "kernel k(A: f16[N]) grid(1) threads(32) (bx) {\n"
                     "  clear\n}\n");
  // Uses a tile that was never allocated.
  testing::WriteFile(semantic,
                     "kernel k(A: f16[N]) grid(1) threads(32) (bx) {\n"
                     "  clear Missing\n}\n");
  testing::RunResult result = Kiln({"ir", "check", good, syntax, semantic});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, ContainsRegex(syntax + ":[0-9]+:[0-9]+: error: "));
  EXPECT_THAT(result.err, ContainsRegex(semantic + ":2:[0-9]+: error: "));
  EXPECT_THAT(result.err, Not(HasSubstr(good)));
}

TEST(CliTest, FmtPrintsTheCanonicalFormAndCheckAcceptsIt) {
  testing::TempDir dir;
  std::string file = dir.File("gemm.tile");
  testing::WriteFile(file, kGemm);
  testing::RunResult fmt = Kiln({"ir", "fmt", file});
  ASSERT_EQ(fmt.exit_code, 0) << fmt.err;
  EXPECT_THAT(fmt.out, HasSubstr("kernel gemm("));
  EXPECT_THAT(fmt.out, Not(HasSubstr("// C = A @ B")));  // comments dropped

  std::string canonical = dir.File("canonical.tile");
  testing::WriteFile(canonical, fmt.out);
  testing::RunResult check = Kiln({"ir", "fmt", "--check", canonical});
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_THAT(check.out, IsEmpty());
  EXPECT_THAT(check.err, IsEmpty());

  // The original has a comment, so it is not canonical.
  testing::RunResult not_canonical =
      Kiln({"ir", "fmt", "--check", canonical, file});
  EXPECT_EQ(not_canonical.exit_code, 1);
  EXPECT_THAT(not_canonical.out, IsEmpty());
  EXPECT_THAT(not_canonical.err, HasSubstr(file + ": error: not in canonical"));
  EXPECT_THAT(not_canonical.err, Not(HasSubstr(canonical)));
}

TEST(CliTest, FmtOfASyntaxErrorFails) {
  testing::TempDir dir;
  std::string file = dir.File("bad.tile");
  testing::WriteFile(file, "kernel (\n");
  testing::RunResult result = Kiln({"ir", "fmt", file});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr(file + ":1:"));
}

TEST(CliTest, HashPrintsOneLinePerKernel) {
  testing::TempDir dir;
  std::string file = dir.File("gemm.tile");
  testing::WriteFile(file, kGemm);
  testing::RunResult result = Kiln({"ir", "hash", file});
  ASSERT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, MatchesRegex("gemm [0-9a-f]{64}\n"));

  // Comments and whitespace do not change it.
  std::string fmt_file = dir.File("fmt.tile");
  testing::WriteFile(fmt_file, Kiln({"ir", "fmt", file}).out);
  EXPECT_EQ(Kiln({"ir", "hash", fmt_file}).out, result.out);
}

TEST(CliTest, StatusWithoutADaemonFails) {
  testing::TempDir dir;
  testing::RunResult result =
      Kiln({"status", "--address", "unix:" + dir.File("none.sock")});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("none.sock"));
  EXPECT_THAT(result.err, HasSubstr("is kilnd running?"));
}

TEST(CliTest, StatusOfARunningDaemon) {
  auto kilnd = testing::KilndProcess::Start(KILN_KILND_PATH);
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  testing::RunResult result =
      Kiln({"status", "--address", (*kilnd)->socket_path()});
  EXPECT_EQ(result.exit_code, 0) << result.err;
  EXPECT_THAT(result.out, HasSubstr("kilnd " KILN_VERSION " at " +
                                    (*kilnd)->address() + ": serving"));
  EXPECT_THAT(result.out, ContainsRegex("targets: cpu"));
  EXPECT_THAT(result.out, ContainsRegex("cache: 0 kernels"));
  EXPECT_THAT(result.out,
              ContainsRegex("0 hits \\(0 from memory\\), 0 misses"));
}

TEST(CliTest, CompileGoesThroughTheDaemonWhenAsked) {
  auto kilnd = testing::KilndProcess::Start(KILN_KILND_PATH);
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  testing::TempDir dir;
  const std::string file = dir.File("scale.tile");
  testing::WriteFile(file, ::kiln::testing::kScaleKernel);
  const std::vector<std::string> compile = {
      "compile", file, "-D", "B=64", "--daemon", (*kilnd)->address()};

  testing::RunResult first = Kiln(compile);
  EXPECT_EQ(first.exit_code, 0) << first.err;
  EXPECT_THAT(first.out, HasSubstr("via      kilnd at " + (*kilnd)->address()));
  EXPECT_THAT(first.out, ContainsRegex("tier     compiled \\([0-9.]+ ms\\)"));
  EXPECT_THAT(first.out, ContainsRegex("key      [0-9a-f]{64}"));

  std::vector<std::string> again = compile;
  again.insert(again.end(), {"-o", dir.File("scale.so")});
  testing::RunResult second = Kiln(again);
  EXPECT_EQ(second.exit_code, 0) << second.err;
  EXPECT_THAT(second.out, HasSubstr("tier     memory"));
  EXPECT_EQ(testing::ReadFile(dir.File("scale.so")).substr(0, 4),
            "\x7f"
            "ELF");

  // In process: the same key, no daemon named.
  testing::RunResult local = Kiln({"compile", file, "-D", "B=64", "--local"});
  EXPECT_EQ(local.exit_code, 0) << local.err;
  EXPECT_THAT(local.out, Not(HasSubstr("via")));
  std::smatch a, b;
  ASSERT_TRUE(std::regex_search(first.out, a, std::regex("key      (\\w+)")));
  ASSERT_TRUE(std::regex_search(local.out, b, std::regex("key      (\\w+)")));
  EXPECT_EQ(a[1], b[1]);

  // The daemon's diagnostics reach the user as the compiler's would.
  testing::WriteFile(dir.File("bad.tile"), "kernel (\n");
  testing::RunResult bad =
      Kiln({"compile", dir.File("bad.tile"), "--daemon", (*kilnd)->address()});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.err, HasSubstr("bad.tile:1:"));

  // Output that needs the compiler's internals cannot come from a daemon.
  std::vector<std::string> emit = compile;
  emit.insert(emit.end(), {"--emit", "llvm"});
  EXPECT_EQ(Kiln(emit).exit_code, 2);
}

TEST(CliTest, CompileThroughAnUnreachableDaemonFails) {
  testing::TempDir dir;
  testing::WriteFile(dir.File("scale.tile"), ::kiln::testing::kScaleKernel);
  testing::RunResult result =
      Kiln({"compile", dir.File("scale.tile"), "-D", "B=64", "--daemon",
            "unix:" + dir.File("none.sock")});
  EXPECT_EQ(result.exit_code, 1);
  EXPECT_THAT(result.err, HasSubstr("none.sock"));
}

TEST(CliTest, BindingsAreNameEqualsIntegerLists) {
  testing::TempDir dir;
  testing::WriteFile(dir.File("scale.tile"), ::kiln::testing::kScaleKernel);
  // A comma-separated list binds several at once; 0x40 is 64.
  testing::RunResult ok =
      Kiln({"compile", dir.File("scale.tile"), "-D", "B=0x40,N=100", "--local",
            "--emit", "metadata"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_THAT(ok.out, HasSubstr("grid 2 1 1"));
  for (const char* bad : {"B=x", "B", "=64", "B=64junk"}) {
    testing::RunResult r =
        Kiln({"compile", dir.File("scale.tile"), "-D", bad, "--local"});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_THAT(r.err, HasSubstr("kiln compile: error: -D expects "
                                 "NAME=INTEGER, got '" +
                                 std::string(bad) + "'"));
  }
}

TEST(CliTest, CompileForGfx90aEmitsHipSource) {
  testing::TempDir dir;
  testing::WriteFile(dir.File("gemm.tile"), kGemm);
  const std::vector<std::string> base = {"compile", dir.File("gemm.tile"),
                                         "-D",      "BM=64,BN=64,BK=32",
                                         "--local", "--target",
                                         "gfx90a"};
  // --emit ptx is CUDA's: a usage error before compiling.
  std::vector<std::string> ptx = base;
  ptx.insert(ptx.end(), {"--emit", "ptx"});
  testing::RunResult p = Kiln(ptx);
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_THAT(p.err, HasSubstr("--emit ptx needs a CUDA target (sm_*)"));
  std::vector<std::string> source = base;
  source.insert(source.end(), {"--emit", "source"});
  testing::RunResult r = Kiln(source);
  if (r.exit_code == 1 &&
      r.err.find("hiprtc is not installed") != std::string::npos) {
    GTEST_SKIP() << "hiprtc (libamdhip64) is not installed: " << r.err;
  }
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("#include \"kiln/kiln.hip.h\""));
  EXPECT_THAT(r.out, HasSubstr("kiln::gemm_ss<kiln::f16_t, 64, 64, 32"));
  std::vector<std::string> metadata = base;
  metadata.insert(metadata.end(), {"--emit", "metadata"});
  testing::RunResult m = Kiln(metadata);
  EXPECT_EQ(m.exit_code, 0) << m.err;
  EXPECT_THAT(m.out, HasSubstr("target gfx90a"));
  // gfx942 needs a newer hiprtc than Debian's 5.2.
  std::vector<std::string> mi300 = {"compile", dir.File("gemm.tile"),
                                    "-D",      "BM=64,BN=64,BK=32",
                                    "--local", "--target",
                                    "gfx942"};
  testing::RunResult t = Kiln(mi300);
  if (t.exit_code != 0) {
    EXPECT_EQ(t.exit_code, 1);
    EXPECT_THAT(t.err, HasSubstr("needs hiprtc from ROCm 6.0 or newer"));
  }
}

TEST(CliTest, PrintPlanShowsTheKernelPlanWithoutAToolchain) {
  testing::TempDir dir;
  testing::WriteFile(dir.File("gemm.tile"), kGemm);
  testing::RunResult r =
      Kiln({"compile", dir.File("gemm.tile"), "-D", "BM=128,BN=128,BK=64",
            "--target", "sm_90a", "--print-plan"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("pipeline          warp-specialised TMA ring "
                               "over loop k"));
  EXPECT_THAT(r.out, HasSubstr("persistent      yes"));
  EXPECT_THAT(r.out, HasSubstr("Acc: registers, wgmma accumulator"));
  // (No summary: the plan alone.)
  EXPECT_THAT(r.out, Not(HasSubstr("key      ")));
  testing::RunResult cpu =
      Kiln({"compile", dir.File("gemm.tile"), "-D", "BM=128,BN=128,BK=64",
            "--target", "cpu", "--print-plan"});
  EXPECT_EQ(cpu.exit_code, 1);
  EXPECT_THAT(cpu.err, HasSubstr("gemm.tile: kernel 'gemm': the cpu target "
                                 "has no kernel plan (GPU targets only)"));
}

}  // namespace
}  // namespace kiln::cli
