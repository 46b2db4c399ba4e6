// The target table (compiler/target.h): one entry per compile target, and
// every part of the compiler reads its answers from it.
#include "compiler/target.h"

#include <set>
#include <string>

#include "compiler/codegen/cuda/cuda_codegen.h"
#include "compiler/codegen/hip/hip_codegen.h"
#include "compiler/compile.h"
#include "gtest/gtest.h"

namespace kiln::compiler {
namespace {

TEST(TargetTest, NamesAreUniqueAndFindable) {
  std::set<std::string> names;
  for (const Target& t : AllTargets()) {
    EXPECT_TRUE(names.insert(std::string(t.name)).second) << t.name;
    EXPECT_EQ(FindTarget(t.name), &t);
  }
  EXPECT_EQ(FindTarget("sm_75"), nullptr);
  EXPECT_EQ(FindTarget(""), nullptr);
  EXPECT_EQ(AllTargets().front().name, "cpu");
}

TEST(TargetTest, BackEndsAgreeWithTheTable) {
  for (const Target& t : AllTargets()) {
    SCOPED_TRACE(std::string(t.name));
    EXPECT_EQ(IsCudaTarget(t.name), t.kind == TargetKind::kCuda);
    EXPECT_EQ(IsHipTarget(t.name), t.kind == TargetKind::kHip);
    if (t.kind == TargetKind::kCuda) {
      EXPECT_GE(t.compute_capability, 80);
      EXPECT_GT(t.max_shared_bytes, 48 * 1024);
      // The Hopper dialect exactly where the table says wgmma and TMA.
      EXPECT_EQ(CudaDialect(t.name).tma, t.tma);
      EXPECT_EQ(CudaDialect(t.name).warpgroup_mma, t.warpgroup_mma);
    }
    if (t.kind == TargetKind::kHip) EXPECT_GT(t.rocm_major, 0);
  }
  EXPECT_TRUE(FindTarget("sm_90a")->tma);
  EXPECT_FALSE(FindTarget("sm_90")->tma);
  EXPECT_TRUE(FindTarget("sm_90")->clusters);
  EXPECT_FALSE(FindTarget("sm_80")->clusters);
}

TEST(TargetTest, AnUnknownTargetNamesEveryTarget) {
  CompileOptions o;
  o.target = "sm_75";
  auto key = BinaryKey(
      "kernel k(X: f32[4]) grid(1) threads(4) (bx) {\n"
      "  alloc fragment t: f32[4]\n  copy X -> t\n}\n",
      o);
  ASSERT_FALSE(key.ok());
  EXPECT_EQ(key.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(key.status().message()).find(TargetNames()),
            std::string::npos)
      << key.status();
}

}  // namespace
}  // namespace kiln::compiler
