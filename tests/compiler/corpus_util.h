// Helpers shared by the compiler's corpus tests: locating the corpus and its
// goldens, reading and writing files, textual edits of programs, and a walk
// that records which language features a program uses.
#ifndef KILN_TESTS_COMPILER_CORPUS_UTIL_H_
#define KILN_TESTS_COMPILER_CORPUS_UTIL_H_

#include <filesystem>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/ir/ir.h"

namespace kiln::compiler::testing {

// tests/compiler in the source tree (KILN_TEST_DATA_DIR).
std::filesystem::path TestDataDir();

// Every valid corpus program, tests/compiler/corpus/*.tile, sorted by name.
std::vector<std::filesystem::path> CorpusFiles();

// tests/compiler/golden/NAME.tile for the corpus file `corpus_file`.
std::filesystem::path GoldenPath(const std::filesystem::path& corpus_file);

// True when KILN_UPDATE_GOLDENS=1: golden tests rewrite their goldens
// instead of comparing against them.
bool UpdateGoldens();

// The whole file; an empty string and a test failure when it cannot be read.
std::string ReadFileOrDie(const std::filesystem::path& path);
void WriteFileOrDie(const std::filesystem::path& path, std::string_view text);

// Replaces every occurrence of the identifier `from` (a whole word: not
// preceded or followed by [A-Za-z0-9_]) with `to`. Returns how many.
int ReplaceWord(std::string* text, std::string_view from, std::string_view to);

// Replaces the first occurrence of `from` with `to`; false when absent.
bool ReplaceFirst(std::string* text, std::string_view from,
                  std::string_view to);

// `text` as a GoogleTest parameter name: every character other than
// [A-Za-z0-9] becomes '_' ("gemm.tile" -> "gemm_tile").
std::string TestNameOf(std::string text);

// The text with every `//` comment removed (the language has no string
// literals, so every `//` starts a comment that runs to the end of the line).
std::string StripComments(std::string_view text);

// The features of the language a program uses, as short descriptive strings
// ("stmt:gemm", "dtype:u4", "binary://", "call:exp2", ...). Used to check that
// the corpus covers the whole language.
std::set<std::string> Features(const Program& program);

// Corpus kernels no point of whose tuning space fits gfx90a's 64 KiB of
// shared memory per block (a documented back-end limit, tile-ir.md §9):
// gemm_fp8_blockscaled (on targets without wgmma its FP8 products and
// accumulator are shared-memory tiles, 2 x BM x 128 x 4 bytes beside the
// operand ring).
bool ExceedsGfx90aSharedMemory(std::string_view kernel);

// Every feature the language has (what Features() of a program covering the
// whole language returns).
std::set<std::string> AllFeatures();

}  // namespace kiln::compiler::testing

#endif  // KILN_TESTS_COMPILER_CORPUS_UTIL_H_
