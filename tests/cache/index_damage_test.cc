// The index is verified, not trusted: every kind of damage to index.sqlite
// (edited rows, swapped or unreadable digests, absurd sizes, damaged pages,
// single flipped bits anywhere in the file) is a miss or the right entry,
// never another entry's bytes and never a store that cannot open. What is
// damaged is dropped (quarantined), reported by Verify(), and can be removed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "cache/blob_directory.h"
#include "cache/bundle.h"
#include "cache/local_store.h"
#include "cache/sqlite_db.h"
#include "tests/cache/test_util.h"

namespace kiln::cache {
namespace {

namespace fs = std::filesystem;
using ::kiln::cache::testing::FlipBit;
using ::kiln::cache::testing::KeyFor;
using ::kiln::cache::testing::MakeEntry;
using ::kiln::cache::testing::MatchesEntry;
using ::kiln::cache::testing::TempDir;
using ::testing::HasSubstr;

constexpr int kEntries = 6;

std::unique_ptr<LocalStore> OpenStore(const std::string& dir) {
  LocalStoreOptions options;
  options.fsync = false;
  absl::StatusOr<std::unique_ptr<LocalStore>> store =
      LocalStore::Open(dir, options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

// Fills `dir` with entries 0..kEntries-1 (and closes the store).
void Fill(const std::string& dir) {
  auto store = OpenStore(dir);
  for (int n = 0; n < kEntries; ++n) {
    ASSERT_TRUE(store->Put(KeyFor(n), MakeEntry(n, 2000 + 100 * n)).ok());
  }
}

// Runs SQL on the index directly, as someone with write access would.
void Sql(const std::string& dir, const std::string& sql) {
  absl::StatusOr<std::unique_ptr<SqliteDb>> db = SqliteDb::Open(
      absl::StrCat(dir, "/", kIndexFileName), absl::Seconds(5), false);
  ASSERT_TRUE(db.ok()) << db.status();
  ASSERT_TRUE((*db)->Exec(sql).ok()) << sql;
}

std::string BlobDigest(int n, int blob) {
  return Digest::Of(MakeEntry(n, 2000 + 100 * n).blobs[blob].data).hex();
}

// Every key answers with exactly its own entry or a miss; returns the
// number of hits. Any other answer fails the test.
int CheckAnswers(LocalStore& store, const std::string& context) {
  int hits = 0;
  for (int n = 0; n < kEntries; ++n) {
    absl::StatusOr<Entry> entry = store.Get(KeyFor(n));
    if (entry.ok()) {
      EXPECT_TRUE(MatchesEntry(*entry, n, 2000 + 100 * n))
          << context << ": key " << n << " answered with other content";
      ++hits;
    } else {
      EXPECT_TRUE(absl::IsNotFound(entry.status()))
          << context << ": key " << n << ": " << entry.status();
    }
  }
  return hits;
}

TEST(IndexDamageTest, SwappedBlobDigestsAreMissesNeverTheOtherBinary) {
  TempDir tmp;
  Fill(tmp.path());
  Sql(tmp.path(),
      absl::StrCat("UPDATE entry_blobs SET digest = CASE key WHEN '",
                   KeyFor(1).hex(), "' THEN '", BlobDigest(2, 0), "' ELSE '",
                   BlobDigest(1, 0), "' END WHERE position = 0 AND key IN ('",
                   KeyFor(1).hex(), "', '", KeyFor(2).hex(), "')"));
  auto store = OpenStore(tmp.path());
  EXPECT_EQ(CheckAnswers(*store, "swapped"), kEntries - 2);
  EXPECT_TRUE(absl::IsNotFound(store->Get(KeyFor(1)).status()));
  // Both were dropped, and a put stores them again.
  EXPECT_TRUE(absl::IsNotFound(store->Stat(KeyFor(2)).status()));
  ASSERT_TRUE(store->Put(KeyFor(1), MakeEntry(1, 2100)).ok());
  EXPECT_TRUE(MatchesEntry(*store->Get(KeyFor(1)), 1, 2100));
  absl::StatusOr<StoreStats> stats = store->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->counters[kQuarantinedEntries], 2);
}

TEST(IndexDamageTest, VerifyFindsEveryDamagedRow) {
  TempDir tmp;
  Fill(tmp.path());
  // 0: blob renamed; 1: a size that does not match; 2: another kernel name;
  // 3: an absurd blob size; 4: a digest that is not hex. 5 stays sound.
  Sql(tmp.path(),
      absl::StrCat("UPDATE entry_blobs SET name = 'binary2' WHERE key = '",
                   KeyFor(0).hex(), "' AND position = 0;",
                   "UPDATE entries SET size = size + 1 WHERE key = '",
                   KeyFor(1).hex(), "';",
                   "UPDATE entries SET kernel_name = 'evil' WHERE key = '",
                   KeyFor(2).hex(), "';",
                   "UPDATE entry_blobs SET size = 68719476736 WHERE key = '",
                   KeyFor(3).hex(), "' AND position = 0;",
                   "UPDATE entry_blobs SET digest = 'zz' WHERE key = '",
                   KeyFor(4).hex(), "' AND position = 1;"));
  auto store = OpenStore(tmp.path());
  // Listing works and shows the damage (nothing is hidden from operators).
  absl::StatusOr<std::vector<EntryInfo>> listed = store->List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), static_cast<size_t>(kEntries));
  int damaged = 0;
  for (const EntryInfo& info : *listed) damaged += !info.damage.empty();
  EXPECT_EQ(damaged, 5);

  absl::StatusOr<VerifyReport> report = store->Verify();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_FALSE(report->clean());
  ASSERT_EQ(report->damaged_entries.size(), 5u);
  std::set<std::string> keys;
  for (const DamagedEntry& d : report->damaged_entries) keys.insert(d.key);
  for (int n = 0; n < 5; ++n) EXPECT_TRUE(keys.contains(KeyFor(n).hex())) << n;
  EXPECT_EQ(CheckAnswers(*store, "after verify"), 1);
  // A second pass finds nothing more, and gc reclaims what they used.
  report = store->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->clean()) << report->damaged_entries.size();
  GcOptions gc;
  gc.grace = absl::ZeroDuration();
  ASSERT_TRUE(store->Gc(gc).ok());
  absl::StatusOr<StoreStats> stats = store->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->entries, 1);
  EXPECT_EQ(stats->blob_files, 3);
}

TEST(IndexDamageTest, RowsThatAreNotDigestsNeitherBreakListingNorRemoval) {
  TempDir tmp;
  Fill(tmp.path());
  Sql(tmp.path(),
      absl::StrCat("UPDATE entry_blobs SET digest = 'not-hex' WHERE key = '",
                   KeyFor(1).hex(), "';",
                   "UPDATE entries SET key = 'NOT A KEY' WHERE key = '",
                   KeyFor(2).hex(), "';",
                   "UPDATE entry_blobs SET key = 'NOT A KEY' WHERE key = '",
                   KeyFor(2).hex(), "';",
                   "INSERT INTO blobs(digest, size, disk_size) VALUES "
                   "('xyz', 1, 1);"));
  auto store = OpenStore(tmp.path());
  absl::StatusOr<std::vector<EntryInfo>> listed = store->List();
  ASSERT_TRUE(listed.ok()) << listed.status();
  EXPECT_EQ(listed->size(), static_cast<size_t>(kEntries - 1));
  // The damaged entry can be removed by its key; eviction still works.
  EXPECT_TRUE(store->Remove(KeyFor(1)).ok());
  GcOptions gc;
  gc.max_size = 1;  // evict everything evictable
  absl::StatusOr<GcReport> swept = store->Gc(gc);
  ASSERT_TRUE(swept.ok()) << swept.status();
  // The entry under a key that is not one, its three blob rows, and "xyz".
  EXPECT_EQ(swept->malformed_rows, 5);
  EXPECT_GE(swept->evicted_entries, 4);
  absl::StatusOr<VerifyReport> report = store->Verify();
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->clean());
}

TEST(IndexDamageTest, AKeyTextThatDoesNotHashToTheKeyIsAMiss) {
  TempDir tmp;
  auto store = OpenStore(tmp.path());
  // Entry 3's bytes stored under entry 4's key: its key.txt gives it away.
  ASSERT_TRUE(store->Put(KeyFor(4), MakeEntry(3)).ok());
  absl::StatusOr<Entry> entry = store->Get(KeyFor(4));
  ASSERT_TRUE(absl::IsNotFound(entry.status())) << entry.status();
  EXPECT_THAT(entry.status().message(), HasSubstr("key.txt"));
  EXPECT_TRUE(absl::IsNotFound(store->Stat(KeyFor(4)).status()));

  ASSERT_TRUE(store->Put(KeyFor(5), MakeEntry(6)).ok());
  absl::StatusOr<VerifyReport> report = store->Verify();
  ASSERT_TRUE(report.ok());
  ASSERT_EQ(report->damaged_entries.size(), 1u);
  EXPECT_EQ(report->damaged_entries[0].key, KeyFor(5).hex());
}

TEST(IndexDamageTest, BlobHeadersClaimingHugeSizesAreMisses) {
  TempDir tmp;
  Fill(tmp.path());
  BlobDirectory files(tmp.path());
  for (int n : {0, 1}) {
    // Raw size field (bytes 8-15) set to 64 GiB; entry 1's blob is zstd.
    const std::string path = files.PathOf(*Digest::Parse(BlobDigest(n, 0)));
    std::string bytes;
    {
      std::ifstream in(path, std::ios::binary);
      bytes.assign(std::istreambuf_iterator<char>(in), {});
    }
    ASSERT_GE(bytes.size(), 16u);
    if (n == 1) bytes[5] = 1;  // codec: zstd
    const uint64_t huge = 64ull << 30;
    for (int i = 0; i < 8; ++i)
      bytes[8 + i] = static_cast<char>(huge >> (8 * i));
    fs::remove(path);
    std::ofstream(path, std::ios::binary) << bytes;
  }
  auto store = OpenStore(tmp.path());
  EXPECT_EQ(CheckAnswers(*store, "huge headers"), kEntries - 2);
  // The next put of the same entries is served again: nothing sticks.
  for (int n : {0, 1}) {
    ASSERT_TRUE(store->Put(KeyFor(n), MakeEntry(n, 2000 + 100 * n)).ok());
  }
  EXPECT_EQ(CheckAnswers(*store, "after re-put"), kEntries);
}

// Overwrites `size` bytes of the index at `offset` with zeros.
void ZeroIndexBytes(const std::string& dir, size_t offset, size_t size) {
  const std::string path = absl::StrCat(dir, "/", kIndexFileName);
  std::fstream f(path, std::ios::binary | std::ios::in | std::ios::out);
  f.seekp(static_cast<std::streamoff>(offset));
  f << std::string(size, '\0');
}

void Checkpoint(const std::string& dir) {
  Sql(dir, "PRAGMA wal_checkpoint(TRUNCATE)");
}

TEST(IndexDamageTest, DamagedIndexPagesAreMovedAsideAndTheStoreStillOpens) {
  for (size_t page : {0, 1, 2}) {
    TempDir tmp;
    Fill(tmp.path());
    Checkpoint(tmp.path());
    ZeroIndexBytes(tmp.path(), page * 4096, 4096);
    auto store = OpenStore(tmp.path());
    ASSERT_NE(store, nullptr) << "page " << page;
    CheckAnswers(*store, absl::StrCat("page ", page));
    for (int n = 0; n < kEntries; ++n) {
      ASSERT_TRUE(store->Put(KeyFor(n), MakeEntry(n, 2000 + 100 * n)).ok())
          << "page " << page;
    }
    EXPECT_EQ(CheckAnswers(*store, "re-put"), kEntries) << "page " << page;
    // The damaged file was kept for inspection.
    bool kept = false;
    for (const auto& f : fs::directory_iterator(tmp.Sub("quarantine"))) {
      kept = kept || f.path().filename().string().starts_with("index.sqlite");
    }
    EXPECT_TRUE(kept) << "page " << page;
  }
}

TEST(IndexDamageTest, NoSingleBitFlipAnywhereInTheIndexServesAnotherEntry) {
  TempDir pristine;
  Fill(pristine.path());
  Checkpoint(pristine.path());
  const std::string index = absl::StrCat(pristine.path(), "/", kIndexFileName);
  const uint64_t bits = fs::file_size(index) * 8;
  std::mt19937_64 rng(20261202);
  int hits = 0, flips = 0;
  for (int i = 0; i < 120; ++i) {
    TempDir tmp;
    fs::copy(
        pristine.path(), tmp.path(),
        fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    const uint64_t bit = rng() % bits;
    FlipBit(absl::StrCat(tmp.path(), "/", kIndexFileName), bit);
    ++flips;
    auto store = OpenStore(tmp.path());
    ASSERT_NE(store, nullptr) << "bit " << bit;
    hits += CheckAnswers(*store, absl::StrCat("bit ", bit));
    // Whatever happened, the store takes new entries and serves them.
    for (int n = 0; n < kEntries; ++n) {
      (void)store->Put(KeyFor(n), MakeEntry(n, 2000 + 100 * n));
    }
    CheckAnswers(*store, absl::StrCat("bit ", bit, ", re-put"));
  }
  // Most flips land in unused space or fields that do not matter; the test
  // is about the others, but it must not be vacuous.
  EXPECT_GT(hits, 0);
  EXPECT_EQ(flips, 120);
}

TEST(IndexDamageTest, BitFlipsUnderAnOpenStoreNeverServeAnotherEntry) {
  TempDir tmp;
  Fill(tmp.path());
  auto store = OpenStore(tmp.path());
  const std::string index = absl::StrCat(tmp.path(), "/", kIndexFileName);
  std::mt19937_64 rng(1202);
  // Damage piles up: 60 flips into the file an open store keeps using, each
  // followed by reads, puts and reads again.
  for (int i = 0; i < 60; ++i) {
    // Into the main file (a damaged file may refuse even that).
    if (absl::StatusOr<std::unique_ptr<SqliteDb>> db =
            SqliteDb::Open(index, absl::Seconds(5), false);
        db.ok()) {
      (void)(*db)->Exec("PRAGMA wal_checkpoint(TRUNCATE)");
    }
    const uint64_t bit = rng() % (fs::file_size(index) * 8);
    FlipBit(index, bit);
    CheckAnswers(*store, absl::StrCat("flip ", i, " at bit ", bit));
    for (int n = 0; n < kEntries; ++n) {
      (void)store->Put(KeyFor(n), MakeEntry(n, 2000 + 100 * n));
    }
    CheckAnswers(*store, absl::StrCat("flip ", i, ", re-put"));
  }
  absl::StatusOr<VerifyReport> report = store->Verify();
  ASSERT_TRUE(report.ok()) << report.status();
}

TEST(IndexDamageTest, GcCheckpointsTheWalAndCountsIt) {
  TempDir tmp;
  auto store = OpenStore(tmp.path());
  for (int n = 0; n < 40; ++n) {
    ASSERT_TRUE(store->Put(KeyFor(n), MakeEntry(n, 500)).ok());
  }
  ASSERT_GT(fs::file_size(tmp.Sub("index.sqlite-wal")), 0u);
  absl::StatusOr<GcReport> report = store->Gc(GcOptions{});
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_GT(report->wal_bytes_before, 0u);
  EXPECT_EQ(report->wal_bytes_after, 0u);
  EXPECT_EQ(fs::file_size(tmp.Sub("index.sqlite-wal")), 0u);
  absl::StatusOr<StoreStats> stats = store->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_GE(stats->index_bytes, fs::file_size(tmp.Sub("index.sqlite")));
}

TEST(IndexDamageTest, AVersionOneIndexIsSealedWhenMigrated) {
  TempDir tmp;
  Fill(tmp.path());
  // What a version-1 index looks like: no seal column, user_version 1.
  Sql(tmp.path(),
      "ALTER TABLE entries DROP COLUMN seal; PRAGMA user_version = 1;");
  {
    auto store = OpenStore(tmp.path());
    EXPECT_EQ(CheckAnswers(*store, "migrated"), kEntries);
  }
  // An unsealed row in a version-2 index is damage, not an old row.
  Sql(tmp.path(), absl::StrCat("UPDATE entries SET seal = '' WHERE key = '",
                               KeyFor(0).hex(), "'"));
  auto store = OpenStore(tmp.path());
  EXPECT_EQ(CheckAnswers(*store, "unsealed"), kEntries - 1);
}

TEST(IndexDamageTest, ImportNeverReplacesAnEntryAndRefusesUnvouchedOnes) {
  TempDir tmp;
  auto source = OpenStore(tmp.Sub("source"));
  ASSERT_TRUE(source->Put(KeyFor(1), MakeEntry(1)).ok());
  EntryData other = MakeEntry(2);
  other.blobs.pop_back();  // no key text: nothing vouches for the key
  ASSERT_TRUE(source->Put(KeyFor(2), other).ok());
  EntryData evil = MakeEntry(3);
  evil.blobs[0].data = "another binary";
  ASSERT_TRUE(source->Put(KeyFor(3), evil).ok());  // key text still matches
  const std::string path = tmp.Sub("b.kbundle");
  ASSERT_TRUE(ExportBundle(*source, {}, path).ok());

  auto target = OpenStore(tmp.Sub("target"));
  ASSERT_TRUE(target->Put(KeyFor(3), MakeEntry(3)).ok());
  absl::StatusOr<ImportReport> report = ImportBundle(*target, path);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_EQ(report->imported, 1);
  EXPECT_EQ(report->kept_existing, 1);
  ASSERT_EQ(report->refused.size(), 1u);
  EXPECT_EQ(report->refused[0].first, KeyFor(2));
  EXPECT_TRUE(MatchesEntry(*target->Get(KeyFor(3)), 3, 1000));
  EXPECT_TRUE(absl::IsNotFound(target->Get(KeyFor(2)).status()));

  // Signed with a secret, the same bundle vouches for every entry.
  absl::StatusOr<HmacSha256> secret = HmacSha256::Create("0123456789abcdef!");
  ASSERT_TRUE(secret.ok());
  BundleOptions signing;
  signing.secret = &*secret;
  const std::string signed_path = tmp.Sub("s.kbundle");
  ASSERT_TRUE(ExportBundle(*source, {}, signed_path, signing).ok());
  auto fresh = OpenStore(tmp.Sub("fresh"));
  report = ImportBundle(*fresh, signed_path, signing);
  ASSERT_TRUE(report.ok()) << report.status();
  EXPECT_TRUE(report->is_signed);
  EXPECT_EQ(report->imported, 3);
  // A store with a secret refuses unsigned bundles and other secrets.
  EXPECT_TRUE(
      absl::IsPermissionDenied(ImportBundle(*fresh, path, signing).status()));
  absl::StatusOr<HmacSha256> wrong = HmacSha256::Create("fedcba9876543210?");
  BundleOptions other_secret;
  other_secret.secret = &*wrong;
  EXPECT_TRUE(absl::IsPermissionDenied(
      ImportBundle(*fresh, signed_path, other_secret).status()));
  // Flipping the signed flag off does not get past a store with a secret.
  std::string bytes;
  {
    std::ifstream in(signed_path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[12] = 0;
  std::ofstream(tmp.Sub("stripped.kbundle"), std::ios::binary) << bytes;
  EXPECT_FALSE(ImportBundle(*fresh, tmp.Sub("stripped.kbundle"), signing).ok());
}

TEST(IndexDamageTest, AFifoIsRefusedAsABundleWithoutBlocking) {
  TempDir tmp;
  const std::string fifo = tmp.Sub("fifo.kbundle");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  auto store = OpenStore(tmp.Sub("store"));
  absl::StatusOr<ImportReport> report = ImportBundle(*store, fifo);
  ASSERT_FALSE(report.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(report.status())) << report.status();
  EXPECT_THAT(report.status().message(), HasSubstr("not a regular file"));
}

}  // namespace
}  // namespace kiln::cache
