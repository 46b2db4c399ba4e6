// The end-to-end suite covers the whole corpus: every kernel of every
// tests/compiler/corpus/*.tile has a numeric test (registered with
// KILN_E2E_COVERS next to it), and every kernel compiles for the CPU with the
// first valid combination of its tunables and loads, all kernels held at once
// (as a server holds them).
#include <algorithm>
#include <filesystem>
#include <set>
#include <utility>

#include "compiler/ir/parser.h"
#include "gtest/gtest.h"
#include "tests/e2e/e2e_harness.h"

namespace kiln::e2e {
namespace {

// (file, kernel) for every kernel of the corpus, sorted.
std::vector<std::pair<std::string, std::string>> CorpusKernels() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& entry :
       std::filesystem::directory_iterator(KILN_E2E_CORPUS_DIR)) {
    if (entry.path().extension() != ".tile") continue;
    const std::string file = entry.path().filename().string();
    compiler::ParseResult parsed = compiler::Parse(CorpusSource(file));
    EXPECT_TRUE(parsed.ok()) << file;
    for (const compiler::Kernel& k : parsed.program.kernels) {
      out.emplace_back(file, k.name);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(E2eCoverageTest, EveryCorpusKernelHasAnEndToEndTest) {
  std::set<std::pair<std::string, std::string>> covered;
  for (const CoveredKernel& c : CoveredKernels()) {
    covered.emplace(c.file, c.kernel);
  }
  const auto kernels = CorpusKernels();
  EXPECT_GE(kernels.size(), 20u);
  for (const auto& [file, kernel] : kernels) {
    EXPECT_TRUE(covered.count({file, kernel}))
        << "no end-to-end test for kernel '" << kernel << "' of " << file
        << ": add one (and KILN_E2E_COVERS) in tests/e2e/";
  }
  for (const auto& c : covered) {
    EXPECT_TRUE(std::count(kernels.begin(), kernels.end(), c))
        << "KILN_E2E_COVERS names " << c.first << ":" << c.second
        << ", which is not in the corpus";
  }
}

TEST(E2eCoverageTest,
     EveryCorpusKernelCompilesAndLoadsWithItsFirstValidTunables) {
  for (const auto& [file, kernel] : CorpusKernels()) {
    absl::StatusOr<Bindings> b = PickBindings(file, kernel);
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<const runtime::CpuKernel*> k = LoadKernel(file, kernel, *b);
    EXPECT_TRUE(k.ok()) << k.status();
  }
}

TEST(E2eCoverageTest, TunableEnumerationHonoursWhereClauses) {
  // gemm.tile: BM * BN <= 32768 and (BM*BK + BK*BN) * 2 * STAGES <= 98304.
  absl::StatusOr<std::vector<Bindings>> all =
      ValidBindings("gemm.tile", "gemm");
  ASSERT_TRUE(all.ok()) << all.status();
  ASSERT_FALSE(all->empty());
  EXPECT_EQ(BindingsText(all->front()), "BK=32 BM=64 BN=64 STAGES=2");
  for (const Bindings& b : *all) {
    EXPECT_LE(b.at("BM") * b.at("BN"), 32768);
    EXPECT_LE((b.at("BM") * b.at("BK") + b.at("BK") * b.at("BN")) * 2 *
                  b.at("STAGES"),
              98304);
  }
  EXPECT_TRUE(std::count_if(all->begin(), all->end(), [](const Bindings& b) {
                return b.at("BM") == 256 && b.at("BN") == 256;
              }) == 0);
}

}  // namespace
}  // namespace kiln::e2e
