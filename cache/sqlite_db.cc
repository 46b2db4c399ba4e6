#include "cache/sqlite_db.h"

#include <sqlite3.h>

#include <utility>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"

namespace kiln::cache {
namespace {

absl::Status CodeToStatus(int code, absl::string_view what,
                          absl::string_view detail) {
  std::string message = absl::StrCat(what, ": ", detail);
  switch (code & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return absl::UnavailableError(message);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: {
      absl::Status status = absl::DataLossError(message);
      status.SetPayload(kCorruptionPayload, absl::Cord("1"));
      return status;
    }
    case SQLITE_FULL:
      return absl::ResourceExhaustedError(message);
    case SQLITE_CANTOPEN:
      return absl::NotFoundError(message);
    case SQLITE_PERM:
    case SQLITE_READONLY:
    case SQLITE_AUTH:
      return absl::PermissionDeniedError(message);
    default:
      return absl::InternalError(message);
  }
}

}  // namespace

Statement::Statement(Statement&& other) noexcept
    : db_(other.db_), stmt_(std::exchange(other.stmt_, nullptr)) {}

Statement::~Statement() {
  if (stmt_ != nullptr) {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
}

Statement& Statement::Bind(int index, int64_t value) {
  sqlite3_bind_int64(stmt_, index, value);
  return *this;
}

Statement& Statement::Bind(int index, absl::string_view text) {
  sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()),
                    SQLITE_TRANSIENT);
  return *this;
}

absl::StatusOr<bool> Statement::Step() {
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  return db_->Error(absl::StrCat("sqlite step (", sqlite3_sql(stmt_), ")"));
}

absl::Status Statement::Run() {
  while (true) {
    absl::StatusOr<bool> row = Step();
    if (!row.ok()) return row.status();
    if (!*row) return absl::OkStatus();
  }
}

int64_t Statement::Int(int column) const {
  return sqlite3_column_int64(stmt_, column);
}

std::string Statement::Text(int column) const {
  const unsigned char* text = sqlite3_column_text(stmt_, column);
  int n = sqlite3_column_bytes(stmt_, column);
  if (text == nullptr) return "";
  return std::string(reinterpret_cast<const char*>(text), n);
}

absl::StatusOr<std::unique_ptr<SqliteDb>> SqliteDb::Open(
    const std::string& path, absl::Duration busy, bool create) {
  sqlite3* raw = nullptr;
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX;
  if (create) flags |= SQLITE_OPEN_CREATE;
  int rc = sqlite3_open_v2(path.c_str(), &raw, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string detail = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close_v2(raw);
    return CodeToStatus(rc, absl::StrCat("cannot open ", path), detail);
  }
  std::unique_ptr<SqliteDb> db(new SqliteDb(raw, busy));
  db->SetBusyTimeout(busy);
  // WAL lets readers run beside one writer, across processes. The mode is
  // stored in the file, so only the first open really switches it.
  if (absl::Status s = db->Exec("PRAGMA journal_mode=WAL;"); !s.ok()) return s;
  if (absl::Status s = db->Exec("PRAGMA synchronous=NORMAL;"); !s.ok()) {
    return s;
  }
  return db;
}

SqliteDb::~SqliteDb() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

absl::Status SqliteDb::Exec(absl::string_view sql) {
  std::string copy(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, copy.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string detail = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    return CodeToStatus(rc, "sqlite", detail);
  }
  return absl::OkStatus();
}

absl::StatusOr<Statement> SqliteDb::Prepare(absl::string_view sql) {
  auto it = statements_.find(sql);
  if (it == statements_.end()) {
    sqlite3_stmt* stmt = nullptr;
    int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                                SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return Error(absl::StrCat("sqlite prepare: ", sql));
    it = statements_.emplace(std::string(sql), stmt).first;
  }
  return Statement(this, it->second);
}

absl::Status SqliteDb::Transaction(bool write,
                                   const std::function<absl::Status()>& fn) {
  if (absl::Status s = Exec(write ? "BEGIN IMMEDIATE" : "BEGIN"); !s.ok()) {
    return s;
  }
  absl::Status status = fn();
  if (status.ok()) {
    status = Exec("COMMIT");
    if (status.ok()) return status;
  }
  // ROLLBACK fails only if SQLite already rolled back on its own.
  (void)Exec("ROLLBACK");
  return status;
}

void SqliteDb::SetBusyTimeout(absl::Duration busy) {
  busy_ = busy;
  sqlite3_busy_timeout(db_, static_cast<int>(absl::ToInt64Milliseconds(busy)));
}

int64_t SqliteDb::changes() const { return sqlite3_changes(db_); }

absl::Status SqliteDb::Error(absl::string_view what) const {
  return CodeToStatus(sqlite3_extended_errcode(db_), what, sqlite3_errmsg(db_));
}

SqlitePool::Lease::~Lease() {
  if (db_ == nullptr) return;
  absl::MutexLock lock(&pool_->mu_);
  // A connection opened before a Reset() is to the old file: close it.
  if (generation_ == pool_->generation_ && pool_->idle_.size() < kMaxIdle) {
    pool_->idle_.push_back(std::move(db_));
  }
}

absl::StatusOr<SqlitePool::Lease> SqlitePool::Acquire() {
  uint64_t generation;
  {
    absl::MutexLock lock(&mu_);
    generation = generation_;
    if (!idle_.empty()) {
      std::unique_ptr<SqliteDb> db = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(db), generation);
    }
  }
  absl::StatusOr<std::unique_ptr<SqliteDb>> db =
      SqliteDb::Open(path_, busy_, /*create=*/false);
  if (!db.ok()) return db.status();
  return Lease(this, *std::move(db), generation);
}

void SqlitePool::Reset() {
  std::vector<std::unique_ptr<SqliteDb>> closing;
  absl::MutexLock lock(&mu_);
  ++generation_;
  closing.swap(idle_);
}

bool IsCorruption(const absl::Status& status) {
  return status.GetPayload(kCorruptionPayload).has_value();
}

}  // namespace kiln::cache
