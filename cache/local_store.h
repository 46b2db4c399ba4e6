// LocalStore: the local tier. A content-addressed store in one directory: a
// SQLite index (WAL) and blob files (see BlobDirectory). It owns its stats
// and its eviction, as ccache's local storage does.
//
// Guarantees:
// - Thread-safe, and safe for many processes on one directory (daemons, the
//   CLI): every change is one SQLite write transaction.
// - Publication is atomic: blobs are made durable first (temp, fsync,
//   rename), and the index rows that make an entry visible are written after
//   them, in one transaction. A crash at any moment leaves either the old
//   state or the new one, plus at most unreferenced files that Gc() removes.
// - Every read re-hashes the blobs it returns. A blob that is missing or does
//   not match its digest is a miss: it is counted ("corrupt"), moved to
//   quarantine/ and every entry that uses it is dropped, never served.
// - With max_size set, each Put() evicts least-recently-used entries in small
//   batches once the blob files pass max_size, down to 90% of it; entries
//   unused for max_age are evicted too. Readers never wait for eviction (WAL).
#ifndef KILN_CACHE_LOCAL_STORE_H_
#define KILN_CACHE_LOCAL_STORE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/blob_directory.h"
#include "cache/digest.h"
#include "cache/entry.h"
#include "cache/log_throttle.h"
#include "cache/sqlite_db.h"

namespace kiln::cache {

class IndexTxn;

struct LocalStoreOptions {
  // Upper bound for the blob files on disk, in bytes; 0 means no bound.
  uint64_t max_size = 0;
  // Entries not used for this long are evicted; infinite means never.
  absl::Duration max_age = absl::InfiniteDuration();
  // zstd level for blob files (0 stores everything raw).
  int compression_level = 1;
  // fsync blob files and their folder before publishing. Turning it off
  // keeps crash safety against a killed process but not against power loss;
  // meant for tests and throwaway caches.
  bool fsync = true;
  // A hit updates the entry's last-access time only if the stored one is
  // older than this, so repeated hits stay read-only.
  absl::Duration touch_interval = absl::Seconds(60);
  // How long a writer waits for another process's write lock.
  absl::Duration busy_timeout = absl::Seconds(30);
  // Create the directory and the index if they do not exist; if false, Open
  // on a missing cache is NotFound.
  bool create_if_missing = true;
  // An entry holding a blob of this name is sound only if that blob's
  // SHA-256 is the entry's key: the blob is the text the key was made from
  // (kiln's "key.txt"). Empty turns the check off.
  std::string key_text_blob = "key.txt";
  // Time source, for tests; absl::Now if empty.
  std::function<absl::Time()> clock;
};

// Counter names (also the keys of StoreStats::counters).
inline constexpr char kHits[] = "hits";
inline constexpr char kMisses[] = "misses";
inline constexpr char kCorrupt[] = "corrupt";  // blobs quarantined
inline constexpr char kQuarantinedEntries[] = "quarantined_entries";
inline constexpr char kPuts[] = "puts";
inline constexpr char kPutBytes[] = "put_bytes";
inline constexpr char kRemoves[] = "removes";
inline constexpr char kEvictions[] = "evictions";

// The index's file name in a cache directory (its WAL adds "-wal").
inline constexpr char kIndexFileName[] = "index.sqlite";

struct StoreStats {
  int64_t entries = 0;
  uint64_t entry_bytes = 0;  // logical size of all entries
  int64_t blob_files = 0;
  uint64_t disk_bytes = 0;   // blob files on disk after dedup and compression
  uint64_t index_bytes = 0;  // the index and its WAL
  int64_t quarantine_files = 0;
  uint64_t quarantine_bytes = 0;
  // Persistent counters of every process that used this directory, this
  // process's included: kHits, kMisses, ..., and any AddCounter() names.
  std::map<std::string, int64_t> counters;
};

struct GcOptions {
  std::optional<uint64_t> max_size;       // evict LRU entries down to this
  std::optional<absl::Duration> max_age;  // evict entries unused this long
  // Untracked blob files and temp files younger than this are left alone:
  // they may belong to a writer that is still running.
  absl::Duration grace = absl::Hours(1);
  // Quarantined files are kept this long for inspection, then deleted.
  absl::Duration quarantine_max_age = absl::Hours(7 * 24);
};

struct GcReport {
  int64_t evicted_entries = 0;
  int64_t malformed_rows = 0;  // index rows no kiln writes, deleted
  // The index's WAL, which gc checkpoints and counts against max_size.
  uint64_t wal_bytes_before = 0;
  uint64_t wal_bytes_after = 0;
  uint64_t disk_bytes_before = 0;
  uint64_t disk_bytes_after = 0;
  int64_t removed_blob_files = 0;  // unreferenced files deleted
  int64_t removed_temp_files = 0;
  int64_t removed_quarantine_files = 0;
};

struct QuarantineRecord {
  Digest digest;
  std::vector<Digest> keys;  // entries dropped with it
  std::string reason;
};

// An entry dropped because its own rows failed their checks.
struct DamagedEntry {
  std::string key;  // as stored (it may not even be a digest)
  std::string reason;
};

struct VerifyReport {
  int64_t entries = 0;
  // SQLite's own check of the index file: empty when it is sound.
  std::string index_problem;
  std::vector<DamagedEntry> damaged_entries;
  int64_t malformed_rows = 0;  // rows no kiln writes, deleted
  int64_t blobs_checked = 0;
  uint64_t bytes_checked = 0;
  std::vector<QuarantineRecord> quarantined;
  int64_t unreferenced_files = 0;  // reclaimable by Gc(), not an error
  int64_t stray_files = 0;         // unexpected names under blobs/
  bool clean() const {
    return quarantined.empty() && damaged_entries.empty() &&
           index_problem.empty() && malformed_rows == 0;
  }
};

class LocalStore {
 public:
  // Opens (or creates) the store in `dir`. FailedPrecondition if the index
  // was written by a newer schema; NotFound if missing and not creating.
  // An index file that SQLite finds damaged is moved into quarantine/ (with
  // its WAL) and an empty one is started in its place, with a warning: the
  // entries it held are compiled again when asked for.
  static absl::StatusOr<std::unique_ptr<LocalStore>> Open(
      const std::string& dir, LocalStoreOptions options = {});
  // Flushes this process's counters (best effort).
  ~LocalStore();

  // Stores `data` under `key`, replacing any entry there. InvalidArgument if
  // the data breaks ValidateEntryData; I/O errors otherwise. Visible to all
  // processes when it returns.
  absl::Status Put(const Digest& key, const EntryData& data);

  // The entry with its verified blobs. NotFound on a miss, including a
  // corrupt entry (which is quarantined). With `record_use` false the read
  // is neither counted as a hit or miss nor refreshes the entry's
  // last-access time (exports and tools that should not skew stats or LRU).
  absl::StatusOr<Entry> Get(const Digest& key, bool record_use = true);

  // The entry's description without reading blobs; NotFound if absent.
  absl::StatusOr<EntryInfo> Stat(const Digest& key);

  // Removes the entry; NotFound if there was none.
  absl::Status Remove(const Digest& key);

  // Entries matching `filter`, most recently used first.
  absl::StatusOr<std::vector<EntryInfo>> List(const EntryFilter& filter = {});

  // Evicts by age and size as asked, deletes unreferenced blob files and
  // stale temp files. Runs in small transactions; safe beside other users.
  absl::StatusOr<GcReport> Gc(const GcOptions& options);

  // Checks the index file, every entry's rows (seal, key text) and re-hashes
  // every blob; quarantines what fails.
  absl::StatusOr<VerifyReport> Verify();

  absl::StatusOr<StoreStats> Stats();

  // Adds to a named counter (kept in memory, written with the next index
  // transaction); lets tiers layered on top keep their stats here.
  void AddCounter(absl::string_view name, int64_t delta);
  // Writes pending counters now.
  absl::Status FlushCounters();

  const std::string& dir() const { return dir_; }
  const LocalStoreOptions& options() const { return options_; }

 private:
  LocalStore(std::string dir, LocalStoreOptions options);

  absl::Time Now() const;
  // Put() without its checks and its logging.
  absl::Status Store(const Digest& key, const EntryData& data);
  // Runs `fn` in a write transaction on a pooled connection, writing the
  // pending counters in the same transaction. `busy` overrides how long to
  // wait for the write lock (short for best-effort updates).
  // When SQLite reports the index damaged, both repair it (RepairIndex) and
  // run `fn` once more.
  absl::Status Write(const std::function<absl::Status(IndexTxn&)>& fn,
                     std::optional<absl::Duration> busy = std::nullopt);
  absl::Status Read(const std::function<absl::Status(IndexTxn&)>& fn);
  absl::Status WriteOnce(const std::function<absl::Status(IndexTxn&)>& fn,
                         std::optional<absl::Duration> busy);
  absl::Status ReadOnce(const std::function<absl::Status(IndexTxn&)>& fn);
  // Rebuilds the index's b-tree indexes if that makes the file sound, else
  // moves the file aside and starts an empty index. Logs a warning.
  absl::Status RepairIndex(const absl::Status& cause);
  absl::Duration busy_timeout() const { return options_.busy_timeout; }
  std::map<std::string, int64_t> TakeCounters();
  void RestoreCounters(const std::map<std::string, int64_t>& counters);

  // Deletes blob rows and files no entry references, among `candidates`.
  absl::Status SweepBlobs(std::vector<Digest> candidates, int64_t* removed);
  // Called when a read of `digest` for `key` failed with `failure`; confirms
  // under the write lock and quarantines. Returns true if quarantined.
  absl::StatusOr<bool> HandleBadBlob(const Digest& digest,
                                     const absl::Status& failure,
                                     std::vector<QuarantineRecord>* log);
  // Drops the entry stored under `key` (any text) whose rows failed their
  // checks for `reason`, logs it and sweeps the blobs it alone used.
  absl::Status QuarantineEntry(absl::string_view key, absl::string_view reason,
                               std::vector<DamagedEntry>* log);
  // The entry's damage, if any, judged from its blobs: a key-text blob that
  // does not hash to the key.
  std::string BlobDamage(const Entry& entry) const;
  // Evicts up to `max_batches` batches of entries: those unused since
  // `before`, then LRU ones while disk usage is above `target`.
  absl::Status Evict(std::optional<absl::Time> before,
                     std::optional<uint64_t> target, int max_batches,
                     GcReport* report);
  void MaybeEvictAfterPut();
  // Size of the index file and its WAL, or of the WAL alone.
  uint64_t IndexBytes(bool wal_only = false) const;
  // Folds the WAL back into the index and truncates it (best effort).
  void CheckpointIndex();

  const std::string dir_;
  const LocalStoreOptions options_;
  BlobDirectory blobs_;
  SqlitePool pool_;
  absl::Mutex counters_mu_;
  std::map<std::string, int64_t> counters_ ABSL_GUARDED_BY(counters_mu_);
  absl::Time last_flush_ ABSL_GUARDED_BY(counters_mu_);
  // Failed puts are logged at most every 30 s.
  LogThrottle put_warnings_{absl::Seconds(30)};
  absl::Mutex repair_mu_;  // one repair at a time
  absl::Mutex evict_mu_;   // one evicting thread per process is enough
  absl::Time last_age_check_ ABSL_GUARDED_BY(evict_mu_);
};

}  // namespace kiln::cache

#endif  // KILN_CACHE_LOCAL_STORE_H_
