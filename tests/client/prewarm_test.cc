// `kiln prewarm MANIFEST` and `kiln cache export --manifest` as a user runs
// them against a real kilnd: the report, the JSON report and keys file, the
// second run's hits, located errors for bad manifests, a failing kernel
// that does not stop the others, and the CI flow (prewarm, export the
// manifest's entries, import them on a fresh host: every kernel a hit).
#include <regex>
#include <string>
#include <vector>

#include "client/cli/progress.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/kilnd_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_kernels.h"

namespace kiln::cli {
namespace {

using ::testing::ContainsRegex;
using ::testing::HasSubstr;
using ::testing::Not;

testing::RunResult Kiln(std::vector<std::string> args) {
  args.insert(args.begin(), KILN_CLI_PATH);
  absl::StatusOr<testing::RunResult> result = testing::Run(args);
  EXPECT_TRUE(result.ok()) << result.status();
  return result.ok() ? *result : testing::RunResult{};
}

int Lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

class PrewarmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFile(dir_.File("scale.tile"), ::kiln::testing::kScaleKernel);
    std::string other = ::kiln::testing::kScaleKernel;
    other.replace(other.find("scale("), 5, "scale2");
    testing::WriteFile(dir_.File("scale2.tile"), other);
  }
  std::string Manifest(const std::string& json) {
    const std::string path = dir_.File("m.json");
    testing::WriteFile(path, json);
    return path;
  }
  testing::TempDir dir_;
};

constexpr char kManifest[] = R"({
  "target": "cpu",
  "kernels": [
    {"file": "scale.tile", "configs": [{"B": 64}, {"B": 128}]},
    {"file": "scale2.tile", "kernel": "scale2", "bindings": {"B": 64}},
    {"file": "scale2.tile", "tune": [{"N": 4096}]}
  ]
})";

TEST_F(PrewarmTest, CompilesAndTunesThenHitsEverything) {
  auto kilnd = testing::KilndProcess::Start(KILN_KILND_PATH);
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  const std::string manifest = Manifest(kManifest);
  testing::RunResult first =
      Kiln({"prewarm", manifest, "--daemon", (*kilnd)->address(), "--report",
            dir_.File("report.json"), "--keys-out", dir_.File("keys.txt")});
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err;
  EXPECT_THAT(first.out, HasSubstr("prewarmed 4 of 4 from " + manifest));
  EXPECT_THAT(first.out, HasSubstr("0 hits, 3 compiled, 1 tuned (0 already), "
                                   "0 tunings compiled only, 0 failed"));
  // Not a terminal: no progress bar, only the report.
  EXPECT_THAT(first.err, Not(HasSubstr("[#")));
  const std::string report = testing::ReadFile(dir_.File("report.json"));
  EXPECT_THAT(report, HasSubstr("\"counts\":{\"hit\":0,\"compiled\":3,"
                                "\"tuned\":1,\"tuned-cached\":0,"
                                "\"candidates-compiled\":0,\"failed\":0}"));
  EXPECT_THAT(report, HasSubstr("\"where\":\"" + manifest +
                                ": kernels[0].configs[1]\""));
  EXPECT_THAT(report, ContainsRegex("\"kind\":\"tune\",\"bindings\":\\{\\},"
                                    "\"shape\":\\{\"N\":4096\\},"
                                    "\"candidates_compiled\":2,"
                                    "\"status\":\"tuned\""));
  // Three kernels, the tuning's two candidates (one of them the B=64 scale2
  // compile) and its result.
  EXPECT_EQ(Lines(testing::ReadFile(dir_.File("keys.txt"))), 5);

  testing::RunResult second =
      Kiln({"prewarm", manifest, "--daemon", (*kilnd)->address()});
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err;
  EXPECT_THAT(second.out, HasSubstr("3 hits, 0 compiled, 1 tuned (1 already)"));

  // Compiling only, the tuning benchmarks nothing: its candidates are hits.
  testing::RunResult compile_only = Kiln(
      {"prewarm", manifest, "--daemon", (*kilnd)->address(), "--compile-only"});
  ASSERT_EQ(compile_only.exit_code, 0) << compile_only.out << compile_only.err;
  EXPECT_THAT(compile_only.out,
              HasSubstr("3 hits, 0 compiled, 0 tuned (0 already), 1 tunings "
                        "compiled only, 0 failed"));
  EXPECT_THAT(compile_only.out,
              HasSubstr("kernels[2].tune[0]: 2 candidates compiled; not tuned "
                        "(--compile-only)"));
}

TEST_F(PrewarmTest, AFailingKernelIsReportedAndTheOthersStillCompile) {
  testing::WriteFile(dir_.File("bad.tile"), "kernel broken(X: f32[N]\n");
  const std::string manifest = Manifest(R"({"target": "cpu", "kernels": [
    {"file": "scale.tile", "bindings": {"B": 64}},
    {"file": "bad.tile"},
    {"file": "scale.tile", "bindings": {"B": 100}}]})");
  auto kilnd = testing::KilndProcess::Start(KILN_KILND_PATH);
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  testing::RunResult r =
      Kiln({"prewarm", manifest, "--daemon", (*kilnd)->address()});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("prewarmed 1 of 3"));
  EXPECT_THAT(r.out, HasSubstr("1 compiled"));
  EXPECT_THAT(r.out, HasSubstr("2 failed"));
  EXPECT_THAT(r.out, ContainsRegex("FAILED .*m.json: kernels\\[1\\]: "
                                   "bad.tile:[0-9]+:[0-9]+: error"));
  EXPECT_THAT(r.out, ContainsRegex("FAILED .*m.json: kernels\\[2\\]: .*B"));
}

TEST_F(PrewarmTest, BadManifestsGetLocatedErrors) {
  struct Case {
    std::string json;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {"{\"kernels\": [", "m.json: not a prewarm manifest"},
           {"{\"kernels\": []}", "m.json: the manifest lists no kernels"},
           {"{\"kernels\": [{\"file\": \"scale.tile\", \"tunes\": []}]}",
            "m.json: not a prewarm manifest"},
           {"{\"version\": 2, \"kernels\": [{\"file\": \"scale.tile\"}]}",
            "manifest version 2 is not supported"},
           {"{\"kernels\": [{\"kernel\": \"scale\"}]}",
            "m.json: kernels[0]: \"file\" is missing"},
           {"{\"kernels\": [{\"file\": \"scale.tile\"}, {\"file\": "
            "\"nope.tile\"}]}",
            "m.json: kernels[1]: "},
           {"{\"kernels\": [{\"file\": \"scale.tile\", \"configs\": "
            "[{\"B\": 64}, {\"B\": 1.5}]}]}",
            "m.json: kernels[0].configs[1]: \"B\" is not an integer"},
           {"{\"kernels\": [{\"file\": \"scale.tile\", \"tune\": [{}]}]}",
            "m.json: kernels[0].tune[0]: a tuning needs its problem shape"},
       }) {
    const std::string manifest = Manifest(c.json);
    testing::RunResult r = Kiln({"prewarm", manifest, "--local"});
    EXPECT_EQ(r.exit_code, 1) << c.json;
    EXPECT_THAT(r.err, HasSubstr(c.error)) << c.json;
  }
  testing::RunResult missing = Kiln({"prewarm", dir_.File("none.json")});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.err, HasSubstr("none.json"));
}

TEST_F(PrewarmTest, ExportedManifestWarmsAFreshHost) {
  auto ci = testing::KilndProcess::Start(KILN_KILND_PATH);
  ASSERT_TRUE(ci.ok()) << ci.status();
  const std::string manifest = Manifest(kManifest);
  ASSERT_EQ(Kiln({"prewarm", manifest, "--daemon", (*ci)->address()}).exit_code,
            0);
  const std::string bundle = dir_.File("model.kbundle");
  testing::RunResult exported =
      Kiln({"cache", "export", bundle, "--manifest", manifest, "--dir",
            (*ci)->dir().File("cache")});
  ASSERT_EQ(exported.exit_code, 0) << exported.out << exported.err;
  EXPECT_THAT(exported.out, HasSubstr("exported 5 entries"));
  EXPECT_THAT(exported.out, Not(HasSubstr("not cached")));

  // A fresh host imports the bundle: its daemon then serves every kernel
  // of the manifest from the cache, the tuning included.
  testing::TempDir host;
  testing::RunResult imported =
      Kiln({"cache", "import", bundle, "--dir", host.File("cache")});
  ASSERT_EQ(imported.exit_code, 0) << imported.out << imported.err;
  auto fresh = testing::KilndProcess::Start(
      KILN_KILND_PATH, {"--cache-dir", host.File("cache")});
  ASSERT_TRUE(fresh.ok()) << fresh.status();
  testing::RunResult warm =
      Kiln({"prewarm", manifest, "--daemon", (*fresh)->address()});
  ASSERT_EQ(warm.exit_code, 0) << warm.out << warm.err;
  EXPECT_THAT(warm.out, HasSubstr("3 hits, 0 compiled, 1 tuned (1 already)"));

  // What the cache lacks is listed; a manifest none of whose kernels is
  // cached exports nothing.
  std::string third = ::kiln::testing::kScaleKernel;
  third.replace(third.find("scale("), 5, "scale3");
  testing::WriteFile(dir_.File("scale3.tile"), third);
  testing::RunResult partly =
      Kiln({"cache", "export", dir_.File("partly.kbundle"), "--manifest",
            Manifest(R"({"target": "cpu", "kernels": [
         {"file": "scale.tile", "bindings": {"B": 64}},
         {"file": "scale3.tile", "bindings": {"B": 64}}]})"),
            "--dir", (*ci)->dir().File("cache")});
  EXPECT_EQ(partly.exit_code, 0) << partly.err;
  EXPECT_THAT(partly.out, HasSubstr("exported 1 entries"));
  EXPECT_THAT(partly.out,
              HasSubstr("not cached: " + dir_.File("m.json") + ": kernels[1]"));
  const std::string uncached = Manifest(
      R"({"target": "cpu", "kernels": [{"file": "scale3.tile",
          "bindings": {"B": 64}}]})");
  testing::RunResult none =
      Kiln({"cache", "export", dir_.File("none.kbundle"), "--manifest",
            uncached, "--dir", (*ci)->dir().File("cache")});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_THAT(none.err, HasSubstr("none of the kernels of " + uncached));
  testing::RunResult automatic =
      Kiln({"cache", "export", dir_.File("auto.kbundle"), "--manifest",
            Manifest(R"({"kernels": [{"file": "scale.tile"}]})"), "--dir",
            (*ci)->dir().File("cache")});
  EXPECT_EQ(automatic.exit_code, 1);
  EXPECT_THAT(automatic.err, HasSubstr("target \"auto\" depends on"));
}

TEST_F(PrewarmTest, CiPrewarmsForAGpuItDoesNotHave) {
  auto kilnd = testing::KilndProcess::Start(KILN_KILND_PATH);
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  testing::RunResult status =
      Kiln({"status", "--address", (*kilnd)->socket_path()});
  if (status.out.find("sm_90a") == std::string::npos) {
    GTEST_SKIP() << "this kilnd cannot compile for sm_90a (no NVRTC)";
  }
  const std::string manifest = Manifest(kManifest);
  testing::RunResult r =
      Kiln({"prewarm", manifest, "--target", "sm_90a", "--daemon",
            (*kilnd)->address(), "--report", dir_.File("r.json")});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_THAT(r.out, HasSubstr("3 compiled, 0 tuned (0 already), 1 tunings "
                               "compiled only, 0 failed"));
  EXPECT_THAT(r.out, HasSubstr("kernels[2].tune[0]: 2 candidates compiled; "
                               "not tuned (no sm_90a device here)"));
  EXPECT_THAT(testing::ReadFile(dir_.File("r.json")),
              HasSubstr("\"target\":\"sm_90a\""));
}

TEST(ProgressBarTest, ShowsCountRateAndTimeLeft) {
  EXPECT_EQ(ProgressBar::Line(0, 500, "kernels", absl::Seconds(0), "", 110),
            "[........................] 0/500 kernels");
  EXPECT_EQ(ProgressBar::Line(125, 500, "kernels", absl::Seconds(5),
                              "gemm.tile", 110),
            "[######..................] 125/500 kernels, 25.0/s, 15 s left  "
            "gemm.tile");
  EXPECT_EQ(
      ProgressBar::Line(100, 1000, "kernels", absl::Seconds(100), "", 110),
      "[##......................] 100/1000 kernels, 1.0/s, 15m00s left");
  EXPECT_EQ(ProgressBar::Line(7, 7, "kernels", absl::Seconds(2), "", 110),
            "[########################] 7/7 kernels, 3.5/s");
  EXPECT_EQ(ProgressBar::Line(1, 2, "kernels", absl::Seconds(1),
                              std::string(200, 'x'), 40)
                .size(),
            40u);
}

}  // namespace
}  // namespace kiln::cli
