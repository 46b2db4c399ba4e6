#include "cache/index_schema.h"

#include "absl/strings/str_cat.h"
#include "cache/index.h"

namespace kiln::cache {
namespace {

// Version 1. Keys and digests are lowercase hex so the file can be read with
// the sqlite3 shell. Times are Unix milliseconds. `blobs` has one row per
// blob file; its triggers keep the disk usage in `counters` exact inside the
// same transactions that add or drop files.
constexpr char kSchemaV1[] = R"sql(
CREATE TABLE entries (
  key TEXT PRIMARY KEY NOT NULL,
  kernel_name TEXT NOT NULL,
  target_arch TEXT NOT NULL,
  gpu_sku TEXT NOT NULL,
  extra TEXT NOT NULL,
  size INTEGER NOT NULL,
  created_ms INTEGER NOT NULL,
  last_access_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX entries_by_access ON entries(last_access_ms);
CREATE INDEX entries_by_kernel ON entries(kernel_name);
CREATE INDEX entries_by_arch ON entries(target_arch);
CREATE INDEX entries_by_sku ON entries(gpu_sku);

CREATE TABLE entry_blobs (
  key TEXT NOT NULL,
  position INTEGER NOT NULL,
  name TEXT NOT NULL,
  digest TEXT NOT NULL,
  size INTEGER NOT NULL,
  PRIMARY KEY (key, position)
) WITHOUT ROWID;
CREATE INDEX entry_blobs_by_digest ON entry_blobs(digest);

CREATE TABLE blobs (
  digest TEXT PRIMARY KEY NOT NULL,
  size INTEGER NOT NULL,
  disk_size INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE counters (
  name TEXT PRIMARY KEY NOT NULL,
  value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO counters(name, value) VALUES ('disk_bytes', 0), ('blob_files', 0);

CREATE TRIGGER blobs_added AFTER INSERT ON blobs BEGIN
  UPDATE counters SET value = value + NEW.disk_size WHERE name = 'disk_bytes';
  UPDATE counters SET value = value + 1 WHERE name = 'blob_files';
END;
CREATE TRIGGER blobs_dropped AFTER DELETE ON blobs BEGIN
  UPDATE counters SET value = value - OLD.disk_size WHERE name = 'disk_bytes';
  UPDATE counters SET value = value - 1 WHERE name = 'blob_files';
END;

CREATE TABLE quarantine_log (
  id INTEGER PRIMARY KEY,
  at_ms INTEGER NOT NULL,
  digest TEXT NOT NULL,
  keys TEXT NOT NULL,
  reason TEXT NOT NULL
);
)sql";

// Version 2: every entry row carries a seal, the SHA-256 of its key, its
// metadata and its blob list (EntrySeal), checked on every read. The rows of
// a version-1 index are sealed as they stand when it is migrated.
constexpr char kSchemaV2[] = R"sql(
ALTER TABLE entries ADD COLUMN seal TEXT NOT NULL DEFAULT '';
)sql";

constexpr Migration kMigrations[] = {{1, kSchemaV1},
                                     {2, kSchemaV2, &SealUnsealedEntries}};

absl::StatusOr<int> UserVersion(SqliteDb& db) {
  absl::StatusOr<Statement> stmt = db.Prepare("PRAGMA user_version");
  if (!stmt.ok()) return stmt.status();
  absl::StatusOr<bool> row = stmt->Step();
  if (!row.ok()) return row.status();
  return *row ? static_cast<int>(stmt->Int(0)) : 0;
}

}  // namespace

absl::Span<const Migration> IndexMigrations() { return kMigrations; }

absl::Status MigrateIndex(SqliteDb& db,
                          absl::Span<const Migration> migrations) {
  const int latest = migrations.empty() ? 0 : migrations.back().version;
  // Cheap check first: an up-to-date index needs no write lock.
  absl::StatusOr<int> current = UserVersion(db);
  if (!current.ok()) return current.status();
  if (*current == latest) return absl::OkStatus();
  return db.Transaction(/*write=*/true, [&]() -> absl::Status {
    absl::StatusOr<int> version = UserVersion(db);  // may have moved on
    if (!version.ok()) return version.status();
    if (*version > latest) {
      return absl::FailedPreconditionError(
          absl::StrCat("the cache index has schema version ", *version,
                       " but this kiln understands versions up to ", latest,
                       "; upgrade kiln or use another cache directory"));
    }
    for (const Migration& m : migrations) {
      if (m.version <= *version) continue;
      if (absl::Status s = db.Exec(m.sql); !s.ok()) {
        return absl::Status(
            s.code(), absl::StrCat("migrating the cache index to version ",
                                   m.version, ": ", s.message()));
      }
      if (m.after != nullptr) {
        if (absl::Status s = m.after(db); !s.ok()) {
          return absl::Status(
              s.code(), absl::StrCat("migrating the cache index to version ",
                                     m.version, ": ", s.message()));
        }
      }
      if (absl::Status s =
              db.Exec(absl::StrCat("PRAGMA user_version = ", m.version));
          !s.ok()) {
        return s;
      }
    }
    return absl::OkStatus();
  });
}

}  // namespace kiln::cache
