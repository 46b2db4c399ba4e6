// Every damaged blob file is detected: random byte flips, truncations,
// extensions and deletions, on raw and compressed blobs, through Get() and
// through Verify(). A damaged entry is a miss, quarantined, never served.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "cache/blob_directory.h"
#include "cache/local_store.h"
#include "tests/cache/test_util.h"

namespace kiln::cache {
namespace {

using ::kiln::cache::testing::KeyFor;
using ::kiln::cache::testing::MakeEntry;
using ::kiln::cache::testing::TempDir;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& data) {
  std::filesystem::remove(path);  // blob files may be read-only hard links
  std::ofstream(path, std::ios::binary | std::ios::trunc) << data;
}

// Returns a damaged copy of `original` and describes the damage.
std::string Damage(const std::string& original, std::mt19937_64& rng,
                   std::string* what) {
  std::string data = original;
  switch (rng() % 4) {
    case 0: {
      size_t at = rng() % data.size();
      data[at] ^= static_cast<char>(1 + rng() % 255);
      *what = "flip byte " + std::to_string(at);
      break;
    }
    case 1: {
      size_t at = rng() % data.size();
      data.resize(at);
      *what = "truncate to " + std::to_string(at);
      break;
    }
    case 2:
      data.push_back(static_cast<char>(rng()));
      *what = "append a byte";
      break;
    default: {
      size_t at = rng() % data.size();
      size_t n = 1 + rng() % 16;
      for (size_t i = at; i < std::min(data.size(), at + n); ++i) {
        data[i] ^= static_cast<char>(1 + rng() % 255);
      }
      *what = "scramble bytes from " + std::to_string(at);
    }
  }
  return data;
}

EntryData Compressible(int n) {
  EntryData data = MakeEntry(n);
  data.blobs[0].data =
      std::string(8000, static_cast<char>('a' + n % 26)) + std::to_string(n);
  return data;
}

TEST(CorruptionTest, EveryDamagedBlobIsAMiss) {
  TempDir tmp;
  LocalStoreOptions options;
  options.fsync = false;  // detection is what is tested here, not durability
  absl::StatusOr<std::unique_ptr<LocalStore>> store =
      LocalStore::Open(tmp.path(), options);
  ASSERT_TRUE(store.ok());
  BlobDirectory files(tmp.path());
  std::mt19937_64 rng(20240605);
  constexpr int kIterations = 400;
  int64_t detected = 0;
  for (int i = 0; i < kIterations; ++i) {
    const int n = i % 10;
    EntryData data = (i / 10) % 2 == 0 ? MakeEntry(n, 3000) : Compressible(n);
    ASSERT_TRUE((*store)->Put(KeyFor(n), data).ok());
    const Digest target = Digest::Of(data.blobs[rng() % 2].data);
    const std::string path = files.PathOf(target);
    std::string what;
    if (rng() % 16 == 0) {
      std::filesystem::remove(path);
      what = "delete the file";
    } else {
      WriteFile(path, Damage(ReadFile(path), rng, &what));
    }
    if (i % 2 == 0) {
      absl::StatusOr<Entry> got = (*store)->Get(KeyFor(n));
      ASSERT_TRUE(absl::IsNotFound(got.status()))
          << "iteration " << i << ": " << what << " was served";
    } else {
      absl::StatusOr<VerifyReport> report = (*store)->Verify();
      ASSERT_TRUE(report.ok());
      ASSERT_EQ(report->quarantined.size(), 1u)
          << "iteration " << i << ": " << what;
      EXPECT_EQ(report->quarantined[0].digest, target);
      EXPECT_EQ(report->quarantined[0].keys, std::vector<Digest>{KeyFor(n)});
    }
    ++detected;
    // The damaged entry is gone, not half-there.
    ASSERT_TRUE(absl::IsNotFound((*store)->Stat(KeyFor(n)).status())) << i;
    ASSERT_FALSE(files.Exists(target)) << i;
  }
  absl::StatusOr<StoreStats> stats = (*store)->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->counters[kCorrupt], kIterations);
  EXPECT_EQ(detected, kIterations);
  absl::StatusOr<VerifyReport> report = (*store)->Verify();
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->clean());
}

TEST(CorruptionTest, SharedBlobDamageDropsEveryUser) {
  TempDir tmp;
  absl::StatusOr<std::unique_ptr<LocalStore>> store =
      LocalStore::Open(tmp.path());
  ASSERT_TRUE(store.ok());
  EntryData a = MakeEntry(1), b = MakeEntry(2);
  b.blobs[0] = a.blobs[0];  // same "binary"
  ASSERT_TRUE((*store)->Put(KeyFor(1), a).ok());
  ASSERT_TRUE((*store)->Put(KeyFor(2), b).ok());
  BlobDirectory files(tmp.path());
  const std::string path = files.PathOf(Digest::Of(a.blobs[0].data));
  std::string bytes = ReadFile(path);
  bytes[bytes.size() / 2] ^= 0x40;
  WriteFile(path, bytes);
  EXPECT_TRUE(absl::IsNotFound((*store)->Get(KeyFor(1)).status()));
  EXPECT_TRUE(absl::IsNotFound((*store)->Stat(KeyFor(2)).status()));
  absl::StatusOr<StoreStats> stats = (*store)->Stats();
  EXPECT_EQ(stats->counters[kQuarantinedEntries], 2);
  EXPECT_EQ(stats->quarantine_files, 1);
  // A fresh put after the damage works again.
  ASSERT_TRUE((*store)->Put(KeyFor(1), a).ok());
  EXPECT_TRUE((*store)->Get(KeyFor(1)).ok());
}

}  // namespace
}  // namespace kiln::cache
