// The compile API: errors, keys and the pass dump (running kernels is
// tests/e2e).
#include "compiler/compile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "compiler/ir/diagnostic.h"
#include "compiler/ir/format.h"
#include "tests/support/test_kernels.h"

namespace kiln::compiler {
namespace {

constexpr const char* kScale = ::kiln::testing::kScaleKernel;

CompileOptions Options(int64_t b) {
  CompileOptions o;
  o.bindings = {{"B", b}};
  o.filename = "scale.tile";
  return o;
}

TEST(CompileTest, ProducesASharedObjectAndMetadata) {
  auto k = Compile(kScale, Options(64));
  ASSERT_TRUE(k.ok()) << k.status();
  EXPECT_EQ(k->name, "scale");
  EXPECT_EQ(k->binary.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_NE(k->metadata.find("kiln-kernel 1"), std::string::npos);
  EXPECT_NE(k->metadata.find("grid (ceildiv N 64)"), std::string::npos)
      << k->metadata;
  EXPECT_EQ(k->key.size(), 64u);
  EXPECT_GT(k->timings.total_ms, 0);
}

TEST(CompileTest, ALoadedKernelGivesTheKeyAndCompilesWithoutTheText) {
  auto loaded = Load(kScale, Options(64));
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  auto key = BinaryKey(kScale, Options(64));
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(loaded->key, *key);
  EXPECT_EQ(loaded->key_text, *BinaryKeyText(kScale, Options(64)));
  EXPECT_EQ(loaded->kernel.name, "scale");
  auto from_loaded = Compile(*loaded);
  ASSERT_TRUE(from_loaded.ok()) << from_loaded.status();
  auto from_text = Compile(kScale, Options(64));
  ASSERT_TRUE(from_text.ok()) << from_text.status();
  EXPECT_EQ(from_loaded->key, *key);
  EXPECT_EQ(from_loaded->metadata, from_text->metadata);
  EXPECT_EQ(from_loaded->lowered_ir, from_text->lowered_ir);
  // A binding error is the compile's (the passes'), not the load's.
  CompileOptions unbound = Options(64);
  unbound.bindings.clear();
  auto bad = Load(kScale, unbound);
  ASSERT_TRUE(bad.ok()) << bad.status();
  auto compiled = Compile(*bad);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CompileTest, PassErrorsAreLocatedByValue) {
  // The tunable's own line and column, from the error's location (not from
  // its text).
  const std::string text = kScale;
  const size_t at = text.find("tune B") + 5;  // (the name's column)
  ASSERT_NE(at, std::string::npos + 5);
  const int line =
      1 + static_cast<int>(std::count(text.begin(), text.begin() + at, '\n'));
  const int col = static_cast<int>(at - text.rfind('\n', at));
  CompileOptions missing = Options(64);
  missing.bindings.clear();
  auto m = Compile(kScale, missing);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(
      std::string(m.status().message())
          .rfind(StrCat("scale.tile:", line, ":", col, ": error: tunable 'B'"),
                 0),
      0u)
      << m.status();
  EXPECT_NE(m.status().message().find("(kernel 'scale', pass specialize)"),
            std::string::npos);
  // A message that merely starts with digits is not taken for a location.
  const absl::Status plain = absl::InvalidArgumentError("12:3: not a place");
  EXPECT_FALSE(ErrorLocation(plain).has_value());
  Loc loc;
  loc.line = 7;
  loc.col = 9;
  const absl::Status located = LocatedError(loc, "bad tile");
  EXPECT_EQ(located.message(), "bad tile");
  ASSERT_TRUE(ErrorLocation(located).has_value());
  EXPECT_EQ(ErrorLocation(located)->line, 7);
  EXPECT_EQ(ErrorLocation(located)->col, 9);
}

TEST(CompileTest, KeyDependsOnBindingsNotOnSpelling) {
  auto a = BinaryKey(kScale, Options(64));
  auto b = BinaryKey(kScale, Options(128));
  std::string renamed = kScale;
  renamed.replace(renamed.find("T: f32"), 1, "Tile");
  for (size_t p; (p = renamed.find("T[")) != std::string::npos;) {
    renamed.replace(p, 1, "Tile");
  }
  renamed.replace(renamed.find("-> T\n"), 4, "-> Tile");
  renamed.replace(renamed.find("copy T ->"), 6, "copy Tile");
  auto c = BinaryKey("// a comment\n" + renamed, Options(64));
  ASSERT_TRUE(a.ok() && b.ok()) << a.status() << b.status();
  ASSERT_TRUE(c.ok()) << c.status() << "\n" << renamed;
  EXPECT_NE(*a, *b);
  EXPECT_EQ(*a, *c);
  auto compiled = Compile(kScale, Options(64));
  ASSERT_TRUE(compiled.ok());
  EXPECT_EQ(compiled->key, *a);
}

TEST(CompileTest, ErrorsAreInvalidArgumentWithLocations) {
  auto bad =
      Compile("kernel k() grid(1) threads(1) (b) { copy X -> Y }", Options(64));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("scale.tile:1:"), std::string::npos)
      << bad.status();

  CompileOptions missing = Options(64);
  missing.bindings.clear();
  auto m = Compile(kScale, missing);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("tunable 'B'"), std::string::npos);

  auto not_candidate = Compile(kScale, Options(96));
  ASSERT_FALSE(not_candidate.ok());
  EXPECT_NE(not_candidate.status().message().find("not one of its candidates"),
            std::string::npos);

  CompileOptions typo = Options(64);
  typo.bindings["Q"] = 3;
  auto t = Compile(kScale, typo);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("'Q' is neither a tunable nor a symbol"),
            std::string::npos);

  CompileOptions gpu = Options(64);
  gpu.target = "sm_99";
  auto g = Compile(kScale, gpu);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("unknown target 'sm_99'"),
            std::string::npos);
}

TEST(CompileTest, LaunchDimsAreRangeCheckedAfterBinding) {
  constexpr char kThreads[] = R"(
kernel k(X: f32[N])
  tune T in [128, 2048]
  grid(ceildiv(N, 64)) threads(T) (bx) {
  alloc fragment F: f32[64]
  copy X[bx * 64:+64] -> F
  copy F -> X[bx * 64:+64]
}
)";
  CompileOptions ok;
  ok.bindings = {{"T", 128}};
  EXPECT_TRUE(Compile(kThreads, ok).ok());
  CompileOptions too_many;
  too_many.bindings = {{"T", 2048}};
  too_many.filename = "k.tile";
  auto bad = Compile(kThreads, too_many);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(
      bad.status().message().find(
          "k.tile:4:32: error: threads = 2048 for T=2048; expected 1 to 1024"),
      std::string::npos)
      << bad.status();
  // A grid fixed to zero blocks by a bound symbol.
  CompileOptions empty;
  empty.bindings = {{"T", 128}, {"N", 0}};
  auto zero = Compile(kThreads, empty);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("must be positive"), std::string::npos)
      << zero.status();
}

TEST(CompileTest, KernelSelection) {
  std::string two =
      std::string(kScale) + "kernel other() grid(1) threads(1) (b) { }\n";
  auto none = Compile(two, Options(64));
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("has 2 kernels (scale, other)"),
            std::string::npos);
  CompileOptions pick = Options(64);
  pick.kernel = "scale";
  EXPECT_TRUE(Compile(two, pick).ok());
  pick.kernel = "nope";
  EXPECT_EQ(Compile(two, pick).status().code(), absl::StatusCode::kNotFound);
}

// Tensor element accesses are guarded on every target (reads out of range
// yield zero, stores are skipped), except where the facts in scope prove
// the index in range: the enclosing `if`, the loop and parallel ranges,
// constants, `%` by a constant.
// The first `chars` of the kernel after the guard-accesses pass, compiled
// for `target` (GPU targets: up to the plan); empty (and a failure) when it
// does not compile.
std::string GuardedIr(const char* text, const std::string& target,
                      size_t chars) {
  CompileOptions o;
  o.target = target;
  o.print_ir_after_all = true;
  o.plan_only = target != "cpu";
  auto k = Compile(text, o);
  EXPECT_TRUE(k.ok()) << k.status();
  if (!k.ok()) return "";
  const size_t at = k->ir_dump.find("// ----- after guard-accesses");
  EXPECT_NE(at, std::string::npos);
  return at == std::string::npos ? "" : k->ir_dump.substr(at, chars);
}

// The IR after pass `pass` of `text` compiled for `target`.
std::string IrAfter(const char* text, const std::string& target,
                    const std::string& pass) {
  CompileOptions o;
  o.target = target;
  o.print_ir_after_all = true;
  o.plan_only = target != "cpu";
  auto k = Compile(text, o);
  EXPECT_TRUE(k.ok()) << k.status();
  if (!k.ok()) return "";
  const std::string head = "// ----- after " + pass + " -----";
  const size_t at = k->ir_dump.find(head);
  EXPECT_NE(at, std::string::npos) << pass;
  if (at == std::string::npos) return "";
  const size_t end = k->ir_dump.find("// ----- after", at + head.size());
  return k->ir_dump.substr(at, end == std::string::npos ? end : end - at);
}

// TileLang's epilogue, element stores of a tile in its own order under a
// bound on a row, is the masked copy on every target; stores in another
// order, of a computed value or with an else stay as written.
TEST(CompileTest, ElementStoresOfATileInItsOrderBecomeACopy) {
  const char* kText =
      "kernel k(X: f32[M, N], Y: f16[M, N], Z: f32[N, M], rows: i32)\n"
      "  grid(ceildiv(N, 64), ceildiv(M, 32)) threads(128) (bx, by) {\n"
      "  alloc fragment C: f32[32, 64]\n"
      "  copy X[by * 32:+32, bx * 64:+64] -> C\n"
      "  parallel (i, j) in (32, 64) {\n"
      "    if i < rows {\n"
      "      Y[by * 32 + i, bx * 64 + j] = C[i, j]\n"
      "    }\n"
      "  }\n"
      "  parallel (a, b) in (32, 64) {\n"
      "    Y[a + by * 32, b] = C[a, b]\n"
      "  }\n"
      "  parallel (p, q) in (32, 64) {\n"
      "    Z[bx * 64 + q, by * 32 + p] = C[p, q]\n"
      "  }\n"
      "  parallel (u, w) in (32, 64) {\n"
      "    Y[by * 32 + u, w] = C[u, w] * 2.0\n"
      "  }\n"
      "}\n";
  for (const char* target : {"cpu", "sm_80", "sm_90a", "gfx90a"}) {
    SCOPED_TRACE(target);
    const std::string ir = IrAfter(kText, target, "stores-to-copies");
    EXPECT_NE(
        ir.find("  copy C[0:+rows, :] -> Y[by * 32:+rows, bx * 64:+64]\n"),
        std::string::npos)
        << ir;
    EXPECT_NE(ir.find("  copy C -> Y[by * 32:+32, 0:+64]\n"), std::string::npos)
        << ir;
    EXPECT_NE(ir.find("    Z[bx * 64 + q, by * 32 + p] = C[p, q]\n"),
              std::string::npos)
        << ir;
    EXPECT_NE(ir.find("    Y[by * 32 + u, w] = C[u, w] * 2.0\n"),
              std::string::npos)
        << ir;
  }
}

TEST(CompileTest, ALoadOfWhatATileAlreadyHoldsIsReused) {
  // TileLang's online softmax with the row in one tile: both loops run
  // once, so the write loop's load of X is the log-sum-exp loop's again.
  const char* kText =
      "kernel k(X: f16[M, 256], Y: f16[M, 256], P: i32[M]) grid(M) "
      "threads(64) (bx) {\n"
      "  alloc fragment x: f16[256]\n"
      "  alloc fragment y: f16[256]\n"
      "  alloc fragment m: f32[1]\n"
      "  for i in serial(0, 1) {\n"
      "    copy X[bx, i * 256:+256] -> x\n"
      "    reduce.max x -> m, dim=0\n"
      "  }\n"
      "  for i2 in serial(0, 1) {\n"
      "    copy X[bx, i2 * 256:+256] -> x\n"
      "    parallel (j) in (256) {\n"
      "      y[j] = x[j]\n"
      "    }\n"
      "    copy y -> Y[bx, i2 * 256:+256]\n"
      "  }\n"
      // Not again: the tile was written since, the loop runs twice, or
      // the row comes from a tensor's element (P).
      "  copy X[bx, 0:+256] -> y\n"
      "  fill x, 0.0\n"
      "  copy X[bx, 0:+256] -> x\n"
      "  for t in serial(0, 2) {\n"
      "    copy X[bx, 0:+256] -> x\n"
      "    copy X[bx, 0:+256] -> y\n"
      "    copy x -> Y[bx, t * 128:+256]\n"
      "  }\n"
      "  copy X[P[bx], 0:+256] -> x\n"
      "  copy X[P[bx], 0:+256] -> x\n"
      "}\n";
  for (const char* target : {"cpu", "sm_80", "sm_90a", "gfx90a"}) {
    SCOPED_TRACE(target);
    const std::string ir = IrAfter(kText, target, "reuse-loads");
    auto count = [&](const std::string& what) {
      size_t n = 0;
      for (size_t at = ir.find(what); at != std::string::npos;
           at = ir.find(what, at + 1)) {
        ++n;
      }
      return n;
    };
    EXPECT_EQ(count("copy X[bx, i * 256:+256] -> x\n"), 1u) << ir;
    EXPECT_EQ(count("copy X[bx, i2 * 256:+256] -> x\n"), 0u) << ir;
    // After the fill, and inside the loop of two trips, x loads again; y
    // held the row before the loop, but the loop writes y.
    EXPECT_EQ(count("copy X[bx, 0:+256] -> x\n"), 2u) << ir;
    EXPECT_EQ(count("copy X[bx, 0:+256] -> y\n"), 2u) << ir;
    EXPECT_EQ(count("copy X[P[bx], 0:+256] -> x\n"), 2u) << ir;
  }
}

TEST(CompileTest, TensorElementAccessesAreGuardedUnlessProvenInRange) {
  const char* kText =
      "kernel k(X: f32[M], Y: f32[M], W: f32[8]) grid(ceildiv(M, 64)) "
      "threads(64) (bx) {\n"
      "  alloc fragment T: f32[64]\n"
      "  copy X[bx * 64:+64] -> T\n"
      "  parallel (i) in (64) {\n"
      "    Y[bx * 64 + i] = T[i] + W[i % 8] + X[bx * 64 + i + 1]\n"
      "    if bx * 64 + i + 1 < M {\n"
      "      T[i] = X[bx * 64 + i + 1]\n"
      "    }\n"
      "  }\n"
      "}\n";
  for (const char* target : {"cpu", "sm_90a", "gfx90a"}) {
    SCOPED_TRACE(target);
    const std::string ir = GuardedIr(kText, target, 1200);
    // The store: skipped past M (its lower bound is proven).
    EXPECT_NE(ir.find("if bx * 64 + i < M {\n      Y[bx * 64 + i] = T[i] + "
                      "W[i % 8] + select(bx * 64 + i + 1 < M, "
                      "X[bx * 64 + i + 1], f32(0))"),
              std::string::npos)
        << ir;
    // Under its own test, the load needs none.
    EXPECT_NE(ir.find("      T[i] = X[bx * 64 + i + 1]\n"), std::string::npos)
        << ir;
  }
}

TEST(CompileTest, RunTimeTileRegionsAreClippedOnEveryTarget) {
  // A run-time extent becomes a parallel over the tile's dim under a test
  // of the extent, beside the whole-tile copy taken when the extent covers
  // the tile; a tile load at a data index reads zero outside the tile; a
  // constant region the prover places inside its tile stays a copy.
  const char* kText =
      "kernel k(X: f32[M], Y: f32[M], n: i32) grid(1) threads(64) (bx) {\n"
      "  alloc shared t: f32[64]\n"
      "  alloc fragment u: f32[32]\n"
      "  copy X[0:+n] -> t[0:+n]\n"
      "  for q in serial(2) {\n"
      "    copy t[q * 32:+32] -> u\n"
      "  }\n"
      "  parallel (i) in (32) {\n"
      "    Y[i] = t[i32(X[i])] + u[i]\n"
      "  }\n"
      "}\n";
  for (const char* target : {"cpu", "sm_80", "sm_90a", "gfx90a"}) {
    SCOPED_TRACE(target);
    const std::string ir = GuardedIr(kText, target, 1500);
    EXPECT_NE(ir.find("  if n >= 64 {\n    copy X[0:+64] -> t\n  } else {\n"
                      "    parallel (kiln_r0) in (64) {\n"
                      "      if kiln_r0 < n {\n"
                      "        t[kiln_r0] = select(kiln_r0 < M, "
                      "X[kiln_r0], f32(0))"),
              std::string::npos)
        << ir;
    EXPECT_NE(ir.find("    copy t[q * 32:+32] -> u\n"), std::string::npos)
        << ir;
    EXPECT_NE(ir.find("select(0 <= i32(select(i < M, X[i], f32(0))) && "
                      "i32(select(i < M, X[i], f32(0))) < 64, "
                      "t[i32(select(i < M, X[i], f32(0)))], f32(0))"),
              std::string::npos)
        << ir;
  }
}

// A back end's refusal (a target limit) names the file, the kernel's line
// and column, and the kernel, from the error's location value.
TEST(CompileTest, BackEndLimitsAreLocatedErrors) {
  const std::map<std::string, std::string> cases = {
      {"the kernel needs 262144 bytes of shared memory per block; sm_80 "
       "allows",
       "kernel big(X: f32[256, 256]) grid(1) threads(128) (bx) {\n"
       "  alloc shared t: f32[256, 256]\n"
       "  copy X -> t\n"
       "  copy t -> X\n"
       "}\n"},
      {"cluster(...) needs",
       "kernel pair(X: f32[256]) grid(2) threads(128) cluster(2, 1, 1) "
       "(bx) {\n"
       "  alloc fragment t: f32[128]\n"
       "  copy X[bx * 128:+128] -> t\n"
       "  copy t -> X[bx * 128:+128]\n"
       "}\n"},
  };
  for (const auto& [want, text] : cases) {
    SCOPED_TRACE(want);
    CompileOptions o;
    o.target = "sm_80";
    o.filename = "limit.tile";
    auto k = Compile("\n" + text, o);
    ASSERT_FALSE(k.ok());
    if (absl::IsFailedPrecondition(k.status())) {
      GTEST_SKIP() << "no CUDA toolchain here: " << k.status();
    }
    EXPECT_TRUE(absl::IsInvalidArgument(k.status())) << k.status();
    const std::string msg(k.status().message());
    EXPECT_EQ(msg.rfind(StrCat("limit.tile:2:1: error: ", want), 0), 0u) << msg;
    EXPECT_NE(msg.find("(kernel '"), std::string::npos) << msg;
  }
}

TEST(CompileTest, UnprovenGemmRegionIsOneLocatedErrorOnEveryTarget) {
  const char* kText =
      "kernel k(A: f16[64, 64], s: i32) grid(1) threads(128) (bx) {\n"
      "  alloc shared a: f16[64, 64]\n"
      "  alloc fragment c: f32[16, 64]\n"
      "  copy A -> a\n"
      "  gemm a[s:+16, :], a -> c\n"
      "}\n";
  for (const char* target : {"cpu", "sm_80", "sm_90a", "gfx90a"}) {
    SCOPED_TRACE(target);
    CompileOptions o;
    o.target = target;
    o.filename = "g.tile";
    o.plan_only = std::string(target) != "cpu";
    auto k = Compile(kText, o);
    ASSERT_FALSE(k.ok());
    EXPECT_TRUE(absl::IsInvalidArgument(k.status())) << k.status();
    EXPECT_EQ(std::string(k.status().message())
                  .rfind("g.tile:5:8: error: this region of tile 'a' is not "
                         "shown to lie inside it",
                         0),
              0u)
        << k.status();
  }
}

TEST(CompileTest, PrintIrAfterAllShowsEveryPass) {
  CompileOptions o = Options(64);
  o.print_ir_after_all = true;
  auto k = Compile(kScale, o);
  ASSERT_TRUE(k.ok()) << k.status();
  for (const char* pass : {"specialize", "guard-accesses", "layout-inference",
                           "pipeline-loops", "lower-tile-ops", "simplify"}) {
    EXPECT_NE(k->ir_dump.find(std::string("// ----- after ") + pass),
              std::string::npos)
        << pass;
  }
  EXPECT_NE(k->ir_dump.find("// layout T: identity [64] on thread 0"),
            std::string::npos);
}

}  // namespace
}  // namespace kiln::compiler

namespace kiln::compiler {
namespace {

// A program the verifier accepts but the CPU back end cannot carry (an
// assumption using `^`, which the launch metadata's expressions lack) gets a
// clear error naming the operator, not an abort.
TEST(CompileTest, UnlowerableConstructIsAClearError) {
  CompileOptions o;
  o.filename = "xor.tile";
  auto k = Compile(
      "kernel k(A: f32[N]) assume (N ^ 1) > 0 grid(1) threads(1) (b) { }", o);
  ASSERT_FALSE(k.ok());
  EXPECT_EQ(k.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(k.status().message().find("^"), std::string::npos) << k.status();
  EXPECT_NE(k.status().message().find("xor.tile"), std::string::npos)
      << k.status();
}

}  // namespace
}  // namespace kiln::compiler
