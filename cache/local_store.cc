#include "cache/local_store.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "cache/index.h"
#include "cache/index_schema.h"
#include "cache/status_macros.h"
#include "spdlog/spdlog.h"

namespace kiln::cache {
namespace {

// Counters of a read-only process are written at most this often.
constexpr absl::Duration kCounterFlushInterval = absl::Seconds(10);
// Hits update times and counters only if the write lock is free this soon.
constexpr absl::Duration kBestEffortBusy = absl::Milliseconds(5);
constexpr int kPutAttempts = 4;

// Opens the index, lets SQLite check its structure and migrates it. DataLoss
// when the file is damaged.
absl::Status OpenIndexOnce(const std::string& path, absl::Duration busy) {
  CACHE_ASSIGN_OR_RETURN(std::unique_ptr<SqliteDb> db,
                         SqliteDb::Open(path, busy, true));
  {
    // quick_check reads every page once (milliseconds for thousands of
    // entries) and finds what a lookup would trip over later.
    CACHE_ASSIGN_OR_RETURN(Statement check, db->Prepare("PRAGMA quick_check"));
    CACHE_ASSIGN_OR_RETURN(bool row, check.Step());
    if (row && check.Text(0) != "ok") {
      return absl::DataLossError(
          absl::StrCat("sqlite quick_check: ", check.Text(0).substr(0, 200)));
    }
  }
  return MigrateIndex(*db, IndexMigrations());
}

// OpenIndexOnce, again while the index is busy, until `busy` has passed.
// SQLite answers SQLITE_BUSY without waiting where waiting could deadlock:
// processes that open a fresh store at once race to switch the new file to
// WAL and to create the schema, and the losers got "database is locked"
// (MultiProcessTest.FreshDirectoryOpenedByManyAtOnce, about 1 run in 100
// on a loaded machine).
absl::Status OpenIndex(const std::string& path, absl::Duration busy) {
  const absl::Time deadline = absl::Now() + busy;
  absl::Duration pause = absl::Milliseconds(1);
  for (;;) {
    absl::Status s = OpenIndexOnce(path, busy);
    if (!absl::IsUnavailable(s) || absl::Now() + pause > deadline) return s;
    absl::SleepFor(pause);
    pause = std::min(pause * 2, absl::Milliseconds(50));
  }
}

// Moves the damaged index of `dir` (with its WAL) into quarantine/ for
// inspection and starts an empty one in its place.
absl::Status ReplaceDamagedIndex(const std::string& dir, absl::Duration busy,
                                 const absl::Status& cause) {
  const std::string index_path = absl::StrCat(dir, "/", kIndexFileName);
  const std::string aside = absl::StrCat(dir, "/quarantine/", kIndexFileName,
                                         ".", ToMillis(absl::Now()));
  for (const char* suffix : {"", "-wal", "-shm"}) {
    const std::string from = absl::StrCat(index_path, suffix);
    if (rename(from.c_str(), absl::StrCat(aside, suffix).c_str()) != 0 &&
        errno != ENOENT) {
      return absl::Status(cause.code(),
                          absl::StrCat(cause.message(), "; moving ", from,
                                       " aside failed: ", strerror(errno)));
    }
  }
  spdlog::warn(
      "cache {}: the index is damaged ({}); moved it to {} and started an "
      "empty one: cached kernels are compiled again as they are asked for",
      dir, std::string(cause.message()), aside);
  return OpenIndex(index_path, busy);
}

}  // namespace

LocalStore::LocalStore(std::string dir, LocalStoreOptions options)
    : dir_(std::move(dir)),
      options_(std::move(options)),
      blobs_(dir_),
      pool_(absl::StrCat(dir_, "/", kIndexFileName), options_.busy_timeout) {}

absl::StatusOr<std::unique_ptr<LocalStore>> LocalStore::Open(
    const std::string& dir, LocalStoreOptions options) {
  const std::string index_path = absl::StrCat(dir, "/", kIndexFileName);
  struct stat st;
  if (!options.create_if_missing && stat(index_path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat("no kiln cache in ", dir, " (",
                                            index_path, " is missing)"));
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    return absl::PermissionDeniedError(absl::StrCat(
        "cannot create cache directory ", dir, ": ", ec.message()));
  }
  std::unique_ptr<LocalStore> store(new LocalStore(dir, std::move(options)));
  CACHE_RETURN_IF_ERROR(store->blobs_.Init());
  absl::Status opened = OpenIndex(index_path, store->options_.busy_timeout);
  if (absl::IsDataLoss(opened)) {
    opened = ReplaceDamagedIndex(dir, store->options_.busy_timeout, opened);
  }
  CACHE_RETURN_IF_ERROR(opened);
  {
    absl::MutexLock lock(&store->counters_mu_);
    store->last_flush_ = store->Now();
  }
  return store;
}

LocalStore::~LocalStore() { (void)FlushCounters(); }

absl::Time LocalStore::Now() const {
  return options_.clock ? options_.clock() : absl::Now();
}

std::map<std::string, int64_t> LocalStore::TakeCounters() {
  absl::MutexLock lock(&counters_mu_);
  return std::exchange(counters_, {});
}

void LocalStore::RestoreCounters(
    const std::map<std::string, int64_t>& counters) {
  absl::MutexLock lock(&counters_mu_);
  for (const auto& [name, delta] : counters) counters_[name] += delta;
}

void LocalStore::AddCounter(absl::string_view name, int64_t delta) {
  absl::MutexLock lock(&counters_mu_);
  counters_[std::string(name)] += delta;
}

absl::Status LocalStore::FlushCounters() {
  return Write([](IndexTxn&) { return absl::OkStatus(); });
}

absl::Status LocalStore::Write(const std::function<absl::Status(IndexTxn&)>& fn,
                               std::optional<absl::Duration> busy) {
  absl::Status status = WriteOnce(fn, busy);
  if (!IsCorruption(status)) return status;
  CACHE_RETURN_IF_ERROR(RepairIndex(status));
  return WriteOnce(fn, busy);
}

absl::Status LocalStore::Read(
    const std::function<absl::Status(IndexTxn&)>& fn) {
  absl::Status status = ReadOnce(fn);
  if (!IsCorruption(status)) return status;
  CACHE_RETURN_IF_ERROR(RepairIndex(status));
  return ReadOnce(fn);
}

absl::Status LocalStore::RepairIndex(const absl::Status& cause) {
  absl::MutexLock lock(&repair_mu_);
  // Most damage SQLite trips over at run time is an index b-tree out of step
  // with its table: rebuild those from the tables and check the whole file.
  absl::Status reindexed = [&]() -> absl::Status {
    CACHE_ASSIGN_OR_RETURN(SqlitePool::Lease db, pool_.Acquire());
    CACHE_RETURN_IF_ERROR(db->Exec("REINDEX"));
    CACHE_RETURN_IF_ERROR(db->Transaction(false, [&]() -> absl::Status {
      IndexTxn txn(*db);
      CACHE_ASSIGN_OR_RETURN(std::string problem, txn.IntegrityProblem());
      if (!problem.empty()) return absl::DataLossError(problem);
      return absl::OkStatus();
    }));
    return absl::OkStatus();
  }();
  if (reindexed.ok()) {
    spdlog::warn(
        "cache {}: the index was damaged ({}); rebuilt its b-tree "
        "indexes from its tables",
        dir_, std::string(cause.message()));
    return absl::OkStatus();
  }
  // The tables themselves are damaged: start over with an empty index.
  pool_.Reset();
  return ReplaceDamagedIndex(dir_, busy_timeout(), cause);
}

absl::Status LocalStore::WriteOnce(
    const std::function<absl::Status(IndexTxn&)>& fn,
    std::optional<absl::Duration> busy) {
  CACHE_ASSIGN_OR_RETURN(SqlitePool::Lease db, pool_.Acquire());
  std::map<std::string, int64_t> pending = TakeCounters();
  if (busy) db->SetBusyTimeout(*busy);
  absl::Status status = db->Transaction(true, [&]() -> absl::Status {
    IndexTxn txn(*db);
    CACHE_RETURN_IF_ERROR(fn(txn));
    return txn.AddCounters(pending);
  });
  if (busy) db->SetBusyTimeout(options_.busy_timeout);
  if (!status.ok()) {
    RestoreCounters(pending);
  } else {
    absl::MutexLock lock(&counters_mu_);
    last_flush_ = Now();
  }
  return status;
}

absl::Status LocalStore::ReadOnce(
    const std::function<absl::Status(IndexTxn&)>& fn) {
  CACHE_ASSIGN_OR_RETURN(SqlitePool::Lease db, pool_.Acquire());
  return db->Transaction(false, [&]() -> absl::Status {
    IndexTxn txn(*db);
    return fn(txn);
  });
}

absl::Status LocalStore::Put(const Digest& key, const EntryData& data) {
  CACHE_RETURN_IF_ERROR(ValidateEntryData(data));
  absl::Status status = Store(key, data);
  if (status.ok()) return status;
  // A full or failing disk shows here first; say so, but not for every put.
  if (std::optional<int64_t> held_back = put_warnings_.Admit(Now())) {
    spdlog::warn(
        "cache {}: storing {} failed: {}{}", dir_, key.hex(), status.ToString(),
        *held_back > 0
            ? absl::StrCat(" (and ", *held_back, " more failed puts before it)")
            : "");
  }
  return status;
}

absl::Status LocalStore::Store(const Digest& key, const EntryData& data) {
  const absl::Time now = Now();
  EntryInfo info;
  info.key = key;
  info.metadata = data.metadata;
  info.created = now;
  info.last_access = now;
  std::map<Digest, const Blob*> distinct;
  for (const Blob& blob : data.blobs) {
    Digest digest = Digest::Of(blob.data);
    info.blobs.push_back(BlobInfo{blob.name, digest, blob.data.size()});
    info.size += blob.data.size();
    distinct.emplace(digest, &blob);
  }

  std::vector<Digest> replaced;
  for (int attempt = 0; attempt < kPutAttempts; ++attempt) {
    // Blob files first, durable, outside the lock (the slow part).
    std::map<Digest, uint64_t> disk_size;
    for (const auto& [digest, blob] : distinct) {
      CACHE_ASSIGN_OR_RETURN(
          disk_size[digest],
          blobs_.Write(digest, blob->data, options_.compression_level,
                       options_.fsync));
    }
    bool raced = false;
    absl::Status status = Write([&](IndexTxn& txn) -> absl::Status {
      // Files are only deleted under this lock, so a file seen here stays
      // until the entry that references it commits.
      for (const auto& [digest, blob] : distinct) {
        if (!blobs_.Exists(digest)) {
          raced = true;
          return absl::AbortedError("blob file deleted by a concurrent gc");
        }
        CACHE_RETURN_IF_ERROR(
            txn.AddBlob(digest, blob->data.size(), disk_size[digest]));
      }
      CACHE_ASSIGN_OR_RETURN(replaced, txn.PutEntry(info));
      return absl::OkStatus();
    });
    if (raced) continue;
    CACHE_RETURN_IF_ERROR(status);
    AddCounter(kPuts, 1);
    AddCounter(kPutBytes, static_cast<int64_t>(info.size));
    std::vector<Digest> dropped;
    for (const Digest& d : replaced) {
      if (!distinct.contains(d)) dropped.push_back(d);
    }
    if (!dropped.empty()) (void)SweepBlobs(dropped, nullptr);
    MaybeEvictAfterPut();
    return absl::OkStatus();
  }
  return absl::UnavailableError(
      absl::StrCat("put ", key.hex(),
                   ": blob files kept being deleted by "
                   "concurrent garbage collection"));
}

absl::StatusOr<Entry> LocalStore::Get(const Digest& key, bool record_use) {
  std::optional<EntryInfo> info;
  CACHE_RETURN_IF_ERROR(Read([&](IndexTxn& txn) -> absl::Status {
    CACHE_ASSIGN_OR_RETURN(info, txn.FindEntry(key));
    return absl::OkStatus();
  }));
  if (!info) {
    if (record_use) AddCounter(kMisses, 1);
    return absl::NotFoundError(absl::StrCat("no cache entry ", key.hex()));
  }
  if (!info->damage.empty()) {
    CACHE_RETURN_IF_ERROR(QuarantineEntry(key.hex(), info->damage, nullptr));
    if (record_use) AddCounter(kMisses, 1);
    return absl::NotFoundError(
        absl::StrCat("no cache entry ", key.hex(),
                     " (its index rows were damaged: ", info->damage, ")"));
  }
  Entry entry;
  for (const BlobInfo& blob : info->blobs) {
    absl::StatusOr<std::string> data = blobs_.Read(blob.digest);
    if (!data.ok()) {
      if (!absl::IsNotFound(data.status()) &&
          !absl::IsDataLoss(data.status())) {
        return data.status();  // an I/O problem, not a verdict on the entry
      }
      CACHE_RETURN_IF_ERROR(
          HandleBadBlob(blob.digest, data.status(), nullptr).status());
      if (record_use) AddCounter(kMisses, 1);
      return absl::NotFoundError(
          absl::StrCat("no cache entry ", key.hex(), " (its blob ", blob.name,
                       " failed verification: ", data.status().message(), ")"));
    }
    entry.blobs.push_back(Blob{blob.name, *std::move(data)});
  }
  entry.info = *std::move(info);
  if (std::string damage = BlobDamage(entry); !damage.empty()) {
    CACHE_RETURN_IF_ERROR(QuarantineEntry(key.hex(), damage, nullptr));
    if (record_use) AddCounter(kMisses, 1);
    return absl::NotFoundError(
        absl::StrCat("no cache entry ", key.hex(), " (", damage, ")"));
  }
  if (!record_use) return entry;
  AddCounter(kHits, 1);
  const absl::Time now = Now();
  bool flush_due;
  {
    absl::MutexLock lock(&counters_mu_);
    flush_due = now - last_flush_ >= kCounterFlushInterval;
  }
  if (now - entry.info.last_access >= options_.touch_interval || flush_due) {
    // Best effort: if another process holds the write lock, skip the update
    // rather than make a hit wait.
    const bool touch = now - entry.info.last_access >= options_.touch_interval;
    absl::Status s = Write(
        [&](IndexTxn& txn) {
          return touch ? txn.Touch(key, now) : absl::OkStatus();
        },
        kBestEffortBusy);
    if (s.ok() && touch) entry.info.last_access = now;
  }
  return entry;
}

absl::StatusOr<EntryInfo> LocalStore::Stat(const Digest& key) {
  std::optional<EntryInfo> info;
  CACHE_RETURN_IF_ERROR(Read([&](IndexTxn& txn) -> absl::Status {
    CACHE_ASSIGN_OR_RETURN(info, txn.FindEntry(key));
    return absl::OkStatus();
  }));
  if (!info)
    return absl::NotFoundError(absl::StrCat("no cache entry ", key.hex()));
  return *std::move(info);
}

absl::Status LocalStore::Remove(const Digest& key) {
  std::optional<std::vector<Digest>> digests;
  CACHE_RETURN_IF_ERROR(Write([&](IndexTxn& txn) -> absl::Status {
    CACHE_ASSIGN_OR_RETURN(digests, txn.DeleteEntry(key));
    return absl::OkStatus();
  }));
  if (!digests)
    return absl::NotFoundError(absl::StrCat("no cache entry ", key.hex()));
  AddCounter(kRemoves, 1);
  return SweepBlobs(*digests, nullptr);
}

absl::StatusOr<std::vector<EntryInfo>> LocalStore::List(
    const EntryFilter& filter) {
  std::vector<EntryInfo> out;
  CACHE_RETURN_IF_ERROR(Read([&](IndexTxn& txn) -> absl::Status {
    CACHE_ASSIGN_OR_RETURN(out, txn.ListEntries(filter));
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<StoreStats> LocalStore::Stats() {
  // Include this process's latest counts if the lock is free; otherwise they
  // are added from memory below.
  (void)Write([](IndexTxn&) { return absl::OkStatus(); }, kBestEffortBusy);
  StoreStats stats;
  CACHE_RETURN_IF_ERROR(Read([&](IndexTxn& txn) -> absl::Status {
    CACHE_ASSIGN_OR_RETURN(IndexUsage usage, txn.Usage());
    stats.entries = usage.entries;
    stats.entry_bytes = usage.entry_bytes;
    stats.blob_files = usage.blob_files;
    stats.disk_bytes = usage.disk_bytes;
    CACHE_ASSIGN_OR_RETURN(stats.counters, txn.Counters());
    return absl::OkStatus();
  }));
  stats.counters.erase("disk_bytes");
  stats.counters.erase("blob_files");
  for (const char* name : {kHits, kMisses, kCorrupt, kQuarantinedEntries, kPuts,
                           kPutBytes, kRemoves, kEvictions}) {
    stats.counters.emplace(name, 0);
  }
  {
    absl::MutexLock lock(&counters_mu_);
    for (const auto& [name, delta] : counters_) stats.counters[name] += delta;
  }
  stats.index_bytes = IndexBytes();
  absl::StatusOr<std::pair<int64_t, uint64_t>> q = blobs_.QuarantineUsage();
  if (q.ok()) {
    stats.quarantine_files = q->first;
    stats.quarantine_bytes = q->second;
  }
  return stats;
}

}  // namespace kiln::cache
