// Embedded mode: the same Client API with the compiler and cache in this
// process, answering as kilnd does.
#include "client/embedded.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <vector>

#include "tests/support/subprocess.h"
#include "tests/support/test_kernels.h"

namespace kiln::client {
namespace {

using ::testing::HasSubstr;

KernelRequest ScaleRequest(int64_t block = 64) {
  KernelRequest r;
  r.ir_text = ::kiln::testing::kScaleKernel;
  r.target = "cpu";
  r.bindings = {{"B", block}};
  r.filename = "scale.tile";
  return r;
}

TEST(EmbeddedTest, CompilesCachesAndLaunchesInProcess) {
  testing::TempDir dir;
  std::string key;
  {
    auto client = Embedded({.cache_dir = dir.File("cache")});
    ASSERT_TRUE(client.ok()) << client.status();
    EXPECT_TRUE((*client)->Health().ok());
    auto caps = (*client)->Capabilities();
    ASSERT_TRUE(caps.ok());
    EXPECT_EQ(caps->targets(0).name(), "cpu");

    absl::StatusOr<Kernel> kernel = (*client)->Compile(ScaleRequest());
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    EXPECT_EQ(kernel->tier(), "compiled");
    key = kernel->key();
    std::vector<float> x(300), y(300, -1);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) - 7.5f;
    ASSERT_TRUE(kernel
                    ->Launch({runtime::ArgValue::Tensor(
                                  x.data(), runtime::DType::kF32, {300}),
                              runtime::ArgValue::Tensor(
                                  y.data(), runtime::DType::kF32, {300}),
                              runtime::ArgValue::F32(-2.0f)})
                    .ok());
    for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], x[i] * -2.0f);
    // A wrong launch is an error naming the parameter, not a crash.
    absl::Status wrong = kernel->Launch(
        {runtime::ArgValue::Tensor(x.data(), runtime::DType::kF16, {300}),
         runtime::ArgValue::Tensor(y.data(), runtime::DType::kF32, {300}),
         runtime::ArgValue::F32(1.0f)});
    EXPECT_EQ(wrong.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(wrong.message(), HasSubstr("'X'"));

    KernelRequest bad = ScaleRequest();
    bad.ir_text = "kernel (";
    absl::Status status = (*client)->Compile(bad).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr("scale.tile:1:"));
  }
  // A new embedded client on the same directory finds the kernel.
  auto client = Embedded({.cache_dir = dir.File("cache")});
  ASSERT_TRUE(client.ok()) << client.status();
  absl::StatusOr<Kernel> again = (*client)->Compile(ScaleRequest());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->tier(), "local");
  EXPECT_EQ(again->key(), key);
  auto stats = (*client)->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->compiles(), 0);
  EXPECT_EQ(stats->hits(), 1);
}

TEST(EmbeddedTest, UnusableCacheDirectoryIsAnError) {
  testing::TempDir dir;
  testing::WriteFile(dir.File("file"), "not a directory");
  auto client = Embedded({.cache_dir = dir.File("file") + "/cache"});
  EXPECT_FALSE(client.ok());
}

}  // namespace
}  // namespace kiln::client
