// The valid corpus (tests/compiler/corpus/*.tile): every program parses,
// verifies clean, prints exactly as its golden (tests/compiler/golden/), and
// round-trips through the canonical print. Together the programs cover every
// construct of the language.
//
// Regenerate the goldens after an intended printer change with
//   KILN_UPDATE_GOLDENS=1 ./compiler_tests --gtest_filter='Corpus/CorpusTest.*'
// and review the diff.
#include <gtest/gtest.h>

#include <filesystem>
#include <set>
#include <string>

#include "compiler/ir/diagnostic.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/verifier.h"
#include "tests/compiler/corpus_util.h"

namespace kiln::compiler {
namespace {
namespace fs = std::filesystem;
using testing::CorpusFiles;
using testing::GoldenPath;
using testing::ReadFileOrDie;

class CorpusTest : public ::testing::TestWithParam<fs::path> {};

TEST_P(CorpusTest, ParsesVerifiesAndRoundTrips) {
  const fs::path& file = GetParam();
  const std::string name = file.filename().string();
  const std::string text = ReadFileOrDie(file);

  ParseResult parsed = Parse(text);
  ASSERT_TRUE(parsed.ok()) << FormatDiagnostics(parsed.errors, name);
  ASSERT_FALSE(parsed.program.kernels.empty());
  const Program& program = parsed.program;
  EXPECT_EQ(FormatDiagnostics(Verify(program), name), "");

  const std::string printed = Print(program);
  const fs::path golden = GoldenPath(file);
  if (testing::UpdateGoldens()) {
    testing::WriteFileOrDie(golden, printed);
  } else {
    ASSERT_TRUE(fs::exists(golden))
        << golden << " is missing; run with KILN_UPDATE_GOLDENS=1";
    EXPECT_EQ(printed, ReadFileOrDie(golden))
        << "the canonical print of " << name << " differs from " << golden
        << "; if the change is intended, run with KILN_UPDATE_GOLDENS=1";
  }

  ParseResult reparsed = Parse(printed);
  ASSERT_TRUE(reparsed.ok())
      << FormatDiagnostics(reparsed.errors, "canonical " + name);
  EXPECT_TRUE(reparsed.program == program) << "parse(print(p)) != p";
  EXPECT_EQ(Print(reparsed.program), printed);
  EXPECT_EQ(FormatDiagnostics(Verify(reparsed.program), "canonical " + name),
            "");
}

// The golden is itself canonical: formatting it again changes nothing.
TEST_P(CorpusTest, GoldenIsAFixedPoint) {
  const fs::path golden = GoldenPath(GetParam());
  if (!fs::exists(golden)) GTEST_SKIP() << golden << " is missing";
  const std::string text = ReadFileOrDie(golden);
  ParseResult parsed = Parse(text);
  ASSERT_TRUE(parsed.ok()) << FormatDiagnostics(parsed.errors, "golden");
  EXPECT_EQ(Print(parsed.program), text);
}

std::string TestName(const ::testing::TestParamInfo<fs::path>& info) {
  return info.param.stem().string();
}

INSTANTIATE_TEST_SUITE_P(Corpus, CorpusTest, ::testing::ValuesIn(CorpusFiles()),
                         TestName);

TEST(CorpusSetTest, HasEnoughPrograms) { EXPECT_GE(CorpusFiles().size(), 16u); }

TEST(CorpusSetTest, EveryGoldenHasItsProgram) {
  std::set<std::string> programs;
  for (const fs::path& f : CorpusFiles()) programs.insert(f.filename());
  for (const fs::directory_entry& entry :
       fs::directory_iterator(testing::TestDataDir() / "golden")) {
    EXPECT_TRUE(programs.count(entry.path().filename().string()))
        << "stale golden " << entry.path();
  }
}

// Each feature of the language (statement kinds and their options, scopes,
// layouts, dtypes, operators, builtins, region forms...) is used by at least
// one corpus program, so the golden and round-trip tests exercise all of it.
TEST(CorpusSetTest, CoversTheWholeLanguage) {
  std::set<std::string> covered;
  for (const fs::path& f : CorpusFiles()) {
    ParseResult parsed = Parse(ReadFileOrDie(f));
    ASSERT_TRUE(parsed.ok()) << f;
    std::set<std::string> features = testing::Features(parsed.program);
    covered.insert(features.begin(), features.end());
  }
  for (const std::string& feature : testing::AllFeatures()) {
    EXPECT_TRUE(covered.count(feature)) << "no corpus program uses " << feature;
  }
}

// Regression (found by the corpus owner's probes): a long chain of a
// left-associative operator, `1 + 1 + ... + 1`, is parsed by a loop and so
// passes the parser's nesting limit, but builds an expression tree as deep as
// the chain; the recursive printer, verifier and ~Expr then overflow the
// stack (`kiln ir check` dies with SIGSEGV from 400,000 terms, 800 KB, well
// under the 4 MiB limit). Enable once the front end rejects or handles it.
// Regression: a 500,000-operator chain parsed into a tree that deep and
// overflowed the stack in ~Expr, the printer and the verifier.
TEST(FrontEndLimitsTest, LongOperatorChainIsAnErrorNotACrash) {
  for (const char* op : {"+1", "&&true"}) {
    std::string text = "kernel k(A: f32[N]) grid(1) threads(32) (bx) {\n";
    text += "  let x = 1";
    for (int i = 0; i < 500'000; ++i) text += op;
    text += "\n}\n";
    ASSERT_LE(text.size(), kMaxSourceBytes);
    ParseResult parsed = Parse(text);
    ASSERT_EQ(parsed.errors.size(), 1u) << op;
    EXPECT_EQ(parsed.errors[0].loc.line, 2);
    EXPECT_NE(parsed.errors[0].message.find("more than 256 levels deep"),
              std::string::npos)
        << parsed.errors[0].message;
  }
  // 200 operators in a chain are fine.
  std::string ok = "kernel k() grid(1) threads(32) (bx) {\n  let x = 1";
  for (int i = 0; i < 200; ++i) ok += " + 1";
  EXPECT_TRUE(Parse(ok + "\n}\n").ok());
}

}  // namespace
}  // namespace kiln::compiler
