#include "cache/local_store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "cache/index_schema.h"
#include "tests/cache/test_util.h"

namespace kiln::cache {
namespace {

using ::kiln::cache::testing::KeyFor;
using ::kiln::cache::testing::MakeEntry;
using ::kiln::cache::testing::MatchesEntry;
using ::kiln::cache::testing::TempDir;
using ::testing::HasSubstr;

std::unique_ptr<LocalStore> OpenStore(const std::string& dir,
                                      LocalStoreOptions options = {}) {
  absl::StatusOr<std::unique_ptr<LocalStore>> store =
      LocalStore::Open(dir, std::move(options));
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

int64_t CountFiles(const std::string& dir) {
  int64_t n = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) ++n;
  }
  return n;
}

TEST(LocalStoreTest, PutGetStatRemove) {
  TempDir tmp;
  auto store = OpenStore(tmp.path());
  const Digest key = KeyFor(1);
  EXPECT_TRUE(absl::IsNotFound(store->Get(key).status()));
  ASSERT_TRUE(store->Put(key, MakeEntry(1)).ok());

  absl::StatusOr<Entry> entry = store->Get(key);
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_TRUE(MatchesEntry(*entry, 1));
  EXPECT_EQ(entry->info.key, key);
  ASSERT_NE(entry->Find("launch.json"), nullptr);

  absl::StatusOr<EntryInfo> info = store->Stat(key);
  ASSERT_TRUE(info.ok());
  ASSERT_EQ(info->blobs.size(), 3u);
  EXPECT_EQ(info->blobs[0].name, "binary");
  EXPECT_EQ(info->blobs[0].digest, Digest::Of(MakeEntry(1).blobs[0].data));
  EXPECT_EQ(info->size, 1000 + MakeEntry(1).blobs[1].data.size() +
                            MakeEntry(1).blobs[2].data.size());
  EXPECT_EQ(info->metadata, MakeEntry(1).metadata);

  ASSERT_TRUE(store->Remove(key).ok());
  EXPECT_TRUE(absl::IsNotFound(store->Get(key).status()));
  EXPECT_TRUE(absl::IsNotFound(store->Remove(key)));
  EXPECT_TRUE(absl::IsNotFound(store->Stat(key).status()));
  // The blob files went with the entry.
  EXPECT_EQ(CountFiles(tmp.Sub("blobs")), 0);
}

// MakeEntry(n) without its key text, so that it may be stored under any key.
EntryData Unkeyed(EntryData data) {
  data.blobs.pop_back();
  return data;
}

TEST(LocalStoreTest, IdenticalBlobsAreStoredOnce) {
  TempDir tmp;
  auto store = OpenStore(tmp.path());
  ASSERT_TRUE(store->Put(KeyFor(1), Unkeyed(MakeEntry(7))).ok());
  ASSERT_TRUE(store->Put(KeyFor(2), Unkeyed(MakeEntry(7))).ok());
  absl::StatusOr<StoreStats> stats = store->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->entries, 2);
  EXPECT_EQ(stats->blob_files, 2);  // "binary" and "launch.json", once each
  EXPECT_EQ(CountFiles(tmp.Sub("blobs")), 2);
  // Removing one entry keeps the shared files for the other.
  ASSERT_TRUE(store->Remove(KeyFor(1)).ok());
  EXPECT_EQ(CountFiles(tmp.Sub("blobs")), 2);
  EXPECT_TRUE(store->Get(KeyFor(2)).ok());
}

TEST(LocalStoreTest, PutReplacesAndDropsOldBlobs) {
  TempDir tmp;
  auto store = OpenStore(tmp.path());
  ASSERT_TRUE(store->Put(KeyFor(1), Unkeyed(MakeEntry(1))).ok());
  ASSERT_TRUE(store->Put(KeyFor(1), Unkeyed(MakeEntry(2))).ok());
  absl::StatusOr<Entry> entry = store->Get(KeyFor(1));
  ASSERT_TRUE(entry.ok());
  EXPECT_EQ(entry->blobs, Unkeyed(MakeEntry(2)).blobs);
  EXPECT_EQ(CountFiles(tmp.Sub("blobs")), 2);
}

TEST(LocalStoreTest, InvalidEntryIsRefused) {
  TempDir tmp;
  auto store = OpenStore(tmp.path());
  EntryData bad;
  bad.blobs.push_back(Blob{"../escape", "x"});
  EXPECT_TRUE(absl::IsInvalidArgument(store->Put(KeyFor(1), bad)));
}

TEST(LocalStoreTest, CompressibleBlobsAreCompressedOnDisk) {
  TempDir tmp;
  auto store = OpenStore(tmp.path());
  EntryData data;
  data.blobs.push_back(Blob{"binary", std::string(1 << 20, 'z')});
  ASSERT_TRUE(store->Put(KeyFor(1), data).ok());
  absl::StatusOr<StoreStats> stats = store->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->entry_bytes, 1u << 20);
  EXPECT_LT(stats->disk_bytes, 1u << 12);
  absl::StatusOr<Entry> entry = store->Get(KeyFor(1));
  ASSERT_TRUE(entry.ok());
  EXPECT_EQ(entry->blobs[0].data, data.blobs[0].data);
}

TEST(LocalStoreTest, PersistsAcrossReopenWithCounters) {
  TempDir tmp;
  {
    auto store = OpenStore(tmp.path());
    ASSERT_TRUE(store->Put(KeyFor(1), MakeEntry(1)).ok());
    ASSERT_TRUE(store->Get(KeyFor(1)).ok());
    EXPECT_FALSE(store->Get(KeyFor(2)).ok());
  }
  auto store = OpenStore(tmp.path());
  absl::StatusOr<Entry> entry = store->Get(KeyFor(1));
  ASSERT_TRUE(entry.ok());
  EXPECT_TRUE(MatchesEntry(*entry, 1));
  absl::StatusOr<StoreStats> stats = store->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->counters[kHits], 2);
  EXPECT_EQ(stats->counters[kMisses], 1);
  EXPECT_EQ(stats->counters[kPuts], 1);
}

TEST(LocalStoreTest, OpenWithoutCreateOnMissingDirIsNotFound) {
  TempDir tmp;
  LocalStoreOptions options;
  options.create_if_missing = false;
  absl::StatusOr<std::unique_ptr<LocalStore>> store =
      LocalStore::Open(tmp.Sub("nope"), options);
  EXPECT_TRUE(absl::IsNotFound(store.status()));
  EXPECT_FALSE(std::filesystem::exists(tmp.Sub("nope")));
}

TEST(LocalStoreTest, ListFilters) {
  TempDir tmp;
  auto store = OpenStore(tmp.path());
  for (int n = 0; n < 12; ++n)
    ASSERT_TRUE(store->Put(KeyFor(n), MakeEntry(n)).ok());
  EXPECT_EQ(store->List()->size(), 12u);
  EntryFilter arch;
  arch.target_arch = "sm_90a";
  EXPECT_EQ(store->List(arch)->size(), 6u);
  EntryFilter both = arch;
  both.gpu_sku = "NVIDIA H100 80GB HBM3";  // n % 6 == 0
  EXPECT_EQ(store->List(both)->size(), 2u);
  EntryFilter kernel;
  kernel.kernel_name = "kernel_3";  // n = 3, 10
  EXPECT_EQ(store->List(kernel)->size(), 2u);
  EntryFilter keys;
  keys.keys = {KeyFor(4), KeyFor(99), KeyFor(5)};
  absl::StatusOr<std::vector<EntryInfo>> listed = store->List(keys);
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].key, KeyFor(4));
  EntryFilter limited;
  limited.limit = 3;
  EXPECT_EQ(store->List(limited)->size(), 3u);
}

TEST(LocalStoreTest, NewerSchemaIsRefused) {
  TempDir tmp;
  { OpenStore(tmp.path()); }
  {
    absl::StatusOr<std::unique_ptr<SqliteDb>> db =
        SqliteDb::Open(tmp.Sub("index.sqlite"), absl::Seconds(1), false);
    ASSERT_TRUE(db.ok());
    ASSERT_TRUE((*db)->Exec("PRAGMA user_version = 99").ok());
  }
  absl::StatusOr<std::unique_ptr<LocalStore>> store =
      LocalStore::Open(tmp.path());
  EXPECT_TRUE(absl::IsFailedPrecondition(store.status()));
  EXPECT_THAT(store.status().message(), HasSubstr("schema version 99"));
}

TEST(IndexSchemaTest, MigratesStepByStep) {
  TempDir tmp;
  absl::StatusOr<std::unique_ptr<SqliteDb>> db =
      SqliteDb::Open(tmp.Sub("m.sqlite"), absl::Seconds(1), true);
  ASSERT_TRUE(db.ok());
  const Migration v1[] = {{1, "CREATE TABLE t (a INTEGER);"}};
  const Migration v2[] = {{1, "CREATE TABLE t (a INTEGER);"},
                          {2, "ALTER TABLE t ADD COLUMN b TEXT;"}};
  ASSERT_TRUE(MigrateIndex(**db, v1).ok());
  ASSERT_TRUE((*db)->Exec("INSERT INTO t(a) VALUES (1)").ok());
  ASSERT_TRUE(MigrateIndex(**db, v2).ok());
  ASSERT_TRUE(MigrateIndex(**db, v2).ok());  // idempotent
  EXPECT_TRUE((*db)->Exec("SELECT b FROM t").ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(MigrateIndex(**db, v1)));
  const Migration broken[] = {{1, "CREATE TABLE t (a INTEGER);"},
                              {2, "ALTER TABLE t ADD COLUMN b TEXT;"},
                              {3, "NOT SQL"}};
  EXPECT_FALSE(MigrateIndex(**db, broken).ok());
  EXPECT_TRUE(MigrateIndex(**db, v2).ok());  // still at 2: rolled back
}

TEST(LocalStoreTest, SizeCapEvictsLeastRecentlyUsed) {
  TempDir tmp;
  absl::Time now = absl::FromUnixSeconds(1700000000);
  LocalStoreOptions options;
  options.max_size = 100 * 1024;  // ~ten 10 KiB entries
  options.touch_interval = absl::ZeroDuration();
  options.clock = [&now] { return now; };
  auto store = OpenStore(tmp.path(), options);
  for (int n = 0; n < 8; ++n) {
    ASSERT_TRUE(store->Put(KeyFor(n), MakeEntry(n, 10 * 1024)).ok());
    now += absl::Seconds(1);
  }
  ASSERT_TRUE(store->Get(KeyFor(0)).ok());  // 0 becomes most recent
  now += absl::Seconds(1);
  // 14 entries of ~10 KiB; eviction goes down to 90 KiB: the newest 6, the
  // touched 0 and 7 stay.
  for (int n = 8; n < 14; ++n) {
    ASSERT_TRUE(store->Put(KeyFor(n), MakeEntry(n, 10 * 1024)).ok());
    now += absl::Seconds(1);
  }
  absl::StatusOr<StoreStats> stats = store->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_LE(stats->disk_bytes, options.max_size);
  EXPECT_GT(stats->counters[kEvictions], 0);
  EXPECT_TRUE(store->Stat(KeyFor(13)).ok());
  EXPECT_TRUE(store->Stat(KeyFor(0)).ok()) << "recently used entry evicted";
  EXPECT_FALSE(store->Stat(KeyFor(1)).ok()) << "oldest entry kept";
  // Files on disk match the index.
  EXPECT_EQ(CountFiles(tmp.Sub("blobs")), stats->blob_files);
}

TEST(LocalStoreTest, GcByAgeAndSize) {
  TempDir tmp;
  absl::Time now = absl::FromUnixSeconds(1700000000);
  LocalStoreOptions options;
  options.clock = [&now] { return now; };
  auto store = OpenStore(tmp.path(), options);
  for (int n = 0; n < 10; ++n) {
    ASSERT_TRUE(store->Put(KeyFor(n), MakeEntry(n, 4096)).ok());
    now += absl::Hours(24);
  }
  GcOptions by_age;
  by_age.max_age = absl::Hours(24 * 5) + absl::Minutes(1);  // keeps 5..9
  absl::StatusOr<GcReport> report = store->Gc(by_age);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->evicted_entries, 5);
  EXPECT_FALSE(store->Stat(KeyFor(4)).ok());
  EXPECT_TRUE(store->Stat(KeyFor(5)).ok());

  GcOptions by_size;
  by_size.max_size = 2 * (4096 + 100);
  report = store->Gc(by_size);
  ASSERT_TRUE(report.ok());
  EXPECT_LE(report->disk_bytes_after, *by_size.max_size);
  EXPECT_TRUE(store->Stat(KeyFor(9)).ok());
  EXPECT_FALSE(store->Stat(KeyFor(5)).ok());
}

TEST(LocalStoreTest, GcRemovesUntrackedFilesAndTemps) {
  TempDir tmp;
  auto store = OpenStore(tmp.path());
  ASSERT_TRUE(store->Put(KeyFor(1), MakeEntry(1)).ok());
  // What a writer killed before its commit leaves behind.
  const std::string orphan = Digest::Of("orphan").hex();
  std::filesystem::create_directories(tmp.Sub("blobs/" + orphan.substr(0, 2)));
  std::ofstream(tmp.Sub("blobs/" + orphan.substr(0, 2) + "/" + orphan)) << "x";
  std::ofstream(tmp.Sub("tmp/leftover.tmp")) << "partial";
  std::ofstream(tmp.Sub("quarantine/" + orphan + ".1")) << "bad";
  absl::StatusOr<VerifyReport> verify = store->Verify();
  ASSERT_TRUE(verify.ok());
  EXPECT_TRUE(verify->clean());
  EXPECT_EQ(verify->unreferenced_files, 1);

  GcOptions gc;
  gc.grace = absl::ZeroDuration();
  absl::StatusOr<GcReport> report = store->Gc(gc);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->removed_blob_files, 1);
  EXPECT_EQ(report->removed_temp_files, 1);
  EXPECT_EQ(report->removed_quarantine_files, 0);  // kept a week
  gc.quarantine_max_age = absl::ZeroDuration();
  report = store->Gc(gc);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->removed_quarantine_files, 1);
  EXPECT_EQ(report->evicted_entries, 0);
  EXPECT_TRUE(store->Get(KeyFor(1)).ok());
}

TEST(LocalStoreTest, ManyThreads) {
  TempDir tmp;
  auto store = OpenStore(tmp.path());
  std::vector<std::thread> threads;
  std::atomic<int> errors{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        int n = (t * 7 + i) % 40;
        if (i % 3 == 0) {
          if (!store->Put(KeyFor(n), MakeEntry(n)).ok()) ++errors;
        } else if (i % 7 == 0) {
          absl::Status s = store->Remove(KeyFor(n));
          if (!s.ok() && !absl::IsNotFound(s)) ++errors;
        } else {
          absl::StatusOr<Entry> e = store->Get(KeyFor(n));
          if (e.ok() ? !MatchesEntry(*e, n) : !absl::IsNotFound(e.status())) {
            ++errors;
          }
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(errors.load(), 0);
  absl::StatusOr<VerifyReport> verify = store->Verify();
  ASSERT_TRUE(verify.ok());
  EXPECT_TRUE(verify->clean());
  EXPECT_EQ(verify->unreferenced_files, 0);
}

}  // namespace
}  // namespace kiln::cache
