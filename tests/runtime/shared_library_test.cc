// Tests of runtime::SharedLibrary: loading by soname and by path, finding
// symbols, error reporting with dlerror's text, and ownership (move, close).
#include "runtime/shared_library.h"

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::runtime {
namespace {

using ::testing::HasSubstr;

TEST(SharedLibraryTest, OpensBySonameAndCallsAFunction) {
  absl::StatusOr<SharedLibrary> libm = SharedLibrary::Open("libm.so.6");
  ASSERT_TRUE(libm.ok()) << libm.status();
  absl::StatusOr<double (*)(double)> cos_fn =
      libm->FindFunction<double(double)>("cos");
  ASSERT_TRUE(cos_fn.ok()) << cos_fn.status();
  EXPECT_DOUBLE_EQ((*cos_fn)(0.0), 1.0);
  EXPECT_EQ(libm->name(), "libm.so.6");
  EXPECT_THAT(libm->LoadedPath(), HasSubstr("libm.so.6"));
}

TEST(SharedLibraryTest, OpensByPathAndFindsDataAndFunctions) {
  absl::StatusOr<SharedLibrary> plugin = SharedLibrary::Open(KILN_TEST_PLUGIN);
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  auto answer = plugin->FindFunction<int()>("kiln_test_answer");
  ASSERT_TRUE(answer.ok()) << answer.status();
  EXPECT_EQ((*answer)(), 42);
  absl::StatusOr<void*> counter = plugin->FindSymbol("kiln_test_counter");
  ASSERT_TRUE(counter.ok()) << counter.status();
  EXPECT_EQ(*static_cast<int*>(*counter), 7);
  EXPECT_EQ(plugin->LoadedPath(), KILN_TEST_PLUGIN);
}

TEST(SharedLibraryTest, MissingLibraryIsNotFoundWithDlerrorText) {
  absl::StatusOr<SharedLibrary> missing =
      SharedLibrary::Open("/nonexistent/libkiln_missing.so");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("/nonexistent/libkiln_missing.so"));
  EXPECT_THAT(missing.status().message(), HasSubstr("No such file"));
}

TEST(SharedLibraryTest, NonLibraryFileIsNotFoundWithDlerrorText) {
  // This test's own source file exists but is no ELF object.
  absl::StatusOr<SharedLibrary> text = SharedLibrary::Open(__FILE__);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(text.status().message(), HasSubstr("dlopen"));
}

TEST(SharedLibraryTest, EmptyNameIsInvalidArgument) {
  EXPECT_EQ(SharedLibrary::Open("").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SharedLibraryTest, MissingSymbolIsNotFoundNamingIt) {
  absl::StatusOr<SharedLibrary> plugin = SharedLibrary::Open(KILN_TEST_PLUGIN);
  ASSERT_TRUE(plugin.ok()) << plugin.status();
  absl::StatusOr<void*> symbol = plugin->FindSymbol("kiln_no_such_symbol");
  ASSERT_FALSE(symbol.ok());
  EXPECT_EQ(symbol.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(symbol.status().message(), HasSubstr("kiln_no_such_symbol"));
}

TEST(SharedLibraryTest, OpenFirstTakesTheFirstThatLoads) {
  std::vector<std::string> candidates = {"libkiln_missing.so.99", "libm.so.6",
                                         KILN_TEST_PLUGIN};
  absl::StatusOr<SharedLibrary> lib = SharedLibrary::OpenFirst(candidates);
  ASSERT_TRUE(lib.ok()) << lib.status();
  EXPECT_EQ(lib->name(), "libm.so.6");
}

TEST(SharedLibraryTest, OpenFirstReportsEveryCandidate) {
  std::vector<std::string> candidates = {"libkiln_a.so", "libkiln_b.so"};
  absl::StatusOr<SharedLibrary> lib = SharedLibrary::OpenFirst(candidates);
  ASSERT_FALSE(lib.ok());
  EXPECT_EQ(lib.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(lib.status().message(), HasSubstr("libkiln_a.so"));
  EXPECT_THAT(lib.status().message(), HasSubstr("libkiln_b.so"));
  EXPECT_EQ(SharedLibrary::OpenFirst({}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SharedLibraryTest, MoveTransfersOwnership) {
  absl::StatusOr<SharedLibrary> opened = SharedLibrary::Open(KILN_TEST_PLUGIN);
  ASSERT_TRUE(opened.ok()) << opened.status();
  SharedLibrary first = *std::move(opened);
  SharedLibrary second = std::move(first);
  EXPECT_TRUE(second.FindSymbol("kiln_test_answer").ok());
  // NOLINTNEXTLINE(bugprone-use-after-move): checking the moved-from state.
  EXPECT_EQ(first.FindSymbol("kiln_test_answer").status().code(),
            absl::StatusCode::kFailedPrecondition);

  absl::StatusOr<SharedLibrary> libm = SharedLibrary::Open("libm.so.6");
  ASSERT_TRUE(libm.ok()) << libm.status();
  second = *std::move(libm);  // closes the plugin, takes libm
  EXPECT_TRUE(second.FindSymbol("cos").ok());
  EXPECT_FALSE(second.FindSymbol("kiln_test_answer").ok());
}

}  // namespace
}  // namespace kiln::runtime
