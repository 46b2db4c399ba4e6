// `kiln ir check --prove` (compiler/passes/access_report.h): the findings
// on small kernels, one per verdict, and the report of every corpus kernel
// against its golden (tests/compiler/prove_golden/FILE.txt;
// KILN_UPDATE_GOLDENS=1 rewrites them).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "compiler/ir/parser.h"
#include "compiler/ir/verifier.h"
#include "compiler/passes/access_report.h"
#include "compiler/tuning_space.h"
#include "tests/compiler/corpus_util.h"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

// The report of the only kernel of `source` (at the first tuning point).
std::string Report(const std::string& source) {
  ParseResult parsed = Parse(source);
  EXPECT_TRUE(parsed.ok());
  EXPECT_TRUE(Verify(parsed.program).empty());
  if (parsed.program.kernels.empty()) return "";
  const Kernel& k = parsed.program.kernels[0];
  std::vector<TunableValues> space = EnumerateTuningSpace(k, 1);
  absl::StatusOr<AccessReport> r =
      ProveAccesses(k, space.empty() ? TunableValues{} : space[0]);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? FormatAccessReport(*r, "k.tile") : "";
}

TEST(ProveTest, AnAccessInsideItsBufferIsProven) {
  const std::string r = Report(R"(
kernel k(X: f32[N], Y: f32[N])
  grid(ceildiv(N, 64)) threads(64) (b) {
  alloc fragment t: f32[64]
  parallel (i) in (64) {
    if b * 64 + i < N {
      t[i] = X[b * 64 + i]
    }
  }
  copy t -> Y[b * 64:+64]
}
)");
  EXPECT_THAT(r, HasSubstr("k.tile:7:14: proven: load X[b * 64 + i]"));
  EXPECT_THAT(r, HasSubstr("k.tile:7:7: proven: store t[i]"));
  // The tensor region of the last block runs past N.
  EXPECT_THAT(r, HasSubstr("k.tile:10:3: checked at run time: copy tensor "
                           "region Y[b * 64:+64]: tests `b * 64 + 64 <= N`"));
  EXPECT_THAT(r, HasSubstr("; out of range at"));
}

TEST(ProveTest, AnUnprovenIndexIsCheckedWithACounterexample) {
  const std::string r = Report(R"(
kernel k(X: f32[N], I: i32[M], Y: f32[M])
  grid(1) threads(64) (b) {
  alloc fragment t: f32[64]
  parallel (i) in (64) {
    t[i] = X[i + N / 2]
  }
  copy t -> Y[0:+64]
}
)");
  // N = 0 or 1 puts i + N / 2 at or past N for i = 0 already.
  EXPECT_THAT(r, HasSubstr("checked at run time: load X[i + N / 2]: tests "
                           "`i + N / 2 < N` (reads 0 past it); out of range "
                           "at "));
}

TEST(ProveTest, AnAccessPastItsBufferWhateverTheValuesIsOutOfRange) {
  const std::string r = Report(R"(
kernel k(X: f32[N], Y: f32[64])
  grid(1) threads(64) (b) {
  alloc fragment t: f32[64]
  parallel (i) in (64) {
    t[i] = X[N + i]
  }
  copy t -> Y
}
)");
  EXPECT_THAT(r, HasSubstr("out of range: load X[N + i]: `N + i < N` never "
                           "holds"));
  EXPECT_THAT(r, HasSubstr("0 checked at run time, 1 out of range"));
}

TEST(ProveTest, TwoIterationsWritingOneSharedElementAreARace) {
  const std::string r = Report(R"(
kernel k(X: f32[4, 8], Y: f32[4])
  grid(1) threads(32) (b) {
  alloc shared s: f32[4]
  alloc shared w: f32[4, 8]
  parallel (i, j) in (4, 8) {
    s[i] = X[i, j]
    w[i, j] = X[i, j]
    if j == 0 {
      s[i] = X[i, 0]
    }
    let last = j - 7
    if last == 0 {
      s[i] = X[i, 7]
    }
  }
  parallel (r) in (4) {
    for k in serial(2) {
      w[r, k] = X[r, k]
      w[r, k * 0 + 2] = X[r, 2]
    }
  }
  parallel (c) in (2) {
    for m in serial(4) {
      w[m, c * 4 + m] = X[m, c]
      w[m, 0] = X[m, c]
    }
  }
  copy s -> Y
}
)");
  // s[i] for every j: iterations (i, j) and (i, j') with j != j'.
  EXPECT_THAT(r, HasSubstr("k.tile:7:5: race: store s[i]: iterations (i = "));
  EXPECT_THAT(r, HasSubstr("write the same element of shared tile 's'"));
  // w[i, j] is one element per iteration; s[i] under `j == 0` too.
  EXPECT_THAT(r, Not(HasSubstr("race: store w[i, j]")));
  EXPECT_THAT(r, Not(HasSubstr("k.tile:10:7: race")));
  // (and under a test of a let of the indices)
  EXPECT_THAT(r, Not(HasSubstr("k.tile:14:7: race")));
  // In a loop of the body: one iteration of the parallel storing twice to
  // one element is no race; two iterations at any steps are.
  EXPECT_THAT(r, Not(HasSubstr("race: store w[r, k]")));
  EXPECT_THAT(r, Not(HasSubstr("race: store w[m, c * 4 + m]")));
  EXPECT_THAT(r, HasSubstr("race: store w[m, 0]: iterations (c = "));
  EXPECT_THAT(r, HasSubstr(" 2 races"));
}

TEST(ProveTest, ACompoundStoreTwoIterationsShareIsAtomic) {
  const std::string r = Report(R"(
kernel k(Keys: i32[64], X: f32[64], Y: f32[32])
  grid(1) threads(64) (b) {
  alloc shared h: f32[32]
  fill h, 0
  parallel (i) in (64) {
    h[Keys[i] % 32] += X[i]
    h[i / 2] max= X[i]
    h[i % 32] = X[i]
  }
  parallel (j) in (32) {
    h[j] min= X[j]
  }
  copy h -> Y
}
)");
  // An index read from memory: no pair to show.
  EXPECT_THAT(r, HasSubstr("k.tile:7:5: atomic: store h[Keys[i] % 32] +=: "
                           "the prover cannot show that iterations of "
                           "'parallel' write distinct elements of shared "
                           "tile 'h'; updated atomically"));
  // A collision the prover finds: i and i + 1 for an even i.
  EXPECT_THAT(r, HasSubstr("k.tile:8:5: atomic: store h[i / 2] max=: "
                           "iterations (i = "));
  EXPECT_THAT(r, HasSubstr("k.tile:9:5: race: store h[i % 32]"));
  EXPECT_THAT(r, Not(HasSubstr("k.tile:12:5: atomic")));
  EXPECT_THAT(r, HasSubstr(" 1 races, 2 atomic"));
}

TEST(ProveTest, ARunTimeExtentIsClippedToItsTile) {
  const std::string r = Report(R"(
kernel k(X: f32[N], Y: f32[N], n: i64)
  grid(1) threads(64) (b) {
  alloc fragment t: f32[64]
  clear t
  copy X[0:+n] -> t[0:+n]
  copy t -> Y[0:+64]
}
)");
  EXPECT_THAT(r, HasSubstr("k.tile:6:3: checked at run time: copy tile "
                           "region t[0:+n]: tests `n <= 64` (clipped to the "
                           "tile at run time); out of range at N = 0, b = 0, "
                           "n = 65"));
}

// An integer scalar parameter is a name the prover reasons about: an
// `assume` bounding it (checked at launch) proves the run-time extent in
// its tile and, with the symbol's facts, in its tensor. An unsigned one is
// never negative.
TEST(ProveTest, AnIntegerScalarParameterIsBoundedByItsAssumptions) {
  const std::string bounded = Report(R"(
kernel k(X: f32[N], Y: f32[N], n: i32)
  assume n >= 0, n <= 64, N % 64 == 0
  grid(ceildiv(N, 64)) threads(64) (b) {
  alloc shared t: f32[64]
  copy X[b * 64:+64] -> t
  copy t[0:+n] -> Y[b * 64:+n]
}
)");
  EXPECT_THAT(bounded, HasSubstr("k.tile:7:3: proven: copy tile region "
                                 "t[0:+n]"));
  EXPECT_THAT(bounded, HasSubstr("k.tile:7:3: proven: copy tensor region "
                                 "Y[b * 64:+n]"));
  EXPECT_THAT(bounded, HasSubstr("4 proven, 0 checked at run time"));
  const std::string unsigned_index = Report(R"(
kernel k(X: f32[N], Y: f32[64], i: u32)
  assume i < 64
  grid(1) threads(64) (b) {
  alloc fragment t: f32[64]
  clear t
  t[i] = 1.0
  copy t -> Y
}
)");
  EXPECT_THAT(unsigned_index, HasSubstr("proven: store t[i]"));
}

// Every corpus kernel's report, as its golden file has it.
TEST(ProveTest, CorpusReportsMatchTheirGoldens) {
  const fs::path dir = fs::path(KILN_TEST_DATA_DIR) / "prove_golden";
  if (testing::UpdateGoldens()) fs::create_directories(dir);
  for (const fs::path& f : testing::CorpusFiles()) {
    SCOPED_TRACE(f.filename().string());
    ParseResult parsed = Parse(testing::ReadFileOrDie(f));
    ASSERT_TRUE(parsed.ok());
    std::string text;
    for (const Kernel& k : parsed.program.kernels) {
      std::vector<TunableValues> space = EnumerateTuningSpace(k, 1);
      absl::StatusOr<AccessReport> r =
          ProveAccesses(k, space.empty() ? TunableValues{} : space[0]);
      ASSERT_TRUE(r.ok()) << r.status();
      text += FormatAccessReport(*r, f.filename().string());
    }
    const fs::path golden = dir / (f.stem().string() + ".txt");
    if (testing::UpdateGoldens()) {
      std::ofstream(golden) << text;
      continue;
    }
    ASSERT_TRUE(fs::exists(golden))
        << golden << " is missing (KILN_UPDATE_GOLDENS=1 writes it)";
    EXPECT_EQ(text, testing::ReadFileOrDie(golden));
  }
}

}  // namespace
}  // namespace kiln::compiler
