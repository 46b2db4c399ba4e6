// Golden tests per pass: each tests/compiler/passes/NAME.tile holds a kernel
// and two header lines,
//   // RUN: pass-a pass-b ...    (passes to run, in pipeline order)
//   // BIND: NAME=VALUE ...      (tunable and symbol values; may be empty)
// and NAME.expected the kernel's canonical text after those passes (or, for
// a pass that must fail, `error: MESSAGE`). KILN_UPDATE_GOLDENS=1 rewrites
// the expected files instead of comparing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "compiler/arith/prover.h"
#include "compiler/ir/diagnostic.h"
#include "compiler/ir/parser.h"
#include "compiler/ir/printer.h"
#include "compiler/ir/verifier.h"
#include "compiler/passes/pipeline.h"
#include "tests/compiler/corpus_util.h"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> HeaderWords(const std::string& text,
                                     const std::string& tag) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.rfind(tag, 0) != 0) continue;
    std::istringstream words(line.substr(tag.size()));
    std::vector<std::string> out;
    std::string w;
    while (words >> w) out.push_back(w);
    return out;
  }
  return {};
}

std::vector<fs::path> GoldenInputs() {
  std::vector<fs::path> files;
  for (const auto& e :
       fs::directory_iterator(fs::path(KILN_TEST_DATA_DIR) / "passes")) {
    if (e.path().extension() == ".tile") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

class PassGoldenTest : public ::testing::TestWithParam<fs::path> {};

TEST_P(PassGoldenTest, MatchesExpected) {
  const fs::path input = GetParam();
  const std::string text = ReadFile(input);
  std::vector<std::string> run = HeaderWords(text, "// RUN:");
  ASSERT_FALSE(run.empty()) << input << " has no '// RUN:' line";
  std::set<std::string> wanted(run.begin(), run.end());

  ParseResult parsed = Parse(text);
  ASSERT_TRUE(parsed.ok()) << FormatDiagnostics(parsed.errors, input.string());
  Diagnostics diags = Verify(parsed.program);
  ASSERT_TRUE(diags.empty()) << FormatDiagnostics(diags, input.string());
  Kernel kernel = parsed.program.kernels.at(0);

  Prover prover;
  PassContext ctx;
  ctx.target = "cpu";
  ctx.prover = &prover;
  for (const std::string& b : HeaderWords(text, "// BIND:")) {
    size_t eq = b.find('=');
    ASSERT_NE(eq, std::string::npos) << b;
    ctx.bindings[b.substr(0, eq)] = std::stoll(b.substr(eq + 1));
  }
  std::string actual;
  size_t ran = 0;
  for (const auto& pass : BuildPipeline(ctx.target)) {
    if (!wanted.count(std::string(pass->name()))) continue;
    ++ran;
    absl::Status st = pass->Run(kernel, ctx);
    if (!st.ok()) {
      // (The location is the error's value: LocatedError.)
      std::string where;
      if (std::optional<Loc> loc = ErrorLocation(st)) {
        where =
            std::to_string(loc->line) + ":" + std::to_string(loc->col) + ": ";
      }
      actual = "error: " + where + std::string(st.message()) + "\n";
      break;
    }
  }
  ASSERT_EQ(ran, wanted.size()) << "unknown pass name in " << input;
  if (actual.empty()) actual = Print(kernel);

  fs::path expected_path = input;
  expected_path.replace_extension(".expected");
  if (std::getenv("KILN_UPDATE_GOLDENS")) {
    std::ofstream(expected_path) << actual;
    GTEST_SKIP() << "rewrote " << expected_path;
  }
  ASSERT_TRUE(fs::exists(expected_path)) << expected_path << " is missing";
  EXPECT_EQ(actual, ReadFile(expected_path)) << "golden " << expected_path;
}

INSTANTIATE_TEST_SUITE_P(Passes, PassGoldenTest,
                         ::testing::ValuesIn(GoldenInputs()),
                         [](const ::testing::TestParamInfo<fs::path>& info) {
                           std::string name = info.param.stem().string();
                           return ::kiln::compiler::testing::TestNameOf(name);
                         });

}  // namespace
}  // namespace kiln::compiler
