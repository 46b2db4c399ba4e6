// Bundles: export selected entries of a local store into one portable file,
// and import such a file into another store (CI prewarming per GPU model).
// The format is described in bundle_format.h.
#ifndef KILN_CACHE_BUNDLE_H_
#define KILN_CACHE_BUNDLE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "cache/bundle_format.h"
#include "cache/entry.h"
#include "cache/hmac.h"
#include "cache/local_store.h"

namespace kiln::cache {

struct BundleOptions {
  BundleLimits limits;
  int compression_level = 3;  // zstd level for members; 0 stores raw
  // The secret that signs exported bundles and that imported ones must be
  // signed with (as the Redis tier's entries are). Without it, exports are
  // unsigned and an import takes only the entries that vouch for their own
  // key: those with a key-text blob (LocalStoreOptions::key_text_blob) whose
  // SHA-256 is the key. Not owned; may be null.
  const HmacSha256* secret = nullptr;
};

struct ExportReport {
  int64_t entries = 0;
  int64_t members = 0;  // distinct blobs written
  uint64_t file_bytes = 0;
  // Entries that failed verification while being read (quarantined by the
  // store) and were left out.
  std::vector<Digest> skipped;
};

// Writes the entries matching `filter` to `path` (atomically: a temp file
// renamed into place). Every blob is verified as it is read. If
// filter.keys names keys that are not in the store, nothing is written and
// the error (NotFound) lists them. An empty selection is InvalidArgument.
absl::StatusOr<ExportReport> ExportBundle(LocalStore& store,
                                          const EntryFilter& filter,
                                          const std::string& path,
                                          const BundleOptions& options = {});

struct ImportReport {
  int64_t entries = 0;          // entries in the bundle
  int64_t imported = 0;         // written into the store
  int64_t already_present = 0;  // identical entry already there
  // A sound entry with other content was already stored under the key: it
  // is kept (an import never replaces one).
  int64_t kept_existing = 0;
  // Entries of an unsigned bundle that do not vouch for their key, with why.
  std::vector<std::pair<Digest, std::string>> refused;
  bool is_signed = false;  // signed, and verified against the secret
  int64_t members = 0;
  uint64_t bytes = 0;  // decoded member bytes verified
};

// Verifies the whole bundle (header, manifest checksum, every member's
// checksum and size, and the signature if options.secret is set) without
// touching any store. Problems are
// InvalidArgument (malformed, unsupported version, path traversal, oversized
// member) or DataLoss (checksum mismatch), with a message naming them;
// NotFound if there is no such file.
absl::StatusOr<ImportReport> VerifyBundle(const std::string& path,
                                          const BundleOptions& options = {});

// VerifyBundle(), and only if it passes, puts each entry into `store`
// (skipping identical ones, keeping any other sound entry already under the
// key, refusing entries an unsigned bundle cannot vouch for; imported
// entries start a fresh created and last-access time). A failed
// verification leaves the store untouched. With options.secret set, a
// bundle that is not signed with it is PermissionDenied.
absl::StatusOr<ImportReport> ImportBundle(LocalStore& store,
                                          const std::string& path,
                                          const BundleOptions& options = {});

}  // namespace kiln::cache

#endif  // KILN_CACHE_BUNDLE_H_
