#include "cache/index.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cache/status_macros.h"

namespace kiln::cache {
namespace {

constexpr char kEntryColumns[] =
    "key, kernel_name, target_arch, gpu_sku, extra, size, created_ms, "
    "last_access_ms, seal";

// Reads the kEntryColumns of the current row but the key (which the caller
// knows or parses) and the seal.
EntryInfo EntryFromRow(const Statement& stmt, const Digest& key) {
  EntryInfo info;
  info.key = key;
  info.metadata.kernel_name = stmt.Text(1);
  info.metadata.target_arch = stmt.Text(2);
  info.metadata.gpu_sku = stmt.Text(3);
  info.metadata.extra = stmt.Text(4);
  info.size = static_cast<uint64_t>(stmt.Int(5));
  info.created = FromMillis(stmt.Int(6));
  info.last_access = FromMillis(stmt.Int(7));
  return info;
}

// The digests in column 0 of every row; values that are not digests (a
// damaged row) are skipped: PurgeMalformedRows and Verify() deal with them.
absl::StatusOr<std::vector<Digest>> DigestColumn(Statement& stmt) {
  std::vector<Digest> out;
  while (true) {
    CACHE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return out;
    absl::StatusOr<Digest> d = Digest::Parse(stmt.Text(0), "indexed digest");
    if (d.ok()) out.push_back(*d);
  }
}

constexpr char kUnsealed[] = "seal missing: its index row is unsealed";

void AppendField(std::string* out, absl::string_view field) {
  absl::StrAppend(out, field.size(), ":", field, ";");
}

// SQL true for a text column that is not 64 lowercase hex characters.
std::string NotADigest(absl::string_view column) {
  return absl::StrCat("(length(", column, ") != 64 OR ", column,
                      " GLOB '*[^0-9a-f]*')");
}

}  // namespace

int64_t ToMillis(absl::Time t) { return absl::ToUnixMillis(t); }
absl::Time FromMillis(int64_t ms) { return absl::FromUnixMillis(ms); }

std::string EntrySeal(const EntryInfo& info) {
  std::string text = "kiln-entry-seal-v1\n";
  AppendField(&text, info.key.hex());
  AppendField(&text, info.metadata.kernel_name);
  AppendField(&text, info.metadata.target_arch);
  AppendField(&text, info.metadata.gpu_sku);
  AppendField(&text, info.metadata.extra);
  AppendField(&text, absl::StrCat(info.size));
  AppendField(&text, absl::StrCat(info.blobs.size()));
  for (const BlobInfo& blob : info.blobs) {
    AppendField(&text, blob.name);
    AppendField(&text, blob.digest.hex());
    AppendField(&text, absl::StrCat(blob.size));
  }
  return Digest::Of(text).hex();
}

absl::Status SealUnsealedEntries(SqliteDb& db) {
  std::vector<Digest> keys;
  {
    CACHE_ASSIGN_OR_RETURN(
        Statement stmt, db.Prepare("SELECT key FROM entries WHERE seal = ''"));
    CACHE_ASSIGN_OR_RETURN(keys, DigestColumn(stmt));
  }
  IndexTxn txn(db);
  for (const Digest& key : keys) {
    CACHE_ASSIGN_OR_RETURN(std::optional<EntryInfo> info, txn.FindEntry(key));
    // A row that was already unreadable stays unsealed, hence damaged.
    if (!info || info->damage != kUnsealed) continue;
    info->damage.clear();
    CACHE_ASSIGN_OR_RETURN(
        Statement update,
        db.Prepare("UPDATE entries SET seal = ?2 WHERE key = ?1"));
    update.Bind(1, key.hex()).Bind(2, EntrySeal(*info));
    CACHE_RETURN_IF_ERROR(update.Run());
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> PurgeMalformedRows(SqliteDb& db) {
  int64_t purged = 0;
  for (const std::string& sql : {
           absl::StrCat("DELETE FROM entries WHERE ", NotADigest("key")),
           absl::StrCat("DELETE FROM entry_blobs WHERE ", NotADigest("key"),
                        " OR ", NotADigest("digest"),
                        " OR NOT EXISTS (SELECT 1 FROM entries WHERE "
                        "entries.key = entry_blobs.key)"),
           absl::StrCat("DELETE FROM blobs WHERE ", NotADigest("digest")),
       }) {
    CACHE_ASSIGN_OR_RETURN(Statement stmt, db.Prepare(sql));
    CACHE_RETURN_IF_ERROR(stmt.Run());
    purged += db.changes();
  }
  return purged;
}

absl::StatusOr<std::vector<BlobInfo>> IndexTxn::BlobsOf(const Digest& key,
                                                        std::string* damage) {
  CACHE_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("SELECT name, digest, size, position FROM entry_blobs "
                  "WHERE key = ?1 ORDER BY position"));
  stmt.Bind(1, key.hex());
  std::vector<BlobInfo> blobs;
  while (true) {
    CACHE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return blobs;
    BlobInfo blob;
    blob.name = stmt.Text(0);
    absl::StatusOr<Digest> digest = Digest::Parse(stmt.Text(1), "digest");
    if (!digest.ok()) {
      if (damage->empty()) {
        *damage = absl::StrCat("blob ", blob.name.substr(0, 64),
                               " has an unreadable digest");
      }
      continue;
    }
    if (stmt.Int(3) != static_cast<int64_t>(blobs.size()) && damage->empty()) {
      *damage = "its blob list has a gap";
    }
    blob.digest = *digest;
    blob.size = static_cast<uint64_t>(stmt.Int(2));
    blobs.push_back(std::move(blob));
  }
}

absl::Status IndexTxn::Complete(EntryInfo& info, absl::string_view seal) {
  CACHE_ASSIGN_OR_RETURN(info.blobs, BlobsOf(info.key, &info.damage));
  if (!info.damage.empty()) return absl::OkStatus();
  if (seal.empty()) {
    info.damage = kUnsealed;
  } else if (EntrySeal(info) != seal) {
    info.damage =
        "seal mismatch: its index rows are not the ones written for its key";
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<EntryInfo>> IndexTxn::FindEntry(
    const Digest& key) {
  std::optional<EntryInfo> info;
  std::string seal;
  {
    CACHE_ASSIGN_OR_RETURN(
        Statement stmt,
        db_.Prepare(absl::StrCat("SELECT ", kEntryColumns,
                                 " FROM entries WHERE key = ?1")));
    stmt.Bind(1, key.hex());
    CACHE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return info;
    info = EntryFromRow(stmt, key);
    seal = stmt.Text(8);
  }
  CACHE_RETURN_IF_ERROR(Complete(*info, seal));
  return info;
}

absl::StatusOr<std::vector<EntryInfo>> IndexTxn::ListEntries(
    const EntryFilter& filter) {
  auto matches = [&](const EntryMetadata& m) {
    return (filter.kernel_name.empty() ||
            m.kernel_name == filter.kernel_name) &&
           (filter.target_arch.empty() ||
            m.target_arch == filter.target_arch) &&
           (filter.gpu_sku.empty() || m.gpu_sku == filter.gpu_sku);
  };
  std::vector<EntryInfo> out;
  if (!filter.keys.empty()) {
    for (const Digest& key : filter.keys) {
      if (filter.limit != 0 && out.size() >= filter.limit) break;
      CACHE_ASSIGN_OR_RETURN(std::optional<EntryInfo> info, FindEntry(key));
      if (info && matches(info->metadata)) out.push_back(*std::move(info));
    }
    return out;
  }
  std::vector<std::string> seals;
  {
    CACHE_ASSIGN_OR_RETURN(
        Statement stmt,
        db_.Prepare(absl::StrCat(
            "SELECT ", kEntryColumns,
            " FROM entries WHERE (?1 = '' OR kernel_name = ?1) AND "
            "(?2 = '' OR target_arch = ?2) AND (?3 = '' OR gpu_sku = ?3) "
            "ORDER BY last_access_ms DESC, key LIMIT ?4")));
    stmt.Bind(1, filter.kernel_name)
        .Bind(2, filter.target_arch)
        .Bind(3, filter.gpu_sku)
        .Bind(4, filter.limit == 0 ? int64_t{-1}
                                   : static_cast<int64_t>(filter.limit));
    while (true) {
      CACHE_ASSIGN_OR_RETURN(bool row, stmt.Step());
      if (!row) break;
      absl::StatusOr<Digest> key = Digest::Parse(stmt.Text(0), "key");
      if (!key.ok()) continue;
      out.push_back(EntryFromRow(stmt, *key));
      seals.push_back(stmt.Text(8));
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    CACHE_RETURN_IF_ERROR(Complete(out[i], seals[i]));
  }
  return out;
}

absl::StatusOr<std::string> IndexTxn::IntegrityProblem() {
  CACHE_ASSIGN_OR_RETURN(Statement stmt,
                         db_.Prepare("PRAGMA integrity_check(8)"));
  std::string problem;
  while (true) {
    CACHE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) break;
    std::string line = stmt.Text(0);
    if (line == "ok") continue;
    absl::StrAppend(&problem, problem.empty() ? "" : "; ", line.substr(0, 160));
  }
  return problem;
}

absl::StatusOr<std::vector<Digest>> IndexTxn::KeysReferencing(
    const Digest& digest) {
  CACHE_ASSIGN_OR_RETURN(Statement stmt,
                         db_.Prepare("SELECT DISTINCT key FROM entry_blobs "
                                     "WHERE digest = ?1 ORDER BY key"));
  stmt.Bind(1, digest.hex());
  return DigestColumn(stmt);
}

absl::StatusOr<bool> IndexTxn::BlobKnown(const Digest& digest) {
  CACHE_ASSIGN_OR_RETURN(Statement stmt,
                         db_.Prepare("SELECT 1 FROM blobs WHERE digest = ?1"));
  stmt.Bind(1, digest.hex());
  return stmt.Step();
}

absl::StatusOr<std::vector<std::pair<Digest, uint64_t>>> IndexTxn::AllBlobs() {
  CACHE_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("SELECT digest, disk_size FROM blobs ORDER BY digest"));
  std::vector<std::pair<Digest, uint64_t>> out;
  while (true) {
    CACHE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return out;
    absl::StatusOr<Digest> d = Digest::Parse(stmt.Text(0), "indexed digest");
    if (d.ok()) out.emplace_back(*d, static_cast<uint64_t>(stmt.Int(1)));
  }
}

absl::StatusOr<std::vector<Digest>> IndexTxn::DanglingReferences() {
  CACHE_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("SELECT DISTINCT digest FROM entry_blobs WHERE NOT EXISTS "
                  "(SELECT 1 FROM blobs WHERE blobs.digest = "
                  "entry_blobs.digest)"));
  return DigestColumn(stmt);
}

absl::StatusOr<std::vector<Digest>> IndexTxn::UnreferencedBlobs(int64_t limit) {
  CACHE_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("SELECT digest FROM blobs WHERE NOT EXISTS (SELECT 1 FROM "
                  "entry_blobs WHERE entry_blobs.digest = blobs.digest) "
                  "LIMIT ?1"));
  stmt.Bind(1, limit);
  return DigestColumn(stmt);
}

absl::StatusOr<std::vector<Digest>> IndexTxn::LeastRecentlyUsed(
    int64_t limit, std::optional<absl::Time> before) {
  CACHE_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("SELECT key FROM entries WHERE last_access_ms < ?1 "
                  "ORDER BY last_access_ms, key LIMIT ?2"));
  stmt.Bind(1, before ? ToMillis(*before) : INT64_MAX).Bind(2, limit);
  return DigestColumn(stmt);
}

absl::StatusOr<IndexUsage> IndexTxn::Usage() {
  IndexUsage usage;
  {
    CACHE_ASSIGN_OR_RETURN(
        Statement stmt,
        db_.Prepare("SELECT COUNT(*), COALESCE(SUM(size), 0) FROM entries"));
    CACHE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (row) {
      usage.entries = stmt.Int(0);
      usage.entry_bytes = static_cast<uint64_t>(stmt.Int(1));
    }
  }
  CACHE_ASSIGN_OR_RETURN(auto counters, Counters());
  usage.disk_bytes = static_cast<uint64_t>(counters["disk_bytes"]);
  usage.blob_files = counters["blob_files"];
  return usage;
}

absl::StatusOr<uint64_t> IndexTxn::DiskBytes() {
  CACHE_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("SELECT value FROM counters WHERE name = 'disk_bytes'"));
  CACHE_ASSIGN_OR_RETURN(bool row, stmt.Step());
  return row ? static_cast<uint64_t>(stmt.Int(0)) : 0;
}

absl::StatusOr<std::map<std::string, int64_t>> IndexTxn::Counters() {
  CACHE_ASSIGN_OR_RETURN(Statement stmt,
                         db_.Prepare("SELECT name, value FROM counters"));
  std::map<std::string, int64_t> out;
  while (true) {
    CACHE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return out;
    out[stmt.Text(0)] = stmt.Int(1);
  }
}

absl::Status IndexTxn::AddBlob(const Digest& digest, uint64_t size,
                               uint64_t disk_size) {
  CACHE_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("INSERT OR IGNORE INTO blobs(digest, size, disk_size) "
                  "VALUES (?1, ?2, ?3)"));
  stmt.Bind(1, digest.hex())
      .Bind(2, static_cast<int64_t>(size))
      .Bind(3, static_cast<int64_t>(disk_size));
  return stmt.Run();
}

absl::Status IndexTxn::DeleteBlob(const Digest& digest) {
  CACHE_ASSIGN_OR_RETURN(Statement stmt,
                         db_.Prepare("DELETE FROM blobs WHERE digest = ?1"));
  stmt.Bind(1, digest.hex());
  return stmt.Run();
}

absl::StatusOr<std::vector<Digest>> IndexTxn::PutEntry(const EntryInfo& info) {
  CACHE_ASSIGN_OR_RETURN(std::optional<std::vector<Digest>> old,
                         DeleteEntry(info.key));
  CACHE_ASSIGN_OR_RETURN(Statement entry,
                         db_.Prepare(absl::StrCat(
                             "INSERT INTO entries(", kEntryColumns,
                             ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)")));
  entry.Bind(1, info.key.hex())
      .Bind(2, info.metadata.kernel_name)
      .Bind(3, info.metadata.target_arch)
      .Bind(4, info.metadata.gpu_sku)
      .Bind(5, info.metadata.extra)
      .Bind(6, static_cast<int64_t>(info.size))
      .Bind(7, ToMillis(info.created))
      .Bind(8, ToMillis(info.last_access))
      .Bind(9, EntrySeal(info));
  CACHE_RETURN_IF_ERROR(entry.Run());
  for (size_t i = 0; i < info.blobs.size(); ++i) {
    CACHE_ASSIGN_OR_RETURN(
        Statement blob,
        db_.Prepare("INSERT INTO entry_blobs(key, position, name, digest, "
                    "size) VALUES (?1, ?2, ?3, ?4, ?5)"));
    blob.Bind(1, info.key.hex())
        .Bind(2, static_cast<int64_t>(i))
        .Bind(3, info.blobs[i].name)
        .Bind(4, info.blobs[i].digest.hex())
        .Bind(5, static_cast<int64_t>(info.blobs[i].size));
    CACHE_RETURN_IF_ERROR(blob.Run());
  }
  return old.value_or(std::vector<Digest>{});
}

absl::StatusOr<std::vector<Digest>> IndexTxn::DeleteEntryRows(
    absl::string_view key) {
  std::vector<Digest> digests;
  {
    CACHE_ASSIGN_OR_RETURN(
        Statement stmt,
        db_.Prepare("SELECT digest FROM entry_blobs WHERE key = ?1"));
    stmt.Bind(1, key);
    CACHE_ASSIGN_OR_RETURN(digests, DigestColumn(stmt));
  }
  CACHE_ASSIGN_OR_RETURN(Statement del_blobs,
                         db_.Prepare("DELETE FROM entry_blobs WHERE key = ?1"));
  del_blobs.Bind(1, key);
  CACHE_RETURN_IF_ERROR(del_blobs.Run());
  CACHE_ASSIGN_OR_RETURN(Statement del,
                         db_.Prepare("DELETE FROM entries WHERE key = ?1"));
  del.Bind(1, key);
  CACHE_RETURN_IF_ERROR(del.Run());
  return digests;
}

absl::StatusOr<std::optional<std::vector<Digest>>> IndexTxn::DeleteEntry(
    const Digest& key) {
  CACHE_ASSIGN_OR_RETURN(Statement stmt,
                         db_.Prepare("SELECT 1 FROM entries WHERE key = ?1"));
  stmt.Bind(1, key.hex());
  CACHE_ASSIGN_OR_RETURN(bool exists, stmt.Step());
  if (!exists) return std::nullopt;
  return DeleteEntryRows(key.hex());
}

absl::Status IndexTxn::Touch(const Digest& key, absl::Time when) {
  CACHE_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("UPDATE entries SET last_access_ms = MAX(last_access_ms, ?2) "
                  "WHERE key = ?1"));
  stmt.Bind(1, key.hex()).Bind(2, ToMillis(when));
  return stmt.Run();
}

absl::Status IndexTxn::AddCounters(
    const std::map<std::string, int64_t>& deltas) {
  for (const auto& [name, delta] : deltas) {
    if (delta == 0) continue;
    CACHE_ASSIGN_OR_RETURN(
        Statement stmt,
        db_.Prepare("INSERT INTO counters(name, value) VALUES (?1, ?2) "
                    "ON CONFLICT(name) DO UPDATE SET value = value + ?2"));
    stmt.Bind(1, name).Bind(2, delta);
    CACHE_RETURN_IF_ERROR(stmt.Run());
  }
  return absl::OkStatus();
}

absl::Status IndexTxn::LogQuarantine(const Digest& digest,
                                     const std::vector<Digest>& keys,
                                     absl::string_view reason,
                                     absl::Time when) {
  CACHE_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("INSERT INTO quarantine_log(at_ms, digest, keys, reason) "
                  "VALUES (?1, ?2, ?3, ?4)"));
  stmt.Bind(1, ToMillis(when))
      .Bind(2, digest.hex())
      .Bind(3, absl::StrJoin(keys, ",",
                             [](std::string* out, const Digest& d) {
                               out->append(d.hex());
                             }))
      .Bind(4, reason);
  return stmt.Run();
}

}  // namespace kiln::cache
