// GpuLauncher, the launch half that CUDA and HIP share, with a fake enqueue
// call in place of cuLaunchKernel / hipModuleLaunchKernel: the parameter
// array it builds, the target's dims check, the reuse of the last binding.
#include "runtime/gpu_launch.h"

#include <cstdint>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/kernel_metadata.h"

namespace kiln::runtime {
namespace {

using ::testing::HasSubstr;

constexpr char kMetadata[] =
    "kiln-kernel 1\n"
    "name scale\n"
    "target gfx90a\n"
    "entry kiln_scale\n"
    "symbols N\n"
    "param X tensor f32 N\n"
    "param alpha scalar f32\n"
    "grid (ceildiv N 256) 1 1\n"
    "block 256 1 1\n"
    "shared-bytes 0\n";

// What one fake enqueue saw.
struct Seen {
  std::array<unsigned, 3> grid;
  std::array<unsigned, 3> block;
  void* x = nullptr;
  float alpha = 0;
  long long n = 0;
  void* extra = nullptr;  // the parameter after the symbols, if any
};

class GpuLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto md = ParseKernelMetadata(kMetadata);
    ASSERT_TRUE(md.ok()) << md.status();
    metadata_ = *md;
  }

  absl::Status Launch(const std::vector<ArgValue>& args,
                      absl::Span<void* const> extra = {}) {
    auto check = [&](const std::array<int64_t, 3>& grid,
                     const std::array<int64_t, 3>&) {
      ++checks_;
      return grid[0] > 1000 ? absl::InvalidArgumentError("grid too large")
                            : absl::OkStatus();
    };
    auto enqueue = [&](const GpuBinding& b, void** params) {
      Seen s;
      s.grid = b.grid;
      s.block = b.block;
      s.x = *static_cast<void**>(params[0]);
      s.alpha = *static_cast<float*>(params[1]);
      s.n = *static_cast<long long*>(params[2]);
      if (!extra.empty()) s.extra = params[3];
      seen_.push_back(s);
      return absl::OkStatus();
    };
    return launcher_.Launch(metadata_, args, check, enqueue, extra);
  }

  KernelMetadata metadata_;
  GpuLauncher launcher_;
  std::vector<Seen> seen_;
  int checks_ = 0;
};

TEST_F(GpuLauncherTest, ParamsPointAtPointersScalarsThenSymbols) {
  float x[1000];
  ASSERT_TRUE(
      Launch({ArgValue::Tensor(x, DType::kF32, {1000}), ArgValue::F32(2.5f)})
          .ok());
  ASSERT_EQ(seen_.size(), 1u);
  EXPECT_EQ(seen_[0].grid, (std::array<unsigned, 3>{4, 1, 1}));
  EXPECT_EQ(seen_[0].block, (std::array<unsigned, 3>{256, 1, 1}));
  EXPECT_EQ(seen_[0].x, x);
  EXPECT_EQ(seen_[0].alpha, 2.5f);
  EXPECT_EQ(seen_[0].n, 1000);
}

// CUDA tensor maps and their flag: extra parameters after the symbols, on
// a fresh binding and on a reused one alike.
TEST_F(GpuLauncherTest, ExtraParamsFollowTheSymbols) {
  float x[512];
  int flag = 1;
  void* extra[] = {&flag};
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(
        Launch({ArgValue::Tensor(x, DType::kF32, {512}), ArgValue::F32(1)},
               extra)
            .ok());
  }
  ASSERT_EQ(seen_.size(), 2u);
  EXPECT_EQ(checks_, 1);
  EXPECT_EQ(seen_[0].n, 512);
  EXPECT_EQ(seen_[0].extra, &flag);
  EXPECT_EQ(seen_[1].extra, &flag);
}

TEST_F(GpuLauncherTest, RepeatedShapesReuseTheBindingWithNewPointers) {
  float a[512], b[512];
  ASSERT_TRUE(
      Launch({ArgValue::Tensor(a, DType::kF32, {512}), ArgValue::F32(1)}).ok());
  ASSERT_TRUE(
      Launch({ArgValue::Tensor(b, DType::kF32, {512}), ArgValue::F32(1)}).ok());
  EXPECT_EQ(checks_, 1);
  ASSERT_EQ(seen_.size(), 2u);
  EXPECT_EQ(seen_[1].x, b);
  // Another scalar value binds afresh.
  ASSERT_TRUE(
      Launch({ArgValue::Tensor(b, DType::kF32, {512}), ArgValue::F32(3)}).ok());
  EXPECT_EQ(checks_, 2);
  EXPECT_EQ(seen_[2].alpha, 3.0f);
}

TEST_F(GpuLauncherTest, BadArgumentsAndDimsLaunchNothing) {
  float x[4];
  absl::Status s =
      Launch({ArgValue::Tensor(x, DType::kF16, {4}), ArgValue::F32(1)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("'X'"));
  s = Launch(
      {ArgValue::Tensor(x, DType::kF32, {1000 * 256 + 1}), ArgValue::F32(1)});
  EXPECT_THAT(s.message(), HasSubstr("grid too large"));
  EXPECT_TRUE(seen_.empty());
}

TEST_F(GpuLauncherTest, EmptyGridLaunchesNothing) {
  EXPECT_TRUE(
      Launch({ArgValue::Tensor(nullptr, DType::kF32, {0}), ArgValue::F32(1)})
          .ok());
  EXPECT_TRUE(seen_.empty());
}

TEST_F(GpuLauncherTest, ManyParametersGoOnTheHeap) {
  // 40 scalar parameters: past the 32 kept on the stack.
  std::string md =
      "kiln-kernel 1\nname many\ntarget gfx90a\nentry e\nsymbols\n";
  std::vector<ArgValue> args;
  for (int i = 0; i < 40; ++i) {
    md += "param s" + std::to_string(i) + " scalar i32\n";
    args.push_back(ArgValue::I32(i));
  }
  md += "grid 1 1 1\nblock 64 1 1\nshared-bytes 0\n";
  auto parsed = ParseKernelMetadata(md);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  std::vector<int32_t> got;
  auto check = [](const std::array<int64_t, 3>&,
                  const std::array<int64_t, 3>&) { return absl::OkStatus(); };
  auto enqueue = [&](const GpuBinding&, void** params) {
    for (int i = 0; i < 40; ++i)
      got.push_back(*static_cast<int32_t*>(params[i]));
    return absl::OkStatus();
  };
  ASSERT_TRUE(launcher_.Launch(*parsed, args, check, enqueue).ok());
  ASSERT_EQ(got.size(), 40u);
  EXPECT_EQ(got[39], 39);
}

}  // namespace
}  // namespace kiln::runtime
