// Autotuning end to end through a real kilnd over its unix socket: the C++
// client's Autotune, `kiln tune` and `kiln cache show` against it. kilnd
// runs with KILN_BENCH_WORKER_FAULTS=1 so that candidates can be told to
// crash or hang their benchmark worker; kilnd must stay healthy throughout.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "client/client.h"
#include "tests/support/kilnd_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_kernels.h"

namespace kiln::client {
namespace {

using kiln::v1::AutotuneProgress;
using ::testing::HasSubstr;

// The scale kernel with three block sizes.
std::string Scale3() {
  std::string text = ::kiln::testing::kScaleKernel;
  text.replace(text.find("[64, 128]"), 9, "[32, 64, 128]");
  return text;
}

kiln::v1::AutotuneRequest Request() {
  kiln::v1::AutotuneRequest r;
  r.set_ir_text(Scale3());
  r.set_target("cpu");
  r.set_filename("scale.tile");
  (*r.mutable_shape())["N"] = 8192;
  r.mutable_options()->set_min_runs(3);
  r.mutable_options()->set_min_time_ms(1);
  return r;
}

class AutotuneServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("KILN_BENCH_WORKER_FAULTS", "1", 1);
    auto kilnd = testing::KilndProcess::Start(KILN_KILND_PATH);
    unsetenv("KILN_BENCH_WORKER_FAULTS");
    ASSERT_TRUE(kilnd.ok()) << kilnd.status();
    kilnd_ = *std::move(kilnd);
    auto client = Client::Connect(kilnd_->address());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = *std::move(client);
  }

  void ExpectHealthy() {
    EXPECT_TRUE(kilnd_->process().running());
    EXPECT_TRUE(client_->Health().ok());
  }

  std::unique_ptr<testing::KilndProcess> kilnd_;
  std::unique_ptr<Client> client_;
};

TEST_F(AutotuneServiceTest,
       CrashesAndHangsEndOnlyTheWorkerThenTheResultIsReused) {
  kiln::v1::AutotuneRequest request = Request();
  request.mutable_options()->set_time_limit_per_candidate_s(1);
  (*request.mutable_options()->mutable_faults())["B=32"] = "crash";
  (*request.mutable_options()->mutable_faults())["B=128"] = "hang";
  std::vector<AutotuneProgress> events;
  absl::StatusOr<kiln::v1::AutotuneResult> result = client_->Autotune(
      request, [&](const AutotuneProgress& p) { events.push_back(p); });
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_FALSE(result->cached());
  EXPECT_EQ(result->best_label(), "B=64");
  ASSERT_EQ(result->candidates_size(), 3);
  EXPECT_EQ(result->candidates(0).status(), kiln::v1::CANDIDATE_STATUS_FAILED);
  EXPECT_THAT(result->candidates(0).reason(), HasSubstr("SIGSEGV"));
  EXPECT_EQ(result->candidates(2).status(), kiln::v1::CANDIDATE_STATUS_FAILED);
  EXPECT_THAT(result->candidates(2).reason(), HasSubstr("no result within"));
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.front().event(), AutotuneProgress::EVENT_STARTED);
  EXPECT_EQ(events.back().event(), AutotuneProgress::EVENT_DONE);
  ExpectHealthy();

  // kilnd still compiles, and the same request is answered from the cache.
  KernelRequest compile;
  compile.ir_text = ::kiln::testing::kScaleKernel;
  compile.target = "cpu";
  compile.bindings = {{"B", 64}};
  EXPECT_TRUE(client_->Compile(compile).ok());
  events.clear();
  absl::StatusOr<kiln::v1::AutotuneResult> again = client_->Autotune(
      Request(), [&](const AutotuneProgress& p) { events.push_back(p); });
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->cached());
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].event(), AutotuneProgress::EVENT_CACHED);
  EXPECT_EQ(again->tuning_key(), result->tuning_key());
  EXPECT_EQ(again->best_label(), "B=64");

  // `kiln cache ls` lists it; `kiln cache show` explains it.
  auto ls = testing::Run(
      {KILN_CLI_PATH, "cache", "ls", "--dir", kilnd_->dir().File("cache")});
  ASSERT_TRUE(ls.ok());
  EXPECT_THAT(ls->out, HasSubstr(result->tuning_key()));
  auto show =
      testing::Run({KILN_CLI_PATH, "cache", "show", result->tuning_key(),
                    "--dir", kilnd_->dir().File("cache")});
  ASSERT_TRUE(show.ok());
  EXPECT_EQ(show->exit_code, 0) << show->err;
  EXPECT_THAT(show->out, HasSubstr("autotuning result"));
  EXPECT_THAT(show->out, HasSubstr("kiln-tuning-key-v1"));
  EXPECT_THAT(show->out, HasSubstr("bucket N=8192"));
  EXPECT_THAT(show->out, HasSubstr("SIGSEGV"));
  ExpectHealthy();
}

TEST_F(AutotuneServiceTest, KilnTuneThroughTheDaemonPrintsTheTableAndKey) {
  testing::TempDir dir;
  testing::WriteFile(dir.File("scale.tile"), Scale3());
  const std::vector<std::string> argv = {
      KILN_CLI_PATH,    "tune",   dir.File("scale.tile"),
      "--target",       "cpu",    "--shape",
      "N=5000",         "--runs", "3",
      "--min-time-ms",  "1",      "--daemon",
      kilnd_->address()};
  auto first = testing::Run(argv);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->exit_code, 0) << first->err;
  EXPECT_THAT(first->out, HasSubstr("bucket N=8192"));
  EXPECT_THAT(first->out, HasSubstr("CONFIG"));
  EXPECT_THAT(first->out, HasSubstr("<- chosen"));
  EXPECT_THAT(first->out, HasSubstr("tuning key  "));
  EXPECT_THAT(first->out, HasSubstr("tuned in"));
  // Not a terminal: plain progress lines.
  EXPECT_THAT(first->err, HasSubstr("tuning scale for cpu"));
  auto second = testing::Run(argv);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->exit_code, 0) << second->err;
  EXPECT_THAT(second->out, HasSubstr("result      cached"));

  auto bad = testing::Run({KILN_CLI_PATH, "tune", dir.File("scale.tile"),
                           "--shape", "N=abc", "--daemon", kilnd_->address()});
  ASSERT_TRUE(bad.ok());
  EXPECT_EQ(bad->exit_code, 2);
  auto missing =
      testing::Run({KILN_CLI_PATH, "tune", dir.File("scale.tile"), "--shape",
                    "M=4", "--daemon", kilnd_->address()});
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(missing->exit_code, 1);
  EXPECT_THAT(missing->err, HasSubstr("names no symbol"));
  ExpectHealthy();
}

TEST_F(AutotuneServiceTest, KilnCacheExplainSaysWhyALookupMisses) {
  testing::TempDir dir;
  const std::string file = dir.File("scale.tile");
  testing::WriteFile(file, Scale3());
  const std::string cache = kilnd_->dir().File("cache");
  KernelRequest compile;
  compile.ir_text = Scale3();
  compile.target = "cpu";
  compile.bindings = {{"B", 64}};
  absl::StatusOr<Kernel> kernel = client_->Compile(compile);
  ASSERT_TRUE(kernel.ok()) << kernel.status();

  auto explain = [&](std::vector<std::string> args) {
    args.insert(args.begin(),
                {KILN_CLI_PATH, "cache", "explain", file, "--dir", cache});
    auto run = testing::Run(args);
    EXPECT_TRUE(run.ok());
    return run.ok() ? *run : testing::RunResult{};
  };
  // The same request hits, and shows what its key is made of.
  testing::RunResult hit = explain({"-D", "B=64"});
  EXPECT_EQ(hit.exit_code, 0) << hit.err;
  EXPECT_THAT(hit.out, HasSubstr("binary key " + kernel->key()));
  EXPECT_THAT(hit.out, HasSubstr("kiln-binary-key-v1"));
  EXPECT_THAT(hit.out, HasSubstr("hit: the cache holds this binary key"));
  // Another tunable value misses, and says which binding differs.
  testing::RunResult other = explain({"-D", "B=128"});
  EXPECT_EQ(other.exit_code, 1);
  EXPECT_THAT(other.out, HasSubstr("miss: 1 stored binary key of kernel "
                                   "'scale'"));
  EXPECT_THAT(other.out, HasSubstr(kernel->key() + " differs in"));
  EXPECT_THAT(other.out, HasSubstr("bind: request B=128, stored B=64"));
  // An edited program: the kernel component differs.
  std::string edited = Scale3();
  edited.replace(edited.find("T[i] * a"), 8, "T[i] * a * a");
  testing::WriteFile(file, edited);
  testing::RunResult changed = explain({"-D", "B=64"});
  EXPECT_EQ(changed.exit_code, 1);
  EXPECT_THAT(changed.out, HasSubstr("(the program's code differs)"));
  testing::WriteFile(file, Scale3());

  // Tuning keys: the tuned bucket hits, another bucket names it.
  absl::StatusOr<kiln::v1::AutotuneResult> tuned = client_->Autotune(Request());
  ASSERT_TRUE(tuned.ok()) << tuned.status();
  testing::RunResult tune_hit = explain({"--shape", "N=6000"});
  EXPECT_EQ(tune_hit.exit_code, 0) << tune_hit.out << tune_hit.err;
  EXPECT_THAT(tune_hit.out, HasSubstr("tuning key " + tuned->tuning_key()));
  testing::RunResult tune_miss = explain({"--shape", "N=100"});
  EXPECT_EQ(tune_miss.exit_code, 1);
  EXPECT_THAT(tune_miss.out,
              HasSubstr("bucket: request N=128, stored N=8192 (another "
                        "shape bucket)"));

  // `kiln cache show` of a compiled kernel prints its key's components.
  auto show = testing::Run(
      {KILN_CLI_PATH, "cache", "show", kernel->key(), "--dir", cache});
  ASSERT_TRUE(show.ok());
  EXPECT_THAT(show->out, HasSubstr("bind B=64"));
  EXPECT_THAT(show->out, HasSubstr("toolchain "));
  ExpectHealthy();
}

TEST(KilnTuneTest, LocalTunesInProcessWithoutADaemon) {
  testing::TempDir dir;
  testing::WriteFile(dir.File("scale.tile"), Scale3());
  auto tune = testing::Subprocess::Start(
      {KILN_CLI_PATH, "tune", dir.File("scale.tile"), "--shape", "N=3000",
       "--runs", "3", "--min-time-ms", "1", "--local"},
      {"XDG_CACHE_HOME=" + dir.File("xdg")});
  ASSERT_TRUE(tune.ok()) << tune.status();
  absl::StatusOr<int> code = tune->Wait(absl::Seconds(60));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 0) << tune->Stderr();
  EXPECT_THAT(tune->Stdout(), HasSubstr("via         this process"));
  EXPECT_THAT(tune->Stdout(), HasSubstr("bucket N=4096"));
  EXPECT_THAT(tune->Stdout(), HasSubstr("<- chosen"));
}

}  // namespace
}  // namespace kiln::client
