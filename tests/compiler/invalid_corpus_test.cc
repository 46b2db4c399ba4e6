// The malformed-program corpus, tests/compiler/invalid/*.tile: each file makes
// one mistake (or, for a few, several independent ones) and lists every
// diagnostic it must produce, in order, in lines at its top:
//
//   // expect: LINE:COL: MESSAGE-SUBSTRING
//
// The file is parsed; when it has no syntax errors it is verified. The
// diagnostics must match the expect lines exactly in number, line and column,
// and each message must contain its substring.
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/parser.h"
#include "compiler/ir/verifier.h"
#include "tests/compiler/corpus_util.h"

namespace kiln::compiler {
namespace {

namespace fs = std::filesystem;

struct Expectation {
  int line = 0;
  int col = 0;
  std::string substring;
};

std::vector<fs::path> InvalidFiles() {
  std::vector<fs::path> files;
  fs::path dir = testing::TestDataDir() / "invalid";
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator(dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".tile") {
      files.push_back(entry.path());
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// Parses "LINE:COL: MESSAGE"; false when malformed.
bool ParseExpectation(std::string_view text, Expectation* out) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  size_t colon1 = text.find(':');
  if (colon1 == std::string_view::npos) return false;
  size_t colon2 = text.find(':', colon1 + 1);
  if (colon2 == std::string_view::npos) return false;
  std::string line(text.substr(0, colon1));
  std::string col(text.substr(colon1 + 1, colon2 - colon1 - 1));
  auto all_digits = [](const std::string& s) {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
      return std::isdigit(static_cast<unsigned char>(c)) != 0;
    });
  };
  if (!all_digits(line) || !all_digits(col) || line.size() > 6 ||
      col.size() > 6) {
    return false;
  }
  std::string_view message = text.substr(colon2 + 1);
  while (!message.empty() && message.front() == ' ') message.remove_prefix(1);
  if (message.empty()) return false;
  out->line = std::stoi(line);
  out->col = std::stoi(col);
  out->substring = std::string(message);
  return true;
}

// Every `// expect:` line of `text`, in order; a malformed one fails the test.
std::vector<Expectation> Expectations(std::string_view text) {
  constexpr std::string_view kPrefix = "// expect:";
  std::vector<Expectation> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (line.substr(0, kPrefix.size()) == kPrefix) {
      Expectation e;
      if (ParseExpectation(line.substr(kPrefix.size()), &e)) {
        out.push_back(std::move(e));
      } else {
        ADD_FAILURE() << "malformed expect line: " << line;
      }
    }
    pos = end + 1;
  }
  return out;
}

// Syntax errors when there are any, else the verifier's diagnostics.
Diagnostics Check(std::string_view text) {
  ParseResult parsed = Parse(text);
  if (!parsed.ok()) return parsed.errors;
  return Verify(parsed.program);
}

class InvalidCorpusTest : public ::testing::TestWithParam<fs::path> {};

TEST_P(InvalidCorpusTest, ReportsExactlyTheExpectedDiagnostics) {
  const fs::path& path = GetParam();
  std::string text = testing::ReadFileOrDie(path);
  std::vector<Expectation> want = Expectations(text);
  ASSERT_FALSE(want.empty())
      << path.filename() << " has no '// expect: LINE:COL: MESSAGE' line";
  Diagnostics got = Check(text);
  std::string file = path.filename().string();
  std::string all = FormatDiagnostics(got, file);
  ASSERT_EQ(got.size(), want.size()) << "diagnostics:\n" << all;
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(got[i].ToString(file));
    EXPECT_EQ(got[i].loc.line, want[i].line) << "diagnostic " << i;
    EXPECT_EQ(got[i].loc.col, want[i].col) << "diagnostic " << i;
    EXPECT_NE(got[i].message.find(want[i].substring), std::string::npos)
        << "diagnostic " << i << " should contain: " << want[i].substring;
  }
}

std::string TestName(const ::testing::TestParamInfo<fs::path>& info) {
  std::string name = info.param.stem().string();
  return ::kiln::compiler::testing::TestNameOf(name);
}

INSTANTIATE_TEST_SUITE_P(Invalid, InvalidCorpusTest,
                         ::testing::ValuesIn(InvalidFiles()), TestName);

TEST(InvalidCorpusMetaTest, CorpusIsLargeAndNumbered) {
  std::vector<fs::path> files = InvalidFiles();
  EXPECT_GE(files.size(), 65u);
  for (size_t i = 0; i < files.size(); ++i) {
    std::string name = files[i].filename().string();
    // NNN_short_name.tile, numbered 001.. without gaps.
    char want[8];
    std::snprintf(want, sizeof(want), "%03zu_", i + 1);
    EXPECT_EQ(name.substr(0, 4), want) << name;
  }
}

TEST(InvalidCorpusMetaTest, ExpectLinesParse) {
  Expectation e;
  EXPECT_TRUE(ParseExpectation(" 12:3: unknown name 'x'", &e));
  EXPECT_EQ(e.line, 12);
  EXPECT_EQ(e.col, 3);
  EXPECT_EQ(e.substring, "unknown name 'x'");
  EXPECT_FALSE(ParseExpectation(" 12: unknown", &e));
  EXPECT_FALSE(ParseExpectation(" a:b: x", &e));
  EXPECT_FALSE(ParseExpectation(" 1:2:", &e));
}

}  // namespace
}  // namespace kiln::compiler
