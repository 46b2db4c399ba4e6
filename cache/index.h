// IndexTxn: the rows of the local index (entries, their blobs, blob files,
// counters), read and written inside one SqliteDb transaction.
//
// Only LocalStore uses this class; it decides which transaction each call
// runs in. Methods that change rows must run inside a write transaction.
#ifndef KILN_CACHE_INDEX_H_
#define KILN_CACHE_INDEX_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "cache/digest.h"
#include "cache/entry.h"
#include "cache/sqlite_db.h"

namespace kiln::cache {

// Unix milliseconds, the index's time unit.
int64_t ToMillis(absl::Time t);
absl::Time FromMillis(int64_t ms);

struct IndexUsage {
  int64_t entries = 0;
  uint64_t entry_bytes = 0;  // sum of entry sizes (shared blobs counted twice)
  int64_t blob_files = 0;
  uint64_t disk_bytes = 0;  // blob files as stored (after dedup, compression)
};

// The seal of an entry row: the SHA-256 (hex) of its key, metadata, size
// and blob list (names, digests and sizes, in order), in a length-prefixed
// encoding. Stored with the row and recomputed on every read, so that a
// damaged or edited row (a flipped bit, another entry's digest) is never
// taken for the entry its key names. Access times are not sealed.
std::string EntrySeal(const EntryInfo& info);

// Seals every entry row that has no seal yet (the version 2 migration).
absl::Status SealUnsealedEntries(SqliteDb& db);

// Deletes rows that no code of ours writes: keys and digests that are not 64
// lowercase hex characters, blob lists without their entry. Returns how many
// rows went.
absl::StatusOr<int64_t> PurgeMalformedRows(SqliteDb& db);

class IndexTxn {
 public:
  explicit IndexTxn(SqliteDb& db) : db_(db) {}

  SqliteDb& db() { return db_; }
  // SQLite's full check of the file: empty when sound, else its first
  // findings.
  absl::StatusOr<std::string> IntegrityProblem();

  // --- reads ---
  // The entry under `key`, nullopt if there is none. Rows that fail their
  // checks give an entry with `damage` set, not an error.
  absl::StatusOr<std::optional<EntryInfo>> FindEntry(const Digest& key);
  // Entries matching `filter` (keys, if given, in the given order; otherwise
  // most recently used first), damaged ones included (rows whose key is not
  // even a digest are left out: PurgeMalformedRows drops them).
  absl::StatusOr<std::vector<EntryInfo>> ListEntries(const EntryFilter& filter);
  // Keys of the entries that reference blob `digest`.
  absl::StatusOr<std::vector<Digest>> KeysReferencing(const Digest& digest);
  absl::StatusOr<bool> BlobKnown(const Digest& digest);
  // Every blob row as (digest, disk size).
  absl::StatusOr<std::vector<std::pair<Digest, uint64_t>>> AllBlobs();
  // Digests referenced by entries but without a blob row (should not exist).
  absl::StatusOr<std::vector<Digest>> DanglingReferences();
  // Blob rows no entry references, at most `limit`.
  absl::StatusOr<std::vector<Digest>> UnreferencedBlobs(int64_t limit);
  // Least recently used keys, oldest first; only those used before `before`
  // if given.
  absl::StatusOr<std::vector<Digest>> LeastRecentlyUsed(
      int64_t limit, std::optional<absl::Time> before);
  // Counts and sums over all entries: a full scan, for reports.
  absl::StatusOr<IndexUsage> Usage();
  // Bytes of blob files on disk: one row, cheap enough for every put.
  absl::StatusOr<uint64_t> DiskBytes();
  absl::StatusOr<std::map<std::string, int64_t>> Counters();

  // --- writes ---
  // Adds a blob row unless one exists.
  absl::Status AddBlob(const Digest& digest, uint64_t size, uint64_t disk_size);
  absl::Status DeleteBlob(const Digest& digest);
  // Deletes the rows of the entry stored under `key` (any text: damaged rows
  // too); returns the blob digests they referenced that still parse.
  absl::StatusOr<std::vector<Digest>> DeleteEntryRows(absl::string_view key);
  // Inserts or replaces the entry and its blob list; returns the digests the
  // replaced entry referenced (empty if new).
  absl::StatusOr<std::vector<Digest>> PutEntry(const EntryInfo& info);
  // Deletes the entry; returns the digests it referenced, nullopt if absent.
  absl::StatusOr<std::optional<std::vector<Digest>>> DeleteEntry(
      const Digest& key);
  absl::Status Touch(const Digest& key, absl::Time when);
  absl::Status AddCounters(const std::map<std::string, int64_t>& deltas);
  absl::Status LogQuarantine(const Digest& digest,
                             const std::vector<Digest>& keys,
                             absl::string_view reason, absl::Time when);

 private:
  // The blob list of `key`; sets `damage` for rows that do not parse.
  absl::StatusOr<std::vector<BlobInfo>> BlobsOf(const Digest& key,
                                                std::string* damage);
  // Fills in the blob list and checks the seal.
  absl::Status Complete(EntryInfo& info, absl::string_view seal);
  SqliteDb& db_;
};

}  // namespace kiln::cache

#endif  // KILN_CACHE_INDEX_H_
