// CompileEngine: cache hits, single-flight compiles, the worker pool's bound,
// errors, deadlines and shutdown. Each test has its own cache directory.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/barrier.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "cache/blob_directory.h"
#include "cache/cache.h"
#include "cache/redis_storage.h"
#include "server/engine/compile_engine.h"
#include "tests/cache/redis_server.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_kernels.h"

namespace kiln::server {
namespace {

constexpr const char* kScale = ::kiln::testing::kScaleKernel;

CompileRequest Request(int64_t b = 64) {
  CompileRequest r;
  r.ir_text = kScale;
  r.bindings = {{"B", b}};
  r.filename = "scale.tile";
  return r;
}

// The scale kernel under another name: a different binary key.
CompileRequest Renamed(int i) {
  CompileRequest r = Request();
  std::string text = kScale;
  text.replace(text.find("scale("), 5, "scale" + std::to_string(i));
  r.ir_text = text;
  return r;
}

// Returns once a compile is running on the engine's pool.
void WaitUntilCompiling(CompileEngine& engine) {
  while (engine.Stats().active_compiles == 0) {
    absl::SleepFor(absl::Milliseconds(1));
  }
}

// A fake compiler that sleeps, counting calls and the most running at once.
struct FakeCompiler {
  absl::Duration delay = absl::Milliseconds(100);
  std::atomic<int> calls{0};
  std::atomic<int> running{0};
  std::atomic<int> peak{0};

  std::function<
      absl::StatusOr<compiler::CompiledKernel>(const compiler::LoadedKernel&)>
  Fn() {
    return [this](const compiler::LoadedKernel& l)
               -> absl::StatusOr<compiler::CompiledKernel> {
      const compiler::CompileOptions& o = l.options;
      ++calls;
      int now = ++running;
      int prev = peak.load();
      while (now > prev && !peak.compare_exchange_weak(prev, now)) {
      }
      absl::SleepFor(delay);
      --running;
      compiler::CompiledKernel k;
      k.name = "scale";
      k.target = o.target;
      k.binary = "fake binary";
      k.metadata = "fake metadata";
      return k;
    };
  }
};

class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cache::LocalStoreOptions local;
    local.fsync = false;
    auto c = cache::Cache::Open(dir_.File("cache"), local, nullptr);
    ASSERT_TRUE(c.ok()) << c.status();
    cache_ = std::move(*c);
  }

  std::unique_ptr<CompileEngine> Engine(CompileEngineOptions options = {}) {
    auto e = CompileEngine::Create(cache_.get(), std::move(options));
    EXPECT_TRUE(e.ok()) << e.status();
    return e.ok() ? std::move(*e) : nullptr;
  }

  testing::TempDir dir_;
  std::unique_ptr<cache::Cache> cache_;
};

TEST_F(EngineTest, CompilesThenHitsTheLocalCache) {
  auto engine = Engine();
  auto first = engine->Compile(Request());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->tier, "compiled");
  EXPECT_EQ(first->binary.substr(0, 4),
            "\x7f"
            "ELF");
  EXPECT_NE(first->metadata.find("kiln-kernel 1"), std::string::npos);
  EXPECT_EQ(first->key.size(), 64u);
  EXPECT_EQ(first->kernel_name, "scale");
  EXPECT_EQ(first->target, "cpu");
  EXPECT_GT(first->compile_ms, 0);
  EXPECT_NE(first->compile_log.find("total_ms"), std::string::npos);

  // Served from memory by this engine, from the local store by a new one.
  auto remembered = engine->Compile(Request());
  ASSERT_TRUE(remembered.ok()) << remembered.status();
  EXPECT_EQ(remembered->tier, "memory");
  EXPECT_EQ(remembered->binary, first->binary);
  EXPECT_EQ(remembered->compile_ms, 0);
  auto fresh = Engine();
  auto second = fresh->Compile(Request());
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->tier, "local");
  EXPECT_EQ(second->key, first->key);
  EXPECT_EQ(second->binary, first->binary);
  EXPECT_EQ(second->metadata, first->metadata);
  EXPECT_EQ(second->compile_log, first->compile_log);
  EXPECT_EQ(second->kernel_name, "scale");
  EXPECT_EQ(second->compile_ms, 0);

  EngineStats s = engine->Stats();
  EXPECT_EQ(s.compiles, 1);
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.hits, 1);
  EXPECT_EQ(s.memory_hits, 1);
  EXPECT_EQ(s.errors, 0);
  EXPECT_EQ(fresh->Stats().hits, 1);
  EXPECT_EQ(fresh->Stats().memory_hits, 0);

  EXPECT_EQ(engine->Lookup(first->key).value_or(false), true);
  auto got = engine->Get(first->key);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->binary, first->binary);
  EXPECT_EQ(got->tier, "local");

  std::string absent(64, '0');
  EXPECT_EQ(engine->Lookup(absent).value_or(true), false);
  EXPECT_EQ(engine->Get(absent).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine->Lookup("not-a-key").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(EngineTest, AnEntryThatIsNotAKernelIsDroppedAndCompiledAgain) {
  auto engine = Engine();
  auto first = engine->Compile(Request());
  ASSERT_TRUE(first.ok()) << first.status();
  const cache::Digest key = *cache::Digest::Parse(first->key);
  // A sound entry (sealed rows, blobs that hash right, a key text that gives
  // its key) with no binary: nothing can serve it.
  absl::StatusOr<cache::Entry> stored = cache_->local().Get(key, false);
  ASSERT_TRUE(stored.ok()) << stored.status();
  cache::EntryData data{stored->info.metadata, {}};
  for (const cache::Blob& b : stored->blobs) {
    if (b.name != kBinaryBlob) data.blobs.push_back(b);
  }
  ASSERT_TRUE(cache_->local().Put(key, data).ok());

  auto fresh = Engine();
  auto again = fresh->Compile(Request());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->tier, "compiled");
  EXPECT_EQ(again->binary, first->binary);
  // And the entry stored in its place is whole again.
  auto got = fresh->Get(first->key);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->binary, first->binary);
}

TEST_F(EngineTest, ALookupThatFailsIsAMissNotAnError) {
  auto engine = Engine();
  auto first = engine->Compile(Request());
  ASSERT_TRUE(first.ok()) << first.status();
  // The binary's blob file is a symlink to itself now: opening it is an I/O
  // error (ELOOP), not a verdict on the entry, and the store says so.
  absl::StatusOr<cache::EntryInfo> info =
      cache_->local().Stat(*cache::Digest::Parse(first->key));
  ASSERT_TRUE(info.ok());
  const std::string path =
      cache::BlobDirectory(dir_.File("cache")).PathOf(info->blobs[0].digest);
  std::filesystem::remove(path);
  std::filesystem::create_symlink(path, path);
  EXPECT_FALSE(absl::IsNotFound(
      cache_->local().Get(*cache::Digest::Parse(first->key)).status()));
  auto fresh = Engine();
  auto again = fresh->Compile(Request());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->tier, "compiled");
  EXPECT_EQ(again->binary, first->binary);
}

TEST_F(EngineTest, AFailedCompileIsRememberedForAWhile) {
  std::atomic<int> calls{0};
  CompileEngineOptions options;
  options.memory_cache_bytes = 0;
  options.failed_compile_ttl = absl::Milliseconds(400);
  options.compile_fn = [&calls](const compiler::LoadedKernel&)
      -> absl::StatusOr<compiler::CompiledKernel> {
    ++calls;
    return absl::InvalidArgumentError("scale.tile:3:7: error: broken");
  };
  auto engine = Engine(options);
  for (int i = 0; i < 50; ++i) {
    auto r = engine->Compile(Request());
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().message(), "scale.tile:3:7: error: broken");
  }
  EXPECT_EQ(calls.load(), 1);
  EXPECT_EQ(engine->Stats().remembered_failures, 49);
  // Another kernel is not affected; after the time to live the same one is
  // compiled again.
  EXPECT_FALSE(engine->Compile(Request(128)).ok());
  EXPECT_EQ(calls.load(), 2);
  absl::SleepFor(absl::Milliseconds(500));
  EXPECT_FALSE(engine->Compile(Request()).ok());
  EXPECT_EQ(calls.load(), 3);

  // Running out of time is not remembered; with the TTL at zero nothing is.
  std::atomic<int> slow{0};
  CompileEngineOptions timing_out;
  timing_out.memory_cache_bytes = 0;
  timing_out.compile_fn = [&slow](const compiler::LoadedKernel&)
      -> absl::StatusOr<compiler::CompiledKernel> {
    ++slow;
    return absl::DeadlineExceededError("took too long");
  };
  auto engine2 = Engine(timing_out);
  EXPECT_FALSE(engine2->Compile(Request()).ok());
  EXPECT_FALSE(engine2->Compile(Request()).ok());
  EXPECT_EQ(slow.load(), 2);
  options.failed_compile_ttl = absl::ZeroDuration();
  calls = 0;
  auto engine3 = Engine(options);
  EXPECT_FALSE(engine3->Compile(Request()).ok());
  EXPECT_FALSE(engine3->Compile(Request()).ok());
  EXPECT_EQ(calls.load(), 2);
}

TEST_F(EngineTest, SixtyFourConcurrentRequestsCompileOnce) {
  std::atomic<int> calls{0};
  CompileEngineOptions options;
  options.compile_fn = [&calls](const compiler::LoadedKernel& l) {
    ++calls;
    // Long enough for every thread to miss the cache and join, even on a
    // loaded machine.
    absl::SleepFor(absl::Milliseconds(200));
    return compiler::Compile(l);
  };
  auto engine = Engine(options);
  constexpr int kThreads = 64;
  std::vector<absl::StatusOr<KernelHandle>> results(
      kThreads, absl::UnknownError("not run"));
  absl::Barrier* start = new absl::Barrier(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      if (start->Block()) delete start;
      results[i] = engine->Compile(Request());
    });
  }
  for (auto& t : threads) t.join();

  EXPECT_EQ(calls.load(), 1);
  EngineStats s = engine->Stats();
  EXPECT_EQ(s.compiles, 1);
  EXPECT_EQ(s.hits + s.misses, kThreads);
  EXPECT_EQ(s.errors, 0);
  EXPECT_GT(s.single_flight_joins, 0);
  ASSERT_TRUE(results[0].ok()) << results[0].status();
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->key, results[0]->key);
    EXPECT_EQ(r->binary, results[0]->binary);
  }
}

TEST_F(EngineTest, ConcurrentRequestsShareOneError) {
  std::atomic<int> calls{0};
  CompileEngineOptions options;
  options.compile_fn = [&calls](const compiler::LoadedKernel&)
      -> absl::StatusOr<compiler::CompiledKernel> {
    ++calls;
    absl::SleepFor(absl::Milliseconds(100));
    return absl::UnimplementedError("op 'foo' has no CPU lowering");
  };
  auto engine = Engine(options);
  std::vector<absl::Status> results(8);
  std::vector<std::thread> threads;
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back(
        [&, i] { results[i] = engine->Compile(Request()).status(); });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(calls.load(), 1);
  for (const auto& s : results) {
    EXPECT_EQ(s.code(), absl::StatusCode::kUnimplemented) << s;
    EXPECT_EQ(s, results[0]);
  }
  EXPECT_EQ(engine->Stats().errors, 8);
  EXPECT_EQ(engine->Stats().compiles, 1);
}

TEST_F(EngineTest, DifferentKeysCompileInParallelUpToThePoolSize) {
  FakeCompiler fake;
  CompileEngineOptions options;
  options.worker_threads = 2;
  options.compile_fn = fake.Fn();
  auto engine = Engine(options);
  constexpr int kKernels = 5;
  std::vector<absl::StatusOr<KernelHandle>> results(
      kKernels, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kKernels; ++i) {
    threads.emplace_back([&, i] { results[i] = engine->Compile(Renamed(i)); });
  }
  for (auto& t : threads) t.join();
  std::vector<std::string> keys;
  for (const auto& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    keys.push_back(r->key);
  }
  std::sort(keys.begin(), keys.end());
  EXPECT_EQ(std::unique(keys.begin(), keys.end()), keys.end());
  EXPECT_EQ(fake.calls.load(), kKernels);
  EXPECT_EQ(fake.peak.load(), 2);
  EXPECT_EQ(engine->Stats().peak_running_compiles, 2);
  EXPECT_EQ(engine->Stats().compiles, kKernels);
}

TEST_F(EngineTest, TooManyPendingCompilesIsResourceExhausted) {
  FakeCompiler fake;
  fake.delay = absl::Milliseconds(300);
  CompileEngineOptions options;
  options.worker_threads = 1;
  options.max_queued_compiles = 1;
  options.compile_fn = fake.Fn();
  auto engine = Engine(options);
  std::thread first([&] { EXPECT_TRUE(engine->Compile(Renamed(0)).ok()); });
  WaitUntilCompiling(*engine);
  EXPECT_EQ(engine->Compile(Renamed(1)).status().code(),
            absl::StatusCode::kResourceExhausted);
  first.join();
  EXPECT_TRUE(engine->Compile(Renamed(1)).ok());
}

TEST_F(EngineTest, InvalidRequestsAreInvalidArgument) {
  CompileEngineOptions options;
  options.max_ir_bytes = 1000;
  auto engine = Engine(options);

  CompileRequest bad = Request();
  bad.ir_text = "kernel k() grid(1) threads(1) (b) { copy X -> Y }";
  bad.filename = "bad.tile";
  auto b = engine->Compile(bad);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(b.status().message().find("bad.tile:1:"), std::string::npos)
      << b.status();

  CompileRequest gpu = Request();
  gpu.target = "sm_99";
  auto g = engine->Compile(gpu);
  EXPECT_EQ(g.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(g.status().message().find("unknown target 'sm_99'"),
            std::string::npos)
      << g.status();

  CompileRequest missing = Request();
  missing.bindings.clear();
  auto m = engine->Compile(missing);
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("tunable 'B'"), std::string::npos)
      << m.status();

  CompileRequest big = Request();
  big.ir_text += std::string(1000, '\n');
  auto o = engine->Compile(big);
  EXPECT_EQ(o.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(o.status().message().find("limit is 1000"), std::string::npos)
      << o.status();

  EngineStats s = engine->Stats();
  EXPECT_EQ(s.errors, 4);
  // Only the missing tunable gets past compiler::BinaryKey (the passes
  // find it); the others never reach the pool.
  EXPECT_EQ(s.compiles, 1);
  EXPECT_EQ(s.misses, 1);
}

TEST_F(EngineTest, ExpiredDeadlineIsDeadlineExceeded) {
  auto engine = Engine();
  CompileRequest r = Request();
  r.deadline = absl::Now() - absl::Seconds(1);
  EXPECT_EQ(engine->Compile(r).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(engine->Stats().deadline_exceeded, 1);
  EXPECT_EQ(engine->Stats().compiles, 0);
}

TEST_F(EngineTest, ADeadlineDoesNotCancelTheSharedCompile) {
  FakeCompiler fake;
  fake.delay = absl::Milliseconds(300);
  CompileEngineOptions options;
  options.compile_fn = fake.Fn();
  auto engine = Engine(options);
  absl::StatusOr<KernelHandle> patient = absl::UnknownError("not run");
  std::thread t([&] { patient = engine->Compile(Request()); });
  WaitUntilCompiling(*engine);
  CompileRequest hurried = Request();
  hurried.deadline = absl::Now() + absl::Milliseconds(50);
  EXPECT_EQ(engine->Compile(hurried).status().code(),
            absl::StatusCode::kDeadlineExceeded);
  t.join();
  ASSERT_TRUE(patient.ok()) << patient.status();
  EXPECT_EQ(patient->binary, "fake binary");
  EXPECT_EQ(fake.calls.load(), 1);
  EXPECT_EQ(engine->Stats().single_flight_joins, 1);
}

TEST_F(EngineTest, CompileTimeLimitFailsAllWaiters) {
  FakeCompiler fake;
  fake.delay = absl::Milliseconds(300);
  CompileEngineOptions options;
  options.compile_fn = fake.Fn();
  options.compile_time_limit = absl::Milliseconds(50);
  auto engine = Engine(options);
  auto r = engine->Compile(Request());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kDeadlineExceeded)
      << r.status();
  EXPECT_NE(r.status().message().find("time limit"), std::string::npos);
  engine->Shutdown();  // waits for the runaway compile, which is stored
  auto key = compiler::BinaryKey(kScale, [] {
    compiler::CompileOptions o;
    o.bindings = {{"B", 64}};
    return o;
  }());
  ASSERT_TRUE(key.ok());
  EXPECT_EQ(engine->Lookup(*key).value_or(false), true);
}

TEST_F(EngineTest, ShutdownDrainsThenRefuses) {
  FakeCompiler fake;
  fake.delay = absl::Milliseconds(200);
  CompileEngineOptions options;
  options.compile_fn = fake.Fn();
  auto engine = Engine(options);
  absl::StatusOr<KernelHandle> in_flight = absl::UnknownError("not run");
  std::thread t([&] { in_flight = engine->Compile(Request()); });
  WaitUntilCompiling(*engine);
  engine->Shutdown();
  EXPECT_EQ(engine->Stats().active_compiles, 0);
  t.join();
  EXPECT_TRUE(in_flight.ok()) << in_flight.status();
  auto after = engine->Compile(Request());
  EXPECT_EQ(after.status().code(), absl::StatusCode::kUnavailable);
  engine->Shutdown();  // idempotent
}

TEST_F(EngineTest, MemoryTierIsBoundedAndForgetsEvictedKernels) {
  FakeCompiler fake;
  fake.delay = absl::ZeroDuration();
  CompileEngineOptions options;
  options.compile_fn = fake.Fn();
  // Room for two and a half handles (each counts its strings plus 256).
  auto sizer = Engine(options);
  auto sample = sizer->Compile(Renamed(9));
  ASSERT_TRUE(sample.ok());
  const size_t handle_bytes = sample->binary.size() + sample->metadata.size() +
                              sample->compile_log.size() + 256;
  options.memory_cache_bytes = handle_bytes * 5 / 2;
  auto engine = Engine(options);
  ASSERT_TRUE(engine->Compile(Renamed(1)).ok());
  ASSERT_TRUE(engine->Compile(Renamed(2)).ok());
  EXPECT_EQ(engine->Compile(Renamed(1)).value().tier, "memory");
  // A third kernel pushes out the least recently used one (2).
  ASSERT_TRUE(engine->Compile(Renamed(3)).ok());
  EXPECT_EQ(engine->Compile(Renamed(2)).value().tier, "local");
  // Evict forgets it in memory too: the next request compiles again.
  auto one = engine->Compile(Renamed(3));
  ASSERT_TRUE(one.ok());
  ASSERT_TRUE(engine->Evict(one->key).ok());
  EXPECT_EQ(engine->Compile(Renamed(3)).value().tier, "compiled");
  // A different binding is a different request and kernel.
  CompileRequest other = Renamed(3);
  other.bindings["B"] = 128;
  EXPECT_EQ(engine->Compile(other).value().tier, "compiled");
  EXPECT_EQ(fake.calls.load(), 6);  // 9, 1, 2, 3, 3 again, 3 with B=128
}

TEST_F(EngineTest, ACancelledRequestStopsWaitingAndItsQueuedCompileIsDropped) {
  FakeCompiler fake;
  fake.delay = absl::Milliseconds(300);
  CompileEngineOptions options;
  options.compile_fn = fake.Fn();
  options.worker_threads = 1;
  auto engine = Engine(options);
  // Occupy the only worker, then queue a second key behind it.
  absl::StatusOr<KernelHandle> first = absl::UnknownError("not run");
  std::thread t([&] { first = engine->Compile(Renamed(1)); });
  WaitUntilCompiling(*engine);
  std::atomic<bool> gone{false};
  CompileRequest queued = Renamed(2);
  queued.cancelled = [&] { return gone.load(); };
  absl::StatusOr<KernelHandle> second = absl::UnknownError("not run");
  std::thread u([&] { second = engine->Compile(queued); });
  absl::SleepFor(absl::Milliseconds(50));
  const absl::Time cancelled_at = absl::Now();
  gone = true;
  u.join();
  EXPECT_EQ(second.status().code(), absl::StatusCode::kCancelled)
      << second.status();
  // It stopped waiting within a few polls, not after the running compile.
  EXPECT_LT(absl::Now() - cancelled_at, absl::Milliseconds(200));
  t.join();
  ASSERT_TRUE(first.ok()) << first.status();
  engine->Shutdown();
  // The dropped compile never ran.
  EXPECT_EQ(fake.calls.load(), 1);
  EXPECT_EQ(engine->Stats().cancelled, 1);
  auto key = engine->KeyFor(queued);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(engine->Lookup(*key).value_or(true), false);
}

TEST_F(EngineTest, AlreadyCancelledRequestDoesNoWork) {
  FakeCompiler fake;
  CompileEngineOptions options;
  options.compile_fn = fake.Fn();
  auto engine = Engine(options);
  CompileRequest r = Request();
  r.cancelled = [] { return true; };
  EXPECT_EQ(engine->Compile(r).status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(fake.calls.load(), 0);
}

TEST_F(EngineTest, BatchReportsEveryRequestOnceAndListEvictWork) {
  FakeCompiler fake;
  fake.delay = absl::Milliseconds(20);
  CompileEngineOptions options;
  options.compile_fn = fake.Fn();
  auto engine = Engine(options);
  std::vector<CompileRequest> batch = {Renamed(1), Renamed(2), Renamed(1),
                                       Request()};
  batch.push_back(Request());
  batch.back().ir_text = "kernel broken(";
  std::vector<int> seen(batch.size(), 0);
  std::vector<std::string> keys(batch.size());
  engine->CompileBatch(batch, 3,
                       [&](size_t i, const absl::StatusOr<KernelHandle>& r) {
                         ++seen[i];
                         if (r.ok()) keys[i] = r->key;
                       });
  EXPECT_EQ(seen, std::vector<int>(batch.size(), 1));
  EXPECT_EQ(keys[0], keys[2]);
  EXPECT_TRUE(keys[4].empty());
  EXPECT_EQ(fake.calls.load(), 3);  // renamed 1 and 2, scale

  auto listed = engine->List({});
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), 3u);
  ASSERT_TRUE(engine->Evict(keys[0]).ok());
  EXPECT_EQ(engine->Evict(keys[0]).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(engine->Evict("not-a-key").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(engine->Lookup(keys[0]).value_or(true), false);
  auto stats = engine->CacheStats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->entries, 2);
}

// Several engines, each with its own local cache, sharing one real Redis:
// the daemons of a cluster.
class ClusterEngineTest : public ::testing::Test {
 protected:
  static constexpr char kSecret[] = "cluster-test-secret-0123456789";

  void SetUp() override {
    if (cache::testing::FindRedisServer().empty()) {
      GTEST_SKIP() << "redis-server is not installed (deploy/install-deps.sh "
                      "installs it)";
    }
    redis_ = std::make_unique<cache::testing::RedisServer>(dir_.File("redis"));
    std::filesystem::create_directories(dir_.File("redis"));
    ASSERT_TRUE(redis_->Start()) << redis_->Log();
  }

  // A daemon: its own cache directory `name`, the shared tier, `fake` as
  // its compiler.
  struct Daemon {
    std::unique_ptr<cache::Cache> cache;
    std::unique_ptr<CompileEngine> engine;
  };
  Daemon Start(const std::string& name, FakeCompiler& fake,
               CompileEngineOptions options = {}) {
    cache::CacheOptions cache_options;
    cache_options.local.fsync = false;
    cache::RemoteTierOptions remote;
    remote.url = redis_->unix_url();
    remote.secret = kSecret;
    cache_options.remote = remote;
    Daemon d;
    auto c = cache::Cache::Open(dir_.File(name), cache_options);
    EXPECT_TRUE(c.ok()) << c.status();
    if (!c.ok()) return d;
    d.cache = std::move(*c);
    options.memory_cache_bytes = 0;
    options.cluster_poll = absl::Milliseconds(10);
    if (!options.compile_fn) options.compile_fn = fake.Fn();
    auto e = CompileEngine::Create(d.cache.get(), std::move(options));
    EXPECT_TRUE(e.ok()) << e.status();
    if (e.ok()) d.engine = std::move(*e);
    return d;
  }

  // Raw access to the shared Redis.
  std::unique_ptr<cache::RedisStorage> Raw() {
    return std::make_unique<cache::RedisStorage>(
        *cache::RedisUrl::Parse(redis_->unix_url()),
        cache::RemoteStorageOptions());
  }

  testing::TempDir dir_;
  std::unique_ptr<cache::testing::RedisServer> redis_;
};

TEST_F(ClusterEngineTest, TwoDaemonsMissingTheSameKernelCompileItOnce) {
  FakeCompiler fake_a, fake_b;
  fake_a.delay = fake_b.delay = absl::Milliseconds(400);
  Daemon a = Start("a", fake_a);
  Daemon b = Start("b", fake_b);
  ASSERT_NE(a.engine, nullptr);
  ASSERT_NE(b.engine, nullptr);
  absl::StatusOr<KernelHandle> from_a, from_b;
  absl::Barrier start(2);
  std::thread ta([&] {
    start.Block();
    from_a = a.engine->Compile(Request());
  });
  std::thread tb([&] {
    start.Block();
    from_b = b.engine->Compile(Request());
  });
  ta.join();
  tb.join();
  ASSERT_TRUE(from_a.ok()) << from_a.status();
  ASSERT_TRUE(from_b.ok()) << from_b.status();
  EXPECT_EQ(fake_a.calls + fake_b.calls, 1);
  EXPECT_EQ(from_a->key, from_b->key);
  EXPECT_EQ(from_a->binary, "fake binary");
  EXPECT_EQ(from_b->binary, "fake binary");
  // One compiled it; the other waited and was served the first one's entry.
  const bool a_compiled = fake_a.calls == 1;
  const KernelHandle& waiter = a_compiled ? *from_b : *from_a;
  const EngineStats ws = (a_compiled ? b : a).engine->Stats();
  EXPECT_EQ((a_compiled ? from_a : from_b)->tier, "compiled");
  EXPECT_EQ(waiter.tier, "remote");
  EXPECT_EQ(ws.compiles, 0);
  EXPECT_EQ(ws.cluster_waits, 1);
  EXPECT_EQ(ws.cluster_served, 1);
  EXPECT_EQ(ws.cluster_takeovers, 0);
  // The waiter backfilled its local store.
  EXPECT_TRUE(*(a_compiled ? b : a).engine->Lookup(waiter.key));
}

TEST_F(ClusterEngineTest, ManyKernelsFromEveryDaemonAreCompiledOnceInAll) {
  constexpr int kDaemons = 3;
  constexpr int kKernels = 24;
  std::vector<std::unique_ptr<FakeCompiler>> fakes;
  std::vector<Daemon> daemons;
  for (int d = 0; d < kDaemons; ++d) {
    fakes.push_back(std::make_unique<FakeCompiler>());
    fakes.back()->delay = absl::Milliseconds(60);
    CompileEngineOptions options;
    options.worker_threads = 2;
    daemons.push_back(Start("d" + std::to_string(d), *fakes.back(), options));
    ASSERT_NE(daemons.back().engine, nullptr);
  }
  std::vector<CompileRequest> requests;
  for (int i = 0; i < kKernels; ++i) requests.push_back(Renamed(i));
  std::vector<std::thread> threads;
  std::vector<int> ok(kDaemons, 0);
  for (int d = 0; d < kDaemons; ++d) {
    threads.emplace_back([&, d] {
      daemons[d].engine->CompileBatch(
          requests, 8, [&](size_t, const absl::StatusOr<KernelHandle>& r) {
            EXPECT_TRUE(r.ok()) << r.status();
            if (r.ok()) ++ok[d];
          });
    });
  }
  for (std::thread& t : threads) t.join();
  int compiles = 0;
  for (int d = 0; d < kDaemons; ++d) {
    EXPECT_EQ(ok[d], kKernels) << "daemon " << d;
    compiles += fakes[d]->calls;
    EXPECT_EQ(daemons[d].engine->Stats().cluster_takeovers, 0) << d;
  }
  EXPECT_EQ(compiles, kKernels);
  // Waiting for one kernel does not hold up the others: every daemon
  // compiled some of them.
  for (int d = 0; d < kDaemons; ++d) {
    EXPECT_GT(fakes[d]->calls, 0) << "daemon " << d << " compiled nothing";
  }
}

TEST_F(ClusterEngineTest, ALeaseWhoseHolderDiedIsTakenOver) {
  FakeCompiler fake;
  CompileEngineOptions options;
  options.cluster_lease_ttl = absl::Seconds(5);
  Daemon b = Start("b", fake, options);
  ASSERT_NE(b.engine, nullptr);
  absl::StatusOr<std::string> key = b.engine->KeyFor(Request());
  ASSERT_TRUE(key.ok()) << key.status();
  // A daemon took the lease for 1 s and died: nobody renews it.
  ASSERT_TRUE(*Raw()->SetIfAbsent("kiln:lease:v1:" + *key, "L1 dead-daemon",
                                  absl::Seconds(1), nullptr));
  const absl::Time start = absl::Now();
  absl::StatusOr<KernelHandle> got = b.engine->Compile(Request());
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->tier, "compiled");
  EXPECT_EQ(fake.calls, 1);
  EXPECT_GE(took, absl::Milliseconds(900));
  EXPECT_LT(took, absl::Seconds(5));
  const EngineStats stats = b.engine->Stats();
  EXPECT_EQ(stats.cluster_waits, 1);
  EXPECT_EQ(stats.cluster_takeovers, 1);
  EXPECT_EQ(stats.cluster_served, 0);
}

TEST_F(ClusterEngineTest, TheHolderRenewsItsLeaseWhileItCompiles) {
  FakeCompiler fake_a, fake_b;
  fake_a.delay = absl::Milliseconds(1500);
  CompileEngineOptions options;
  options.cluster_lease_ttl = absl::Milliseconds(400);
  Daemon a = Start("a", fake_a, options);
  Daemon b = Start("b", fake_b, options);
  std::thread ta([&] { EXPECT_TRUE(a.engine->Compile(Request()).ok()); });
  WaitUntilCompiling(*a.engine);
  while (fake_a.calls == 0) absl::SleepFor(absl::Milliseconds(1));
  // The compile outlives the lease's time three times over; renewed, the
  // lease still holds B off.
  absl::StatusOr<KernelHandle> got = b.engine->Compile(Request());
  ta.join();
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->tier, "remote");
  EXPECT_EQ(fake_b.calls, 0);
  EXPECT_EQ(b.engine->Stats().cluster_served, 1);
}

TEST_F(ClusterEngineTest, AFailedCompileIsSharedWithTheWaitingDaemons) {
  std::atomic<int> calls{0};
  CompileEngineOptions options;
  options.failed_compile_ttl = absl::Seconds(30);
  options.compile_fn = [&calls](const compiler::LoadedKernel&)
      -> absl::StatusOr<compiler::CompiledKernel> {
    ++calls;
    absl::SleepFor(absl::Milliseconds(200));
    return absl::InvalidArgumentError("scale.tile:3:7: error: broken");
  };
  FakeCompiler unused;
  std::vector<Daemon> daemons;
  for (int d = 0; d < 3; ++d) {
    daemons.push_back(Start("d" + std::to_string(d), unused, options));
  }
  std::vector<absl::Status> results(daemons.size());
  std::vector<std::thread> threads;
  absl::Barrier start(daemons.size());
  for (size_t d = 0; d < daemons.size(); ++d) {
    threads.emplace_back([&, d] {
      start.Block();
      results[d] = daemons[d].engine->Compile(Request()).status();
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(calls.load(), 1);
  int shared = 0;
  for (size_t d = 0; d < daemons.size(); ++d) {
    EXPECT_EQ(results[d].code(), absl::StatusCode::kInvalidArgument) << d;
    EXPECT_EQ(results[d].message(), "scale.tile:3:7: error: broken") << d;
    shared += daemons[d].engine->Stats().cluster_failures;
  }
  EXPECT_EQ(shared, 2);
  // A daemon that comes later gets it too, without compiling.
  Daemon late = Start("late", unused, options);
  EXPECT_EQ(late.engine->Compile(Request()).status().message(),
            "scale.tile:3:7: error: broken");
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(ClusterEngineTest, WaitingForAnotherDaemonCanBeCancelledOrShutDown) {
  FakeCompiler fake;
  Daemon b = Start("b", fake);
  absl::StatusOr<std::string> key = b.engine->KeyFor(Request());
  ASSERT_TRUE(key.ok());
  ASSERT_TRUE(*Raw()->SetIfAbsent("kiln:lease:v1:" + *key, "L1 slow-daemon",
                                  absl::Seconds(60), nullptr));
  CompileRequest cancelled = Request();
  const absl::Time give_up = absl::Now() + absl::Milliseconds(300);
  cancelled.cancelled = [give_up] { return absl::Now() > give_up; };
  absl::StatusOr<KernelHandle> r = b.engine->Compile(cancelled);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_EQ(fake.calls, 0);
  // The parked compile is dropped with its last waiter.
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(b.engine->Stats().active_compiles, 0);

  // A deadline ends the wait too.
  CompileRequest hurried = Request();
  hurried.deadline = absl::Now() + absl::Milliseconds(200);
  EXPECT_EQ(b.engine->Compile(hurried).status().code(),
            absl::StatusCode::kDeadlineExceeded);

  // Shutting down, the daemon compiles what it was waiting for itself, so
  // its callers still get their kernel.
  absl::StatusOr<KernelHandle> waited;
  std::thread waiter([&] { waited = b.engine->Compile(Request()); });
  // (It joins the flight the hurried request left parked.)
  while (b.engine->Stats().misses < 3) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  b.engine->Shutdown();
  waiter.join();
  ASSERT_TRUE(waited.ok()) << waited.status();
  EXPECT_EQ(waited->tier, "compiled");
  EXPECT_EQ(fake.calls, 1);
}

TEST_F(ClusterEngineTest, ACancelledCompileGivesBackTheLeaseItTookWhileQueued) {
  FakeCompiler fake;
  fake.delay = absl::Milliseconds(1500);
  CompileEngineOptions options;
  options.worker_threads = 1;
  Daemon b = Start("b", fake, options);
  const std::string key = *b.engine->KeyFor(Request());
  const std::string lease = "kiln:lease:v1:" + key;
  // Another daemon holds the lease for 600 ms more, then dies.
  ASSERT_TRUE(*Raw()->SetIfAbsent(lease, "L1 dying-daemon",
                                  absl::Milliseconds(600), nullptr));
  CompileRequest waiting = Request();
  const absl::Time give_up = absl::Now() + absl::Milliseconds(1100);
  waiting.cancelled = [give_up] { return absl::Now() > give_up; };
  absl::Status waited;
  std::thread waiter([&] { waited = b.engine->Compile(waiting).status(); });
  while (b.engine->Stats().cluster_waits == 0) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  // Parked; now the one worker gets busy with another kernel, so that the
  // lease, taken over when it expires, waits in the queue with its flight
  // until the request gives up.
  std::thread busy([&] { EXPECT_TRUE(b.engine->Compile(Renamed(1)).ok()); });
  waiter.join();
  EXPECT_EQ(waited.code(), absl::StatusCode::kCancelled) << waited;
  b.cache->remote()->Flush();
  EXPECT_FALSE(Raw()->Get(lease)->has_value())
      << "the cancelled compile kept its lease: " << **Raw()->Get(lease);
  busy.join();
  EXPECT_EQ(fake.calls, 1);
}

TEST_F(ClusterEngineTest, WithoutLeasesEveryDaemonCompilesItsOwnMisses) {
  FakeCompiler fake_a, fake_b;
  CompileEngineOptions options;
  options.cluster_lease_ttl = absl::ZeroDuration();
  fake_a.delay = fake_b.delay = absl::Milliseconds(300);
  Daemon a = Start("a", fake_a, options);
  Daemon b = Start("b", fake_b, options);
  std::thread ta([&] { EXPECT_TRUE(a.engine->Compile(Request()).ok()); });
  std::thread tb([&] { EXPECT_TRUE(b.engine->Compile(Request()).ok()); });
  ta.join();
  tb.join();
  EXPECT_EQ(fake_a.calls + fake_b.calls, 2);
  EXPECT_EQ(
      Raw()->Get("kiln:lease:v1:" + *a.engine->KeyFor(Request()))->has_value(),
      false);
}

}  // namespace
}  // namespace kiln::server
