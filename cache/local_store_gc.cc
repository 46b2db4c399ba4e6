// LocalStore's maintenance: sweeping unreferenced blobs, quarantine,
// eviction, Gc() and Verify(). Every step is a short write transaction, so
// other processes' puts interleave with a long gc and readers never wait.
#include <sys/stat.h>

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "cache/index.h"
#include "cache/local_store.h"
#include "cache/status_macros.h"
#include "spdlog/spdlog.h"

namespace kiln::cache {
namespace {

constexpr int64_t kSweepBatch = 256;
constexpr int64_t kEvictBatch = 64;
// Evicting after a put stops at this fraction of max_size, so the next puts
// do not each evict again.
constexpr double kLowWatermark = 0.9;
constexpr int kEvictBatchesPerPut = 8;
constexpr absl::Duration kAgeCheckInterval = absl::Minutes(1);

}  // namespace

absl::Status LocalStore::SweepBlobs(std::vector<Digest> candidates,
                                    int64_t* removed) {
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()),
                   candidates.end());
  for (size_t start = 0; start < candidates.size(); start += kSweepBatch) {
    const size_t end =
        std::min(candidates.size(), start + static_cast<size_t>(kSweepBatch));
    CACHE_RETURN_IF_ERROR(Write([&](IndexTxn& txn) -> absl::Status {
      for (size_t i = start; i < end; ++i) {
        CACHE_ASSIGN_OR_RETURN(std::vector<Digest> keys,
                               txn.KeysReferencing(candidates[i]));
        if (!keys.empty()) continue;
        // Deleting under the write lock: a put that reuses this file checks
        // that it exists under the same lock, and rewrites it if not. If the
        // commit fails, an unreferenced row without a file remains, which the
        // next sweep drops.
        CACHE_RETURN_IF_ERROR(blobs_.Remove(candidates[i]));
        CACHE_RETURN_IF_ERROR(txn.DeleteBlob(candidates[i]));
        if (removed != nullptr) ++*removed;
      }
      return absl::OkStatus();
    }));
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> LocalStore::HandleBadBlob(
    const Digest& digest, const absl::Status& failure,
    std::vector<QuarantineRecord>* log) {
  QuarantineRecord record{digest, {}, std::string(failure.message())};
  std::vector<Digest> freed;
  bool quarantined = false;
  CACHE_RETURN_IF_ERROR(Write([&](IndexTxn& txn) -> absl::Status {
    CACHE_ASSIGN_OR_RETURN(record.keys, txn.KeysReferencing(digest));
    if (record.keys.empty()) {
      // Nothing serves this blob: it was removed concurrently, or it is a
      // row left by a sweep that crashed after deleting the file. Drop it.
      CACHE_ASSIGN_OR_RETURN(bool known, txn.BlobKnown(digest));
      if (known && !blobs_.Exists(digest)) {
        CACHE_RETURN_IF_ERROR(txn.DeleteBlob(digest));
      }
      return absl::OkStatus();
    }
    // Confirm under the lock: a concurrent put may have just rewritten it.
    absl::StatusOr<std::string> again = blobs_.Read(digest);
    if (again.ok()) return absl::OkStatus();
    if (!absl::IsNotFound(again.status()) &&
        !absl::IsDataLoss(again.status())) {
      return again.status();
    }
    absl::Status moved = blobs_.Quarantine(digest);
    if (!moved.ok() && !absl::IsNotFound(moved)) return moved;
    for (const Digest& key : record.keys) {
      CACHE_ASSIGN_OR_RETURN(std::optional<std::vector<Digest>> digests,
                             txn.DeleteEntry(key));
      if (digests) freed.insert(freed.end(), digests->begin(), digests->end());
    }
    CACHE_RETURN_IF_ERROR(txn.DeleteBlob(digest));
    CACHE_RETURN_IF_ERROR(
        txn.LogQuarantine(digest, record.keys, record.reason, Now()));
    quarantined = true;
    return absl::OkStatus();
  }));
  if (!quarantined) return false;
  AddCounter(kCorrupt, 1);
  AddCounter(kQuarantinedEntries, static_cast<int64_t>(record.keys.size()));
  spdlog::warn("cache {}: quarantined blob {} ({}); dropped {} entries", dir_,
               digest.hex(), record.reason, record.keys.size());
  freed.erase(std::remove(freed.begin(), freed.end(), digest), freed.end());
  CACHE_RETURN_IF_ERROR(SweepBlobs(freed, nullptr));
  if (log != nullptr) log->push_back(std::move(record));
  return true;
}

uint64_t LocalStore::IndexBytes(bool wal_only) const {
  uint64_t bytes = 0;
  for (const char* suffix : {"-wal", ""}) {
    if (wal_only && *suffix == '\0') break;
    struct stat st;
    if (stat(absl::StrCat(dir_, "/", kIndexFileName, suffix).c_str(), &st) ==
        0) {
      bytes += static_cast<uint64_t>(st.st_size);
    }
  }
  return bytes;
}

void LocalStore::CheckpointIndex() {
  absl::StatusOr<SqlitePool::Lease> db = pool_.Acquire();
  if (!db.ok()) return;
  // Best effort: readers that hold old snapshots keep part of the WAL.
  absl::Status s = (*db)->Exec("PRAGMA wal_checkpoint(TRUNCATE)");
  if (!s.ok()) {
    spdlog::warn("cache {}: checkpointing the index failed: {}", dir_,
                 s.ToString());
  }
}

absl::Status LocalStore::QuarantineEntry(absl::string_view key,
                                         absl::string_view reason,
                                         std::vector<DamagedEntry>* log) {
  std::vector<Digest> freed;
  CACHE_RETURN_IF_ERROR(Write([&](IndexTxn& txn) -> absl::Status {
    CACHE_ASSIGN_OR_RETURN(freed, txn.DeleteEntryRows(key));
    return txn.LogQuarantine(Digest(), {},
                             absl::StrCat("entry ", key, ": ", reason), Now());
  }));
  AddCounter(kQuarantinedEntries, 1);
  spdlog::warn("cache {}: dropped entry {}: {}", dir_,
               std::string(key.substr(0, 64)), std::string(reason));
  if (log != nullptr) {
    log->push_back(
        DamagedEntry{std::string(key.substr(0, 64)), std::string(reason)});
  }
  return SweepBlobs(freed, nullptr);
}

std::string LocalStore::BlobDamage(const Entry& entry) const {
  if (options_.key_text_blob.empty()) return "";
  const Blob* text = entry.Find(options_.key_text_blob);
  if (text == nullptr || Digest::Of(text->data) == entry.info.key) return "";
  return absl::StrCat("its ", options_.key_text_blob,
                      " blob does not hash to its key");
}

absl::Status LocalStore::Evict(std::optional<absl::Time> before,
                               std::optional<uint64_t> target, int max_batches,
                               GcReport* report) {
  for (int batch = 0; batch < max_batches; ++batch) {
    std::vector<Digest> freed;
    int64_t evicted = 0;
    CACHE_RETURN_IF_ERROR(Write([&](IndexTxn& txn) -> absl::Status {
      freed.clear();
      evicted = 0;
      std::vector<Digest> keys;
      if (before) {
        CACHE_ASSIGN_OR_RETURN(keys,
                               txn.LeastRecentlyUsed(kEvictBatch, before));
      }
      if (keys.empty() && target) {
        CACHE_ASSIGN_OR_RETURN(const uint64_t disk_bytes, txn.DiskBytes());
        if (disk_bytes > *target) {
          CACHE_ASSIGN_OR_RETURN(
              keys, txn.LeastRecentlyUsed(kEvictBatch, std::nullopt));
          // Take just enough of the oldest entries to get under the target
          // (entry sizes are pre-compression, so this rarely overshoots).
          uint64_t need = disk_bytes - *target, freed_bytes = 0;
          size_t take = 0;
          while (take < keys.size() && freed_bytes < need) {
            CACHE_ASSIGN_OR_RETURN(std::optional<EntryInfo> info,
                                   txn.FindEntry(keys[take]));
            freed_bytes += info ? std::max<uint64_t>(info->size, 1) : 1;
            ++take;
          }
          keys.resize(take);
        }
      }
      for (const Digest& key : keys) {
        CACHE_ASSIGN_OR_RETURN(std::optional<std::vector<Digest>> digests,
                               txn.DeleteEntry(key));
        if (!digests) continue;
        freed.insert(freed.end(), digests->begin(), digests->end());
        ++evicted;
      }
      return absl::OkStatus();
    }));
    if (evicted == 0) break;
    AddCounter(kEvictions, evicted);
    if (report != nullptr) report->evicted_entries += evicted;
    CACHE_RETURN_IF_ERROR(SweepBlobs(freed, nullptr));
  }
  return absl::OkStatus();
}

void LocalStore::MaybeEvictAfterPut() {
  const bool by_size = options_.max_size > 0;
  const bool by_age = options_.max_age != absl::InfiniteDuration();
  if (!by_size && !by_age) return;
  if (!evict_mu_.TryLock()) return;  // another thread of ours is on it
  std::optional<absl::Time> before;
  const absl::Time now = Now();
  if (by_age && now - last_age_check_ >= kAgeCheckInterval) {
    before = now - options_.max_age;
    last_age_check_ = now;
  }
  std::optional<uint64_t> target;
  if (by_size) {
    uint64_t disk_bytes = 0;
    absl::Status s = Read([&](IndexTxn& txn) -> absl::Status {
      CACHE_ASSIGN_OR_RETURN(disk_bytes, txn.DiskBytes());
      return absl::OkStatus();
    });
    if (s.ok() && disk_bytes > options_.max_size) {
      target = static_cast<uint64_t>(options_.max_size * kLowWatermark);
    }
  }
  if (before || target) {
    absl::Status s = Evict(before, target, kEvictBatchesPerPut, nullptr);
    if (!s.ok())
      spdlog::warn("cache {}: eviction failed: {}", dir_, s.ToString());
  }
  evict_mu_.Unlock();
}

absl::StatusOr<GcReport> LocalStore::Gc(const GcOptions& options) {
  GcReport report;
  auto disk_bytes = [&]() -> absl::StatusOr<uint64_t> {
    uint64_t bytes = 0;
    CACHE_RETURN_IF_ERROR(Read([&](IndexTxn& txn) -> absl::Status {
      CACHE_ASSIGN_OR_RETURN(bytes, txn.DiskBytes());
      return absl::OkStatus();
    }));
    return bytes;
  };
  CACHE_ASSIGN_OR_RETURN(report.disk_bytes_before, disk_bytes());
  report.wal_bytes_before = IndexBytes(/*wal_only=*/true);
  CACHE_RETURN_IF_ERROR(Write([&](IndexTxn& txn) -> absl::Status {
    CACHE_ASSIGN_OR_RETURN(report.malformed_rows, PurgeMalformedRows(txn.db()));
    return absl::OkStatus();
  }));
  // The WAL grows with writes until it is checkpointed, and counts against
  // max_size: fold it back into the index first.
  CheckpointIndex();
  {
    absl::MutexLock lock(&evict_mu_);
    if (options.max_age) {
      CACHE_RETURN_IF_ERROR(
          Evict(Now() - *options.max_age, std::nullopt, INT32_MAX, &report));
    }
    if (options.max_size) {
      const uint64_t wal_bytes = IndexBytes(/*wal_only=*/true);
      const uint64_t blob_budget =
          *options.max_size > wal_bytes ? *options.max_size - wal_bytes : 0;
      CACHE_RETURN_IF_ERROR(
          Evict(std::nullopt, blob_budget, INT32_MAX, &report));
    }
  }
  // Blob rows nothing references (left by a crash between an eviction and
  // its sweep).
  while (true) {
    std::vector<Digest> orphans;
    CACHE_RETURN_IF_ERROR(Read([&](IndexTxn& txn) -> absl::Status {
      CACHE_ASSIGN_OR_RETURN(orphans, txn.UnreferencedBlobs(kSweepBatch));
      return absl::OkStatus();
    }));
    int64_t removed = 0;
    CACHE_RETURN_IF_ERROR(SweepBlobs(orphans, &removed));
    report.removed_blob_files += removed;
    if (orphans.empty() || removed == 0) break;
  }
  // Files without a row (left by writers that crashed before committing).
  std::set<Digest> known;
  CACHE_RETURN_IF_ERROR(Read([&](IndexTxn& txn) -> absl::Status {
    CACHE_ASSIGN_OR_RETURN(auto blobs, txn.AllBlobs());
    for (const auto& [digest, size] : blobs) known.insert(digest);
    return absl::OkStatus();
  }));
  std::vector<Digest> untracked;
  const absl::Time cutoff = Now() - options.grace;
  CACHE_RETURN_IF_ERROR(
      blobs_.ForEach([&](const BlobDirectory::FileInfo& file) {
        if (!known.contains(file.digest) && file.mtime <= cutoff) {
          untracked.push_back(file.digest);
        }
      }));
  CACHE_RETURN_IF_ERROR(SweepBlobs(untracked, &report.removed_blob_files));
  CACHE_ASSIGN_OR_RETURN(report.removed_temp_files,
                         blobs_.CleanTemp(options.grace));
  CACHE_ASSIGN_OR_RETURN(report.removed_quarantine_files,
                         blobs_.CleanQuarantine(options.quarantine_max_age));
  CheckpointIndex();
  CACHE_ASSIGN_OR_RETURN(report.disk_bytes_after, disk_bytes());
  report.wal_bytes_after = IndexBytes(/*wal_only=*/true);
  return report;
}

}  // namespace kiln::cache
