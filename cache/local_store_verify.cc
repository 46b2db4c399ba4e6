// LocalStore::Verify(): re-hash every blob, quarantine what fails.
#include <set>

#include "cache/index.h"
#include "cache/local_store.h"
#include "cache/status_macros.h"

namespace kiln::cache {

absl::StatusOr<VerifyReport> LocalStore::Verify() {
  VerifyReport report;
  // The file itself, then the rows, then the blobs they name.
  absl::Status checked = Read([&](IndexTxn& txn) -> absl::Status {
    CACHE_ASSIGN_OR_RETURN(report.index_problem, txn.IntegrityProblem());
    return absl::OkStatus();
  });
  if (absl::IsDataLoss(checked)) {
    report.index_problem = std::string(checked.message());
  } else if (!checked.ok()) {
    return checked;
  }
  CACHE_RETURN_IF_ERROR(Write([&](IndexTxn& txn) -> absl::Status {
    CACHE_ASSIGN_OR_RETURN(report.malformed_rows, PurgeMalformedRows(txn.db()));
    return absl::OkStatus();
  }));
  std::vector<EntryInfo> entries;
  CACHE_RETURN_IF_ERROR(Read([&](IndexTxn& txn) -> absl::Status {
    CACHE_ASSIGN_OR_RETURN(entries, txn.ListEntries(EntryFilter{}));
    return absl::OkStatus();
  }));
  for (const EntryInfo& info : entries) {
    std::string damage = info.damage;
    if (damage.empty() && !options_.key_text_blob.empty()) {
      for (const BlobInfo& blob : info.blobs) {
        if (blob.name != options_.key_text_blob) continue;
        absl::StatusOr<std::string> data = blobs_.Read(blob.digest);
        if (!data.ok()) break;  // the blob pass below deals with it
        Entry entry{info, {Blob{blob.name, *std::move(data)}}};
        damage = BlobDamage(entry);
      }
    }
    if (damage.empty()) continue;
    CACHE_RETURN_IF_ERROR(
        QuarantineEntry(info.key.hex(), damage, &report.damaged_entries));
  }
  std::vector<std::pair<Digest, uint64_t>> blobs;
  std::vector<Digest> dangling;
  // One snapshot of what should exist; the files are read outside any
  // transaction so a long verify never holds up checkpoints or writers.
  CACHE_RETURN_IF_ERROR(Read([&](IndexTxn& txn) -> absl::Status {
    CACHE_ASSIGN_OR_RETURN(blobs, txn.AllBlobs());
    CACHE_ASSIGN_OR_RETURN(dangling, txn.DanglingReferences());
    CACHE_ASSIGN_OR_RETURN(IndexUsage usage, txn.Usage());
    report.entries = usage.entries;
    return absl::OkStatus();
  }));
  std::set<Digest> known;
  for (const auto& [digest, disk_size] : blobs) {
    known.insert(digest);
    absl::StatusOr<std::string> data = blobs_.Read(digest);
    if (data.ok()) {
      ++report.blobs_checked;
      report.bytes_checked += data->size();
      continue;
    }
    if (!absl::IsNotFound(data.status()) && !absl::IsDataLoss(data.status())) {
      return data.status();
    }
    // HandleBadBlob re-checks under the lock: a blob swept by a concurrent
    // eviction since the snapshot is not a finding.
    CACHE_RETURN_IF_ERROR(
        HandleBadBlob(digest, data.status(), &report.quarantined).status());
  }
  // An entry whose blob has no row cannot be produced by this code; treat the
  // blob as missing so the entry is never served half-known.
  for (const Digest& digest : dangling) {
    CACHE_RETURN_IF_ERROR(
        HandleBadBlob(digest,
                      absl::DataLossError("entry references a blob the index "
                                          "does not know"),
                      &report.quarantined)
            .status());
  }
  CACHE_RETURN_IF_ERROR(blobs_.ForEach(
      [&](const BlobDirectory::FileInfo& file) {
        if (!known.contains(file.digest)) ++report.unreferenced_files;
      },
      &report.stray_files));
  return report;
}

}  // namespace kiln::cache
