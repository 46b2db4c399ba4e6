// Multi-process tests: a writer killed with SIGKILL at random moments never
// leaves a partial or corrupt entry behind, and eight processes sharing one
// directory lose nothing. The work is done by kiln_cache_stress_worker.
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cache/local_store.h"
#include "tests/cache/test_util.h"

extern char** environ;

namespace kiln::cache {
namespace {

using ::kiln::cache::testing::KeyFor;
using ::kiln::cache::testing::TempDir;

pid_t Spawn(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  for (const std::string& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = -1;
  if (posix_spawn(&pid, argv[0], nullptr, nullptr, argv.data(), environ) != 0) {
    return -1;
  }
  return pid;
}

int EnvInt(const char* name, int fallback) {
  const char* v = getenv(name);
  return v != nullptr && *v ? std::atoi(v) : fallback;
}

size_t SizeFor(uint64_t n) { return 500 + (n * 7919) % 20000; }

// What a crash left behind, to show the kills landed mid-write.
struct Leftovers {
  int temp_files = 0;
  int unreferenced_files = 0;
};

// Opens the store afresh, as a restarted daemon would, and checks it.
void CheckStoreAfterCrash(const std::string& dir, int iteration,
                          Leftovers* leftovers) {
  LocalStoreOptions options;
  options.busy_timeout = absl::Seconds(5);
  absl::StatusOr<std::unique_ptr<LocalStore>> store =
      LocalStore::Open(dir, options);
  ASSERT_TRUE(store.ok()) << "iteration " << iteration << ": "
                          << store.status();
  absl::StatusOr<VerifyReport> report = (*store)->Verify();
  ASSERT_TRUE(report.ok()) << report.status();
  ASSERT_TRUE(report->clean())
      << "iteration " << iteration << ": verify quarantined "
      << report->quarantined[0].digest << " (" << report->quarantined[0].reason
      << ")";
  if (report->unreferenced_files > 0) ++leftovers->unreferenced_files;
  for (const auto& e : std::filesystem::directory_iterator(dir + "/tmp")) {
    (void)e;
    ++leftovers->temp_files;
    break;
  }
  // Every visible entry is whole and exactly what was written.
  absl::StatusOr<std::vector<EntryInfo>> listed = (*store)->List();
  ASSERT_TRUE(listed.ok());
  for (uint64_t n = 0; n < 48; ++n) {
    absl::StatusOr<Entry> got = (*store)->Get(KeyFor(n));
    if (absl::IsNotFound(got.status())) continue;
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_TRUE(testing::MatchesEntry(*got, n, SizeFor(n)))
        << "iteration " << iteration << ": partial or wrong entry " << n;
  }
  for (const EntryInfo& info : *listed) {
    ASSERT_TRUE((*store)->Get(info.key).ok())
        << "iteration " << iteration << ": listed entry " << info.key
        << " cannot be read";
  }
  // Recovery: gc reclaims whatever the crash left, so each iteration starts
  // clean and the leftovers counted above are this kill's alone.
  GcOptions gc;
  gc.grace = absl::ZeroDuration();
  ASSERT_TRUE((*store)->Gc(gc).ok());
  report = (*store)->Verify();
  ASSERT_TRUE(report.ok() && report->clean());
  EXPECT_EQ(report->unreferenced_files, 0);
  EXPECT_TRUE(std::filesystem::is_empty(dir + "/tmp"));
}

TEST(CrashConsistencyTest, WriterKilledAtRandomMoments) {
  const int iterations = EnvInt("KILN_CACHE_CRASH_ITERATIONS", 200);
  TempDir tmp;
  const std::string dir = tmp.Sub("cache");
  std::mt19937_64 rng(42);
  int killed_while_running = 0;
  Leftovers leftovers;
  for (int i = 0; i < iterations; ++i) {
    pid_t pid =
        Spawn({KILN_CACHE_STRESS_WORKER, dir, "crash", std::to_string(i + 1)});
    ASSERT_GT(pid, 0);
    // Mostly after start-up, sometimes during it.
    const int delay_us = rng() % 8 == 0
                             ? static_cast<int>(rng() % 5000)
                             : 5000 + static_cast<int>(rng() % 60000);
    std::this_thread::sleep_for(std::chrono::microseconds(delay_us));
    kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (WIFEXITED(status)) {
      FAIL() << "iteration " << i << ": worker exited with "
             << WEXITSTATUS(status) << " before it was killed";
    }
    ++killed_while_running;
    CheckStoreAfterCrash(dir, i, &leftovers);
    if (HasFatalFailure()) return;
  }
  EXPECT_EQ(killed_while_running, iterations);
  RecordProperty("iterations", iterations);
  // Evidence that kills landed inside puts (a temp file not yet renamed, or
  // a blob file renamed but its index row not yet committed).
  RecordProperty("kills_leaving_temp_files", leftovers.temp_files);
  RecordProperty("kills_leaving_unreferenced_blobs",
                 leftovers.unreferenced_files);
  std::cout << "crash test: " << iterations << " kills; "
            << leftovers.temp_files << " left a temp file, "
            << leftovers.unreferenced_files
            << " left an unreferenced blob file\n";
  if (iterations >= 100) {
    EXPECT_GT(leftovers.temp_files + leftovers.unreferenced_files, 0);
  }
}

TEST(MultiProcessTest, EightProcessesMixedOperations) {
  const int processes = EnvInt("KILN_CACHE_PROCESSES", 8);
  const int ops = EnvInt("KILN_CACHE_OPS", 1000);
  TempDir tmp;
  const std::string dir = tmp.Sub("cache");
  ASSERT_TRUE(LocalStore::Open(dir).ok());  // create once, up front
  std::vector<pid_t> pids;
  for (int id = 0; id < processes; ++id) {
    pid_t pid = Spawn({KILN_CACHE_STRESS_WORKER, dir, "mixed",
                       std::to_string(id), std::to_string(ops), "1"});
    ASSERT_GT(pid, 0);
    pids.push_back(pid);
  }
  for (size_t id = 0; id < pids.size(); ++id) {
    int status = 0;
    ASSERT_EQ(waitpid(pids[id], &status, 0), pids[id]);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
        << "worker " << id << " failed, status " << status;
  }
  absl::StatusOr<std::unique_ptr<LocalStore>> store = LocalStore::Open(dir);
  ASSERT_TRUE(store.ok());
  int64_t checked = 0;
  for (int id = 0; id < processes; ++id) {
    std::ifstream expect(tmp.Sub(absl::StrCat("expect-", id)));
    ASSERT_TRUE(expect.good()) << "worker " << id << " wrote no expect file";
    uint64_t n;
    while (expect >> n) {
      absl::StatusOr<Entry> got = (*store)->Get(KeyFor(n));
      ASSERT_TRUE(got.ok()) << "worker " << id << " lost key " << n;
      EXPECT_TRUE(testing::MatchesEntry(*got, n, SizeFor(n)));
      ++checked;
    }
  }
  EXPECT_GT(checked, processes * 50);
  absl::StatusOr<VerifyReport> report = (*store)->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->clean());
  EXPECT_EQ(report->unreferenced_files, 0);
  absl::StatusOr<StoreStats> stats = (*store)->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->counters[kCorrupt], 0);
  RecordProperty("operations", processes * ops);
}

TEST(MultiProcessTest, FreshDirectoryOpenedByManyAtOnce) {
  // Nobody creates the store first: eight processes race to create the
  // directory, the index and its schema.
  TempDir tmp;
  const std::string dir = tmp.Sub("fresh/cache");
  std::vector<pid_t> pids;
  for (int id = 0; id < 8; ++id) {
    pids.push_back(Spawn({KILN_CACHE_STRESS_WORKER, dir, "mixed",
                          std::to_string(id), "20", "0"}));
    ASSERT_GT(pids.back(), 0);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  absl::StatusOr<std::unique_ptr<LocalStore>> store = LocalStore::Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::StatusOr<VerifyReport> report = (*store)->Verify();
  ASSERT_TRUE(report.ok() && report->clean());
}

}  // namespace
}  // namespace kiln::cache
