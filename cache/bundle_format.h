// The bundle file format (version 1): portable prewarm files, e.g. one per
// GPU model built in CI, imported into any cache directory.
//
//   header    64 bytes: "KILNBNDL", u32 version, u32 flags (0),
//             u64 manifest offset, u64 manifest size, SHA-256 of the manifest
//   members   the blobs, each stored once (raw or zstd), back to back
//   manifest  text, at the end of the file (or just before the signature of
//             a signed bundle, see kBundleSigned):
//               kiln-bundle 1
//               created <unix ms>
//               member blobs/<sha256> <offset> <stored size> raw|zstd <size>
//               <sha256> entry <key> <created ms> <kernel> <arch> <sku> <extra>
//               blob <name> <member name>        (one per blob, after its
//               entry) end
//             Text fields are percent-encoded; "-" is the empty string.
//
// Member names are paths inside the bundle. The parser refuses traversal
// ("..", absolute paths), members past the size limit or outside the member
// area, checksums that do not match the name, unknown versions, and any
// malformed or truncated manifest, each with a message naming the problem.
#ifndef KILN_CACHE_BUNDLE_FORMAT_H_
#define KILN_CACHE_BUNDLE_FORMAT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cache/compression.h"
#include "cache/digest.h"
#include "cache/entry.h"

namespace kiln::cache {

inline constexpr uint32_t kBundleVersion = 1;
inline constexpr size_t kBundleHeaderSize = 64;

struct BundleLimits {
  uint64_t max_member_size = 1ull << 30;
  uint64_t max_manifest_size = 64ull << 20;
  size_t max_entries = 1000000;
};

// Header flag: the manifest is followed by kBundleSignatureSize bytes, an
// HMAC-SHA256 over kBundleSignatureContext and the manifest's SHA-256 (which
// covers every member's checksum, hence all of the content).
inline constexpr uint32_t kBundleSigned = 1;
inline constexpr size_t kBundleSignatureSize = 32;
inline constexpr char kBundleSignatureContext[] = "kiln-bundle-signature-v1";

struct BundleHeader {
  uint32_t version = kBundleVersion;
  uint32_t flags = 0;  // kBundleSigned or 0
  uint64_t manifest_offset = 0;
  uint64_t manifest_size = 0;
  Digest manifest_sha256;
};

struct BundleMember {
  std::string name;  // "blobs/<sha256>"
  uint64_t offset = 0;
  uint64_t stored_size = 0;
  Codec codec = Codec::kRaw;
  uint64_t size = 0;
  Digest sha256;  // of the decoded content; equals the digest in the name
};

struct BundleEntry {
  Digest key;
  absl::Time created;
  EntryMetadata metadata;
  std::vector<std::pair<std::string, size_t>> blobs;  // name, member index
};

struct BundleManifest {
  absl::Time created;
  std::vector<BundleMember> members;
  std::vector<BundleEntry> entries;
};

std::string EncodeBundleHeader(const BundleHeader& header);
// InvalidArgument for a file that is not a bundle or has an unsupported
// version; `file_size` bounds the manifest location.
absl::StatusOr<BundleHeader> ParseBundleHeader(absl::string_view bytes,
                                               uint64_t file_size,
                                               const BundleLimits& limits);

std::string EncodeBundleManifest(const BundleManifest& manifest);
// Parses and validates the manifest; `members_end` is where the member area
// ends (the manifest offset). InvalidArgument naming the line and problem.
absl::StatusOr<BundleManifest> ParseBundleManifest(absl::string_view text,
                                                   uint64_t members_end,
                                                   const BundleLimits& limits);

// OK if `name` is a safe relative path inside the bundle: no empty, "." or
// ".." components, not absolute, no backslash or control characters.
absl::Status ValidateMemberPath(absl::string_view name);

}  // namespace kiln::cache

#endif  // KILN_CACHE_BUNDLE_FORMAT_H_
