// Entry: what the cache stores under one key: one or more named blobs plus
// metadata. Generic (the cache knows nothing of compilers), but with the
// fields its users search by: kernel name, target arch and GPU SKU.
#ifndef KILN_CACHE_ENTRY_H_
#define KILN_CACHE_ENTRY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "cache/digest.h"

namespace kiln::cache {

// Searchable, human-readable description of an entry. All fields are
// optional; kLimits below bound their sizes.
struct EntryMetadata {
  std::string kernel_name;  // e.g. "matmul_bf16"
  std::string target_arch;  // e.g. "sm_90a", "gfx942", "x86_64"
  std::string gpu_sku;      // e.g. "NVIDIA H100 80GB HBM3"; empty if any SKU
  std::string extra;        // free-form text or JSON, opaque to the cache

  friend bool operator==(const EntryMetadata&, const EntryMetadata&) = default;
};

// One named piece of an entry ("binary", "launch.json", ...).
struct Blob {
  std::string name;
  std::string data;

  friend bool operator==(const Blob&, const Blob&) = default;
};

// What a caller hands to Put(): metadata and the blobs, in caller order.
struct EntryData {
  EntryMetadata metadata;
  std::vector<Blob> blobs;
};

// Where and how big one blob of a stored entry is.
struct BlobInfo {
  std::string name;
  Digest digest;  // SHA-256 of the blob's bytes; also its file name
  uint64_t size = 0;

  friend bool operator==(const BlobInfo&, const BlobInfo&) = default;
};

// A stored entry without its bytes: what Stat() and List() return.
struct EntryInfo {
  Digest key;
  EntryMetadata metadata;
  std::vector<BlobInfo> blobs;  // in the order they were put
  uint64_t size = 0;            // sum of blob sizes
  absl::Time created;
  absl::Time last_access;
  // Empty for a sound entry. Otherwise what is wrong with its index rows (a
  // seal that does not match, an unreadable digest, ...): such an entry is
  // never served, and List() reports it so that it can be seen and removed.
  std::string damage;
};

// A stored entry with its verified bytes: what Get() returns.
struct Entry {
  EntryInfo info;
  std::vector<Blob> blobs;  // same order as info.blobs

  // The blob called `name`, or nullptr.
  const Blob* Find(absl::string_view name) const;
};

// Selects entries for List() and bundle export. Empty fields match
// everything; set fields must all match (exact, case-sensitive). A non-empty
// `keys` restricts the result to those keys.
struct EntryFilter {
  std::string kernel_name;
  std::string target_arch;
  std::string gpu_sku;
  std::vector<Digest> keys;
  size_t limit = 0;  // 0: no limit; otherwise the most recently used first
};

struct EntryLimits {
  size_t max_blobs = 64;
  size_t max_blob_name = 128;
  size_t max_field = 1024;         // kernel_name, target_arch, gpu_sku
  size_t max_extra = 1024 * 1024;  // free-form metadata
  uint64_t max_blob_size = 1ull << 30;
};
inline constexpr EntryLimits kLimits;

// OK for a well-formed blob name: 1-128 characters from [A-Za-z0-9._-],
// neither "." nor "..". Names end up as file names in extract tools, so they
// are kept boring.
absl::Status ValidateBlobName(absl::string_view name);

// Validates what Put() is given: 1-64 blobs with valid, unique names, sizes
// and metadata within kLimits. InvalidArgument says which rule was broken.
absl::Status ValidateEntryData(const EntryData& data);

}  // namespace kiln::cache

#endif  // KILN_CACHE_ENTRY_H_
