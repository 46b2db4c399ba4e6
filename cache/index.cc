#include "cache/index.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cache/status_macros.h"

namespace kiln::cache {
namespace {

constexpr char kEntryColumns[] =
    "key, kernel_name, target_arch, gpu_sku, extra, size, created_ms, "
    "last_access_ms";

// Reads the kEntryColumns of the current row; the key was validated when it
// was written, so a bad one means a damaged index.
absl::StatusOr<EntryInfo> EntryFromRow(const Statement& stmt) {
  EntryInfo info;
  CACHE_ASSIGN_OR_RETURN(info.key, Digest::Parse(stmt.Text(0), "indexed key"));
  info.metadata.kernel_name = stmt.Text(1);
  info.metadata.target_arch = stmt.Text(2);
  info.metadata.gpu_sku = stmt.Text(3);
  info.metadata.extra = stmt.Text(4);
  info.size = static_cast<uint64_t>(stmt.Int(5));
  info.created = FromMillis(stmt.Int(6));
  info.last_access = FromMillis(stmt.Int(7));
  return info;
}

absl::StatusOr<std::vector<Digest>> DigestColumn(Statement& stmt) {
  std::vector<Digest> out;
  while (true) {
    CACHE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return out;
    CACHE_ASSIGN_OR_RETURN(Digest d,
                           Digest::Parse(stmt.Text(0), "indexed digest"));
    out.push_back(d);
  }
}

}  // namespace

int64_t ToMillis(absl::Time t) { return absl::ToUnixMillis(t); }
absl::Time FromMillis(int64_t ms) { return absl::FromUnixMillis(ms); }

absl::StatusOr<std::vector<BlobInfo>> IndexTxn::BlobsOf(const Digest& key) {
  CACHE_ASSIGN_OR_RETURN(
      Statement stmt,
      db_.Prepare("SELECT name, digest, size FROM entry_blobs WHERE key = ?1 "
                  "ORDER BY position"));
  stmt.Bind(1, key.hex());
  std::vector<BlobInfo> blobs;
  while (true) {
    CACHE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return blobs;
    BlobInfo blob;
    blob.name = stmt.Text(0);
    CACHE_ASSIGN_OR_RETURN(blob.digest,
                           Digest::Parse(stmt.Text(1), "indexed digest"));
    blob.size = static_cast<uint64_t>(stmt.Int(2));
    blobs.push_back(std::move(blob));
  }
}

absl::StatusOr<std::optional<EntryInfo>> IndexTxn::FindEntry(
    const Digest& key) {
  std::optional<EntryInfo> info;
  {
    CACHE_ASSIGN_OR_RETURN(
        Statement stmt,
        db_.Prepare(absl::StrCat("SELECT ", kEntryColumns,
                                 " FROM entries WHERE key = ?1")));
    stmt.Bind(1, key.hex());
    CACHE_ASSIGN_OR_RETURN(bool row, stmt.Step());
    if (!row) return info;
    CACHE_ASSIGN_OR_RETURN(info, EntryFromRow(stmt));
  }
  CACHE_ASSIGN_OR_RETURN(info->blobs, BlobsOf(key));
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
      CACHE_ASSIGN_OR_RETURN(EntryInfo info, EntryFromRow(stmt));
      out.push_back(std::move(info));
    }
  }
  for (EntryInfo& info : out) {
    CACHE_ASSIGN_OR_RETURN(info.blobs, BlobsOf(info.key));
  }
  return out;
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
    CACHE_ASSIGN_OR_RETURN(Digest d,
                           Digest::Parse(stmt.Text(0), "indexed digest"));
    out.emplace_back(d, static_cast<uint64_t>(stmt.Int(1)));
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
  CACHE_ASSIGN_OR_RETURN(
      Statement entry,
      db_.Prepare(absl::StrCat("INSERT INTO entries(", kEntryColumns,
                               ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)")));
  entry.Bind(1, info.key.hex())
      .Bind(2, info.metadata.kernel_name)
      .Bind(3, info.metadata.target_arch)
      .Bind(4, info.metadata.gpu_sku)
      .Bind(5, info.metadata.extra)
      .Bind(6, static_cast<int64_t>(info.size))
      .Bind(7, ToMillis(info.created))
      .Bind(8, ToMillis(info.last_access));
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

absl::StatusOr<std::optional<std::vector<Digest>>> IndexTxn::DeleteEntry(
    const Digest& key) {
  std::vector<Digest> digests;
  {
    CACHE_ASSIGN_OR_RETURN(
        Statement stmt,
        db_.Prepare("SELECT digest FROM entry_blobs WHERE key = ?1"));
    stmt.Bind(1, key.hex());
    CACHE_ASSIGN_OR_RETURN(digests, DigestColumn(stmt));
  }
  CACHE_ASSIGN_OR_RETURN(Statement del,
                         db_.Prepare("DELETE FROM entries WHERE key = ?1"));
  del.Bind(1, key.hex());
  CACHE_RETURN_IF_ERROR(del.Run());
  if (db_.changes() == 0) return std::nullopt;
  CACHE_ASSIGN_OR_RETURN(Statement del_blobs,
                         db_.Prepare("DELETE FROM entry_blobs WHERE key = ?1"));
  del_blobs.Bind(1, key.hex());
  CACHE_RETURN_IF_ERROR(del_blobs.Run());
  return digests;
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
