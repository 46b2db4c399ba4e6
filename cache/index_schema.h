// The SQLite schema of the local index and its migrations.
//
// The schema version lives in PRAGMA user_version. Opening a store migrates
// an older index forward inside one write transaction (so two processes
// opening a fresh directory at once do not race) and refuses an index newer
// than this build understands.
#ifndef KILN_CACHE_INDEX_SCHEMA_H_
#define KILN_CACHE_INDEX_SCHEMA_H_

#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "cache/sqlite_db.h"

namespace kiln::cache {

// One step: the SQL that takes the schema from `version - 1` to `version`.
struct Migration {
  int version;
  const char* sql;
  // Run after `sql`, in the same transaction (for steps SQL cannot do).
  absl::Status (*after)(SqliteDb& db) = nullptr;
};

// The migrations of this build, in order; the last one's version is the
// current schema version.
absl::Span<const Migration> IndexMigrations();

// Brings `db` to the last version in `migrations` (versions must be 1, 2, 3,
// ...). FailedPrecondition if the file's version is newer than that, naming
// both versions.
absl::Status MigrateIndex(SqliteDb& db, absl::Span<const Migration> migrations);

}  // namespace kiln::cache

#endif  // KILN_CACHE_INDEX_SCHEMA_H_
