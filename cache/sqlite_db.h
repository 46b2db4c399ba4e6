// SqliteDb: a thin RAII layer over one SQLite connection (prepared-statement
// cache, transactions, Status errors), and SqlitePool, which lends
// connections to threads so readers never queue behind one mutex.
//
// A SqliteDb is used by one thread at a time (the pool guarantees it);
// SqlitePool is thread-safe. Cross-process safety is SQLite's: WAL mode,
// BEGIN IMMEDIATE for writers, a busy timeout for waiting.
#ifndef KILN_CACHE_SQLITE_DB_H_
#define KILN_CACHE_SQLITE_DB_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

struct sqlite3;
struct sqlite3_stmt;

namespace kiln::cache {

class SqliteDb;

// A prepared statement borrowed from its connection's cache; reset and
// unbound when it goes out of scope. Bind indexes start at 1, column
// indexes at 0.
class Statement {
 public:
  Statement(Statement&& other) noexcept;
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  ~Statement();

  Statement& Bind(int index, int64_t value);
  Statement& Bind(int index, absl::string_view text);
  Statement& Bind(int index, const char* text) {
    return Bind(index, absl::string_view(text));
  }

  // Runs one step: true if a row is available, false when done.
  absl::StatusOr<bool> Step();
  // Steps until done, for statements without results.
  absl::Status Run();

  int64_t Int(int column) const;
  std::string Text(int column) const;

 private:
  friend class SqliteDb;
  Statement(SqliteDb* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  SqliteDb* db_;
  sqlite3_stmt* stmt_;
};

class SqliteDb {
 public:
  // Opens (creating if `create`) the database at `path` with the given busy
  // timeout, in WAL mode with synchronous=NORMAL: a commit survives a crash
  // of the process; a power loss may drop the last commits but never leaves
  // the file inconsistent.
  static absl::StatusOr<std::unique_ptr<SqliteDb>> Open(const std::string& path,
                                                        absl::Duration busy,
                                                        bool create);
  ~SqliteDb();

  // Runs one or more statements without results.
  absl::Status Exec(absl::string_view sql);

  // Returns the cached prepared statement for `sql` (compiled once).
  absl::StatusOr<Statement> Prepare(absl::string_view sql);

  // BEGIN IMMEDIATE (takes the write lock, waiting up to the busy timeout)
  // or BEGIN (a read snapshot), runs `fn`, commits if it returned OK and
  // rolls back otherwise. Returns fn's status or the commit's.
  absl::Status Transaction(bool write, const std::function<absl::Status()>& fn);

  // Changes the busy timeout of this connection (e.g. shortly, for
  // best-effort writes).
  void SetBusyTimeout(absl::Duration busy);
  absl::Duration busy_timeout() const { return busy_; }

  int64_t changes() const;

  // Maps the connection's last error to a Status prefixed by `what`.
  absl::Status Error(absl::string_view what) const;

 private:
  SqliteDb(sqlite3* db, absl::Duration busy) : db_(db), busy_(busy) {}
  sqlite3* db_;
  absl::Duration busy_;
  absl::flat_hash_map<std::string, sqlite3_stmt*> statements_;
};

class SqlitePool {
 public:
  SqlitePool(std::string path, absl::Duration busy)
      : path_(std::move(path)), busy_(busy) {}

  // Returns the connection to the pool on destruction.
  class Lease {
   public:
    Lease(SqlitePool* pool, std::unique_ptr<SqliteDb> db, uint64_t generation)
        : pool_(pool), db_(std::move(db)), generation_(generation) {}
    Lease(Lease&&) = default;
    ~Lease();
    SqliteDb* operator->() { return db_.get(); }
    SqliteDb& operator*() { return *db_; }

   private:
    SqlitePool* pool_;
    std::unique_ptr<SqliteDb> db_;
    uint64_t generation_;
  };

  // An idle connection, or a new one. Errors come from opening.
  absl::StatusOr<Lease> Acquire();

  // Closes the idle connections, and those leased now when they come back:
  // for when the file at the path was replaced.
  void Reset();

 private:
  static constexpr size_t kMaxIdle = 8;
  const std::string path_;
  const absl::Duration busy_;
  absl::Mutex mu_;
  std::vector<std::unique_ptr<SqliteDb>> idle_ ABSL_GUARDED_BY(mu_);
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

// The payload that marks a Status as SQLite's report of a damaged file
// (SQLITE_CORRUPT, SQLITE_NOTADB): DataLoss with it is the index's damage,
// not a blob's.
inline constexpr char kCorruptionPayload[] = "kiln.cache/sqlite-corrupt";
bool IsCorruption(const absl::Status& status);

}  // namespace kiln::cache

#endif  // KILN_CACHE_SQLITE_DB_H_
