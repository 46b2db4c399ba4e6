// The autotuner in process (server/tuning/): the tuning key, the choice,
// storing and reuse, pruning, and isolation of candidates that crash, hang
// or compute wrong results in the real benchmark worker
// (kiln-bench-worker). Each test has its own cache directory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "cache/cache.h"
#include "cache/digest.h"
#include "compiler/compile.h"
#include "compiler/ir/parser.h"
#include "server/engine/compile_engine.h"
#include "server/tuning/autotuner.h"
#include "server/tuning/tuning_key.h"
#include "server/tuning/tuning_record.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_kernels.h"

namespace kiln::server::tuning {
namespace {

using kiln::v1::AutotuneProgress;
using kiln::v1::CandidateResult;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kScale = ::kiln::testing::kScaleKernel;

// The scale kernel with three block sizes.
std::string Scale3() {
  std::string text = kScale;
  text.replace(text.find("[64, 128]"), 9, "[32, 64, 128]");
  return text;
}

compiler::Kernel ParseOne(const std::string& text) {
  compiler::ParseResult parsed = compiler::Parse(text);
  EXPECT_TRUE(parsed.ok());
  return parsed.program.kernels.at(0);
}

TEST(TuningKeyTest, IgnoresTunableValuesButNotTheCode) {
  const compiler::Kernel two = ParseOne(kScale);
  const compiler::Kernel three = ParseOne(Scale3());
  EXPECT_EQ(KernelHashWithoutTunableValues(two),
            KernelHashWithoutTunableValues(three));
  std::string other = kScale;
  other.replace(other.find("T[i] * a"), 8, "T[i] + a");
  EXPECT_NE(KernelHashWithoutTunableValues(two),
            KernelHashWithoutTunableValues(ParseOne(other)));
}

TEST(TuningKeyTest, ChangesWithTargetSkuFixedBindingsAndShapeBucket) {
  TuningKeyParts base;
  base.kernel_hash = KernelHashWithoutTunableValues(ParseOne(kScale));
  base.target = "cpu";
  base.sku = "Some CPU, 2 threads";
  base.bucket = ShapeBucket({{"N", 1000}});
  const std::string key = TuningKey(base);
  EXPECT_EQ(key.size(), 64u);

  TuningKeyParts same = base;
  same.bucket = ShapeBucket({{"N", 1024}});
  EXPECT_EQ(TuningKey(same), key);  // 1000 and 1024 share a bucket

  TuningKeyParts bigger = base;
  bigger.bucket = ShapeBucket({{"N", 1025}});
  EXPECT_NE(TuningKey(bigger), key);
  TuningKeyParts gpu = base;
  gpu.target = "sm_90a";
  EXPECT_NE(TuningKey(gpu), key);
  TuningKeyParts sku = base;
  sku.sku = "Other CPU, 2 threads";
  EXPECT_NE(TuningKey(sku), key);
  TuningKeyParts fixed = base;
  fixed.fixed = {{"B", 64}};
  EXPECT_NE(TuningKey(fixed), key);
}

TEST(TuningKeyTest, ShapeBucketRoundsUpToPowersOfTwo) {
  EXPECT_EQ(
      ShapeBucket({{"A", 1}, {"B", 3}, {"C", 4096}, {"D", 4097}, {"E", 0}}),
      (Bindings{{"A", 1}, {"B", 4}, {"C", 4096}, {"D", 8192}, {"E", 1}}));
}

TEST(TuningRecordTest, SetTimesRecordsMedianAndSpread) {
  CandidateResult c;
  SetTimes({5, 1, 4, 2, 3, 100}, &c);
  EXPECT_EQ(c.median_us(), 3.5);
  EXPECT_EQ(c.min_us(), 1);
  EXPECT_EQ(c.max_us(), 100);
  EXPECT_EQ(c.p10_us(), 1);
  EXPECT_EQ(c.p90_us(), 100);
  EXPECT_EQ(c.runs(), 6);
}

class AutotunerTest : public ::testing::Test {
 protected:
  void SetUp() override { Open(nullptr); }

  // (Re)creates the engine and tuner; `compile_fn` replaces the compiler.
  void Open(std::function<absl::StatusOr<compiler::CompiledKernel>(
                const compiler::LoadedKernel&)>
                compile_fn,
            bool cpu_reference_always = false) {
    tuner_.reset();
    engine_.reset();
    if (cache_ == nullptr) {
      auto cache = cache::Cache::Open(dir_.File("cache"), {});
      ASSERT_TRUE(cache.ok()) << cache.status();
      cache_ = *std::move(cache);
    }
    CompileEngineOptions options;
    options.compile_fn = std::move(compile_fn);
    auto engine = CompileEngine::Create(cache_.get(), std::move(options));
    ASSERT_TRUE(engine.ok()) << engine.status();
    engine_ = *std::move(engine);
    AutotunerOptions tuner_options;
    tuner_options.allow_faults = true;
    tuner_options.cpu_reference_always = cpu_reference_always;
    tuner_ =
        std::make_unique<Autotuner>(engine_.get(), cache_.get(), tuner_options);
  }

  static kiln::v1::AutotuneRequest Request(const std::string& text,
                                           int64_t n = 4096) {
    kiln::v1::AutotuneRequest r;
    r.set_ir_text(text);
    r.set_target("cpu");
    r.set_filename("scale.tile");
    (*r.mutable_shape())["N"] = n;
    r.mutable_options()->set_min_runs(3);
    r.mutable_options()->set_min_time_ms(1);
    return r;
  }

  // Tunes, keeping every event; the status of the call.
  absl::Status Tune(const kiln::v1::AutotuneRequest& request) {
    events_.clear();
    return tuner_->Tune(request, {}, [this](const AutotuneProgress& p) {
      events_.push_back(p);
    });
  }

  const AutotuneProgress& Last() const { return events_.back(); }

  const CandidateResult& Candidate(const std::string& label) const {
    for (const CandidateResult& c : Last().result().candidates()) {
      if (c.label() == label) return c;
    }
    ADD_FAILURE() << "no candidate " << label;
    static CandidateResult none;
    return none;
  }

  int Count(AutotuneProgress::Event kind) const {
    int n = 0;
    for (const AutotuneProgress& p : events_) n += p.event() == kind;
    return n;
  }

  testing::TempDir dir_;
  std::unique_ptr<cache::Cache> cache_;
  std::unique_ptr<CompileEngine> engine_;
  std::unique_ptr<Autotuner> tuner_;
  std::vector<AutotuneProgress> events_;
};

TEST_F(AutotunerTest, ChoosesTheFastestStoresItAndReusesIt) {
  ASSERT_TRUE(Tune(Request(kScale)).ok());
  ASSERT_EQ(Last().event(), AutotuneProgress::EVENT_DONE);
  const kiln::v1::AutotuneResult result = Last().result();
  EXPECT_FALSE(result.cached());
  ASSERT_EQ(result.candidates_size(), 2);
  EXPECT_EQ(Count(AutotuneProgress::EVENT_COMPILED), 2);
  EXPECT_EQ(Count(AutotuneProgress::EVENT_BENCHMARKED), 2);
  // The choice is the lowest median, and every candidate was timed.
  double fastest = 1e300;
  for (const CandidateResult& c : result.candidates()) {
    EXPECT_EQ(c.status(), kiln::v1::CANDIDATE_STATUS_BENCHMARKED);
    EXPECT_GE(c.runs(), 3);
    EXPECT_GT(c.median_us(), 0);
    EXPECT_LE(c.p10_us(), c.median_us());
    EXPECT_LE(c.median_us(), c.p90_us());
    EXPECT_TRUE(c.remeasured());
    fastest = std::min(fastest, c.median_us());
  }
  EXPECT_EQ(result.best_median_us(), fastest);
  EXPECT_EQ(Candidate(result.best_label()).median_us(), fastest);
  EXPECT_EQ(result.best_bindings().size(), 1u);
  EXPECT_EQ(result.shape_bucket().at("N"), 4096);

  // Stored under the tuning key, with its explanation.
  auto digest = cache::Digest::Parse(result.tuning_key());
  ASSERT_TRUE(digest.ok());
  auto entry = cache_->Get(*digest);
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ(entry->info.metadata.kernel_name, "scale");
  EXPECT_EQ(entry->info.metadata.target_arch, "cpu");
  ASSERT_NE(entry->Find(kTuningTextBlob), nullptr);
  EXPECT_THAT(entry->Find(kTuningTextBlob)->data,
              HasSubstr("kiln-tuning-key-v1"));

  // The same kernel at a shape of the same bucket: answered from the
  // cache, nothing compiled or benchmarked. So is a narrower candidate list
  // that holds the choice.
  const int starts = tuner_->worker_starts();
  std::string narrower = kScale;
  narrower.replace(narrower.find("[64, 128]"), 9,
                   "[" + result.best_label().substr(2) + "]");
  for (const std::string& text : {std::string(kScale), narrower}) {
    ASSERT_TRUE(Tune(Request(text, 3000)).ok());
    ASSERT_EQ(events_.size(), 1u);
    EXPECT_EQ(Last().event(), AutotuneProgress::EVENT_CACHED);
    EXPECT_THAT(Last().message(), HasSubstr("cached"));
    EXPECT_TRUE(Last().result().cached());
    EXPECT_EQ(Last().result().best_label(), result.best_label());
    EXPECT_EQ(Last().result().candidates_size(), 2);
  }
  EXPECT_EQ(tuner_->worker_starts(), starts);

  // A wider list was not all considered: it is tuned, over all three.
  ASSERT_TRUE(Tune(Request(Scale3(), 3000)).ok());
  EXPECT_EQ(Last().event(), AutotuneProgress::EVENT_DONE);
  EXPECT_EQ(Last().result().tuning_key(), result.tuning_key());
  EXPECT_EQ(Last().result().candidates_size(), 3);

  // Another bucket tunes again; so does force.
  ASSERT_TRUE(Tune(Request(kScale, 5000)).ok());
  EXPECT_EQ(Last().event(), AutotuneProgress::EVENT_DONE);
  EXPECT_NE(Last().result().tuning_key(), result.tuning_key());
  kiln::v1::AutotuneRequest forced = Request(kScale);
  forced.mutable_options()->set_force(true);
  ASSERT_TRUE(Tune(forced).ok());
  EXPECT_EQ(Last().event(), AutotuneProgress::EVENT_DONE);
  EXPECT_EQ(Last().result().tuning_key(), result.tuning_key());
}

// R repeats the same work: R = 200 is far slower and computes the same.
// (A running maximum, so that the repeats are not one loop-invariant store
// the CPU back end's optimiser may fold away.)
constexpr char kRepeat[] = R"(
kernel repeat(X: f32[N], Y: f32[N], a: f32)
  tune R in [1, 200]
  grid(ceildiv(N, 64)) threads(32) (bx) {
  alloc fragment T: f32[64]
  alloc fragment U: f32[64]
  copy X[bx * 64:+64] -> T
  fill U, 0
  for r in serial(R) {
    parallel (i) in (64) {
      U[i] = max(U[i], T[i] * a)
    }
  }
  copy U -> Y[bx * 64:+64]
}
)";

TEST_F(AutotunerTest, ACandidateThatCannotWinStopsBeingTimedEarly) {
  kiln::v1::AutotuneRequest request = Request(kRepeat, 1 << 16);
  request.mutable_options()->set_min_runs(40);
  request.mutable_options()->set_min_time_ms(1);
  request.mutable_options()->set_remeasure_top(1);
  ASSERT_TRUE(Tune(request).ok()) << events_.back().message();
  const CandidateResult& fast = Candidate("R=1");
  const CandidateResult& slow = Candidate("R=200");
  EXPECT_EQ(Last().result().best_label(), "R=1");
  EXPECT_EQ(slow.status(), kiln::v1::CANDIDATE_STATUS_BENCHMARKED);
  EXPECT_GT(slow.median_us(), 1.5 * fast.median_us());
  // Its timing stopped after three runs; it was not among the fastest
  // measured again.
  EXPECT_THAT(slow.reason(), HasSubstr("timing stopped after 3 runs"));
  EXPECT_EQ(slow.runs(), 3);
  EXPECT_FALSE(slow.remeasured());
  EXPECT_EQ(fast.reason(), "");
  EXPECT_GE(fast.runs(), 40);
  EXPECT_THAT(FormatCandidateTable(Last().result()),
              HasSubstr("timing stopped after 3 runs"));
}

TEST_F(AutotunerTest, ACrashingCandidateFailsAloneAndTheWorkerRestarts) {
  kiln::v1::AutotuneRequest r = Request(Scale3());
  (*r.mutable_options()->mutable_faults())["B=32"] = "crash";
  (*r.mutable_options()->mutable_faults())["B=128"] = "abort";
  ASSERT_TRUE(Tune(r).ok());
  ASSERT_EQ(Last().event(), AutotuneProgress::EVENT_DONE);
  EXPECT_EQ(Candidate("B=32").status(), kiln::v1::CANDIDATE_STATUS_FAILED);
  EXPECT_THAT(Candidate("B=32").reason(), HasSubstr("SIGSEGV"));
  EXPECT_EQ(Candidate("B=128").status(), kiln::v1::CANDIDATE_STATUS_FAILED);
  EXPECT_THAT(Candidate("B=128").reason(), HasSubstr("SIGABRT"));
  EXPECT_EQ(Candidate("B=64").status(), kiln::v1::CANDIDATE_STATUS_BENCHMARKED);
  EXPECT_EQ(Last().result().best_label(), "B=64");
  EXPECT_EQ(Count(AutotuneProgress::EVENT_FAILED), 2);
  // One worker for B=32 (killed by SIGSEGV), a new one for B=64 and B=128
  // (killed by SIGABRT); nothing ran after that.
  EXPECT_EQ(tuner_->worker_starts(), 2);
}

TEST_F(AutotunerTest, AHangingCandidateIsKilledAtItsTimeLimit) {
  kiln::v1::AutotuneRequest r = Request(kScale);
  r.mutable_options()->set_time_limit_per_candidate_s(1);
  (*r.mutable_options()->mutable_faults())["B=128"] = "hang";
  const absl::Time start = absl::Now();
  ASSERT_TRUE(Tune(r).ok());
  EXPECT_LT(absl::Now() - start, absl::Seconds(20));
  EXPECT_EQ(Candidate("B=128").status(), kiln::v1::CANDIDATE_STATUS_FAILED);
  EXPECT_THAT(Candidate("B=128").reason(), HasSubstr("no result within 1s"));
  EXPECT_EQ(Last().result().best_label(), "B=64");
}

TEST_F(AutotunerTest, TuningsOfOneDeviceTakeTurns) {
  // The first tuning holds the worker (its first candidate hangs for 2 s);
  // the second waits for its turn, says so, then tunes.
  kiln::v1::AutotuneRequest first = Request(kScale);
  first.mutable_options()->set_time_limit_per_candidate_s(2);
  (*first.mutable_options()->mutable_faults())["B=64"] = "hang";
  absl::Notification benchmarking;
  std::thread t([&] {
    absl::Status status = tuner_->Tune(first, {}, [&](const auto& p) {
      if (p.compiled() == p.total() && !benchmarking.HasBeenNotified()) {
        benchmarking.Notify();
      }
    });
    EXPECT_TRUE(status.ok()) << status;
  });
  benchmarking.WaitForNotification();
  absl::SleepFor(absl::Milliseconds(200));
  ASSERT_TRUE(Tune(Request(kScale, 100)).ok());
  t.join();
  EXPECT_EQ(Count(AutotuneProgress::EVENT_WAITING), 1);
  EXPECT_EQ(Last().event(), AutotuneProgress::EVENT_DONE);
}

TEST_F(AutotunerTest, AWrongCandidateIsNeverChosen) {
  kiln::v1::AutotuneRequest r = Request(Scale3());
  (*r.mutable_options()->mutable_faults())["B=64"] = "wrong";
  (*r.mutable_options()->mutable_faults())["B=128"] = "wrong";
  ASSERT_TRUE(Tune(r).ok());
  for (const char* label : {"B=64", "B=128"}) {
    EXPECT_EQ(Candidate(label).status(), kiln::v1::CANDIDATE_STATUS_WRONG);
    EXPECT_THAT(Candidate(label).reason(),
                HasSubstr("output differs from B=32"));
  }
  EXPECT_EQ(Last().result().best_label(), "B=32");
  EXPECT_EQ(Last().result().reference(), "B=32 (the first candidate that ran)");
  EXPECT_EQ(Count(AutotuneProgress::EVENT_WRONG), 2);
}

// GPU tunings at small shapes check against the CPU target; forced here
// for a CPU tuning, a wrong *first* candidate is caught, which a check
// against the first candidate cannot do.
TEST_F(AutotunerTest, TheCpuReferenceCatchesAWrongFirstCandidate) {
  Open(nullptr, /*cpu_reference_always=*/true);
  kiln::v1::AutotuneRequest r = Request(Scale3());
  (*r.mutable_options()->mutable_faults())["B=32"] = "wrong";
  ASSERT_TRUE(Tune(r).ok());
  EXPECT_EQ(Last().result().reference(), "the CPU target (B=32)");
  EXPECT_EQ(Candidate("B=32").status(), kiln::v1::CANDIDATE_STATUS_WRONG);
  EXPECT_THAT(Candidate("B=32").reason(),
              HasSubstr("output differs from the CPU target's"));
  for (const char* label : {"B=64", "B=128"}) {
    EXPECT_EQ(Candidate(label).status(),
              kiln::v1::CANDIDATE_STATUS_BENCHMARKED);
  }
  EXPECT_NE(Last().result().best_label(), "B=32");
}

TEST_F(AutotunerTest, CandidatesThatDoNotCompileArePrunedWithTheReason) {
  Open([](const compiler::LoadedKernel& l)
           -> absl::StatusOr<compiler::CompiledKernel> {
    if (l.options.bindings.at("B") == 128) {
      return absl::InvalidArgumentError("scale.tile:3:3: error: too big");
    }
    return compiler::Compile(l);
  });
  ASSERT_TRUE(Tune(Request(Scale3())).ok());
  EXPECT_EQ(Candidate("B=128").status(), kiln::v1::CANDIDATE_STATUS_PRUNED);
  EXPECT_THAT(Candidate("B=128").reason(),
              HasSubstr("does not compile: scale.tile:3:3: error: too big"));
  EXPECT_EQ(Count(AutotuneProgress::EVENT_PRUNED), 1);
  EXPECT_THAT(Last().result().best_label(), Not("B=128"));
}

TEST_F(AutotunerTest, SpillingCandidatesArePrunedUnlessAllSpill) {
  // The compiler reports spills (a ptxas record) for `spilling` values.
  std::set<int64_t> spilling = {64};
  Open([&spilling](const compiler::LoadedKernel& l)
           -> absl::StatusOr<compiler::CompiledKernel> {
    absl::StatusOr<compiler::CompiledKernel> k = compiler::Compile(l);
    if (k.ok() && spilling.count(l.options.bindings.at("B"))) {
      k->metadata +=
          "ptxas registers 255 spill-stores 32 spill-loads 32 stack 32 "
          "static-shared 0\n";
    }
    return k;
  });
  ASSERT_TRUE(Tune(Request(Scale3())).ok());
  EXPECT_EQ(Candidate("B=64").status(), kiln::v1::CANDIDATE_STATUS_PRUNED);
  EXPECT_THAT(Candidate("B=64").reason(), HasSubstr("spills registers"));
  EXPECT_EQ(Candidate("B=32").status(), kiln::v1::CANDIDATE_STATUS_BENCHMARKED);
  EXPECT_NE(Last().result().best_label(), "B=64");

  // When every candidate spills, all are measured (another program, so
  // that neither binaries nor the result are reused from the cache).
  spilling = {64, 128};
  std::string other = kScale;
  other.replace(other.find("T[i] * a"), 8, "T[i] * a * a");
  ASSERT_TRUE(Tune(Request(other)).ok());
  for (const char* label : {"B=64", "B=128"}) {
    EXPECT_EQ(Candidate(label).status(),
              kiln::v1::CANDIDATE_STATUS_BENCHMARKED);
  }
}

TEST_F(AutotunerTest, FixedTunablesNarrowTheSpace) {
  kiln::v1::AutotuneRequest r = Request(Scale3());
  (*r.mutable_fixed_bindings())["B"] = 64;
  ASSERT_TRUE(Tune(r).ok());
  ASSERT_EQ(Last().result().candidates_size(), 1);
  EXPECT_EQ(Last().result().best_label(), "B=64");
}

TEST_F(AutotunerTest, ExplicitConfigsAreTheCandidatesInTheirOrder) {
  kiln::v1::AutotuneRequest r = Request(Scale3());
  for (int64_t b : {128, 32, 48, 128}) {
    (*r.add_configs()->mutable_bindings())["B"] = b;
  }
  ASSERT_TRUE(Tune(r).ok());
  const kiln::v1::AutotuneResult& result = Last().result();
  ASSERT_EQ(result.candidates_size(), 2);
  EXPECT_EQ(result.candidates(0).label(), "B=128");
  EXPECT_EQ(result.candidates(1).label(), "B=32");
  EXPECT_THAT(result.best_label(), Not("B=64"));
  ASSERT_EQ(result.excluded_configs_size(), 2);
  EXPECT_EQ(result.excluded_configs(0),
            "B=48: B=48 is not one of B's values [32, 64, 128]");
  EXPECT_EQ(result.excluded_configs(1), "B=128: repeats an earlier config");

  // The whole space was not considered: tuned again, not answered from
  // the two-config result.
  ASSERT_TRUE(Tune(Request(Scale3())).ok());
  EXPECT_EQ(Last().event(), AutotuneProgress::EVENT_DONE);
  EXPECT_EQ(Last().result().candidates_size(), 3);
  EXPECT_EQ(Last().result().excluded_configs_size(), 0);

  // A config naming something that is not a tunable is a bad request;
  // configs that select nothing leave nothing to tune.
  kiln::v1::AutotuneRequest bad = Request(Scale3());
  (*bad.add_configs()->mutable_bindings())["BLOCK"] = 64;
  absl::Status status = Tune(bad);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("config 0 binds BLOCK"));
  kiln::v1::AutotuneRequest none = Request(Scale3());
  (*none.add_configs()->mutable_bindings())["B"] = 100;
  status = Tune(none);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("B=100 is not one of"));
}

TEST_F(AutotunerTest, NoValidCandidateIsAnError) {
  kiln::v1::AutotuneRequest r = Request(kScale);
  (*r.mutable_options()->mutable_faults())["B=64"] = "crash";
  (*r.mutable_options()->mutable_faults())["B=128"] = "crash";
  absl::Status status = Tune(r);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("ran correctly"));
}

TEST_F(AutotunerTest, BadRequestsAreInvalidArguments) {
  struct Case {
    std::function<void(kiln::v1::AutotuneRequest&)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](auto& r) { r.clear_ir_text(); }, "no IR text"},
      {[](auto& r) { r.mutable_shape()->clear(); }, "no shape for symbol N"},
      {[](auto& r) { (*r.mutable_shape())["Q"] = 4; }, "names no symbol"},
      {[](auto& r) { (*r.mutable_shape())["N"] = 0; }, "must be positive"},
      {[](auto& r) { (*r.mutable_fixed_bindings())["Z"] = 1; },
       "neither a symbol nor a tunable"},
      {[](auto& r) { r.mutable_options()->set_min_runs(-1); },
       "must not be negative"},
      {[](auto& r) { r.mutable_options()->set_max_candidates(5000); },
       "over the limit of 4096"},
      {[](auto& r) { r.set_ir_text("kernel broken("); }, "scale.tile:1:"},
      {[](auto& r) {
         (*r.mutable_options()->mutable_faults())["B=64"] = "explode";
       },
       "not one of crash"},
  };
  for (const Case& c : cases) {
    kiln::v1::AutotuneRequest r = Request(kScale);
    c.change(r);
    absl::Status status = Tune(r);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
    EXPECT_THAT(status.message(), HasSubstr(c.message));
  }
  kiln::v1::AutotuneRequest r = Request(kScale);
  r.set_kernel("nope");
  EXPECT_TRUE(absl::IsNotFound(Tune(r)));
  r = Request(kScale);
  r.set_target("sm_90a");
  EXPECT_TRUE(absl::IsFailedPrecondition(Tune(r)));
}

TEST_F(AutotunerTest, HipTargetsAreRefusedClearly) {
  // Even with an AMD GPU of that target on the host.
  tuner_.reset();
  AutotunerOptions options;
  options.gpus.push_back({0, "gfx90a", "AMD-Instinct-MI250X-110CU"});
  tuner_ = std::make_unique<Autotuner>(engine_.get(), cache_.get(), options);
  kiln::v1::AutotuneRequest r = Request(kScale);
  r.set_target("gfx90a");
  absl::Status status = Tune(r);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(),
              HasSubstr("autotuning gfx90a is not supported yet"));
}

TEST_F(AutotunerTest, FaultsNeedTheEnvironmentSwitch) {
  AutotunerOptions options;
  options.allow_faults = false;
  tuner_ = std::make_unique<Autotuner>(engine_.get(), cache_.get(), options);
  kiln::v1::AutotuneRequest r = Request(kScale);
  (*r.mutable_options()->mutable_faults())["B=64"] = "crash";
  absl::Status status = Tune(r);
  EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
  EXPECT_THAT(status.message(), HasSubstr("KILN_BENCH_WORKER_FAULTS=1"));
}

}  // namespace
}  // namespace kiln::server::tuning
