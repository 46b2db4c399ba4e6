#include "compiler/tuning_space.h"

#include <gtest/gtest.h>

#include "compiler/ir/parser.h"

namespace kiln::compiler {
namespace {

Kernel ParseKernel(const std::string& text) {
  ParseResult r = Parse(text);
  EXPECT_TRUE(r.ok()) << FormatDiagnostics(r.errors, "t");
  return r.program.kernels.at(0);
}

TEST(TuningSpaceTest, EnumeratesCombinationsThatSatisfyConstraints) {
  Kernel k = ParseKernel(
      "kernel k() tune A in [1, 2, 4], B in [8, 16] where A * B <= 32, A != 2 "
      "grid(1) threads(1) (b) { }");
  std::vector<TunableValues> space = EnumerateTuningSpace(k);
  std::vector<TunableValues> want = {
      {{"A", 1}, {"B", 8}}, {{"A", 1}, {"B", 16}}, {{"A", 4}, {"B", 8}}};
  EXPECT_EQ(space, want);
  EXPECT_EQ(EnumerateTuningSpace(k, 2).size(), 2u);
  EXPECT_FALSE(SatisfiesConstraints(k, {{"A", 4}, {"B", 16}}));
  EXPECT_FALSE(
      SatisfiesConstraints(k, {{"A", 3}, {"B", 8}}));  // not a candidate
  EXPECT_FALSE(SatisfiesConstraints(k, {{"A", 1}}));   // B unbound
}

TEST(TuningSpaceTest, NoTunablesIsOneEmptyConfiguration) {
  Kernel k = ParseKernel("kernel k() grid(1) threads(1) (b) { }");
  std::vector<TunableValues> space = EnumerateTuningSpace(k);
  ASSERT_EQ(space.size(), 1u);
  EXPECT_TRUE(space[0].empty());
}

}  // namespace
}  // namespace kiln::compiler
