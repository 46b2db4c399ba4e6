// The value stored for one entry in the remote tier, and its key.
//
// Key: "<namespace>:v1:<64 hex>": one key per entry, so every operation is a
// single-key command and works unchanged on Redis Cluster; "v1" is this
// format's version, so daemons of different formats never read each other.
//
// Value: "KLNR", version 1, codec (raw | zstd), raw body size, body, and an
// HMAC-SHA256 with the cluster secret over the Redis key and everything
// before the MAC. The MAC is checked before anything is parsed or
// decompressed; then each blob's SHA-256 is checked against the digest it
// was published under. A poisoned, truncated or misplaced value is rejected.
#ifndef KILN_CACHE_REMOTE_ENTRY_CODEC_H_
#define KILN_CACHE_REMOTE_ENTRY_CODEC_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "cache/digest.h"
#include "cache/entry.h"
#include "cache/hmac.h"

namespace kiln::cache {

// The Redis key of `key` under `key_namespace`.
std::string RemoteKey(absl::string_view key_namespace, const Digest& key);

// InvalidArgument unless `key_namespace` is 1-64 characters of
// [A-Za-z0-9._-] (no ':' or braces, so keys stay unambiguous and hash
// evenly across cluster slots).
absl::Status ValidateNamespace(absl::string_view key_namespace);

struct RemoteEntry {
  EntryMetadata metadata;
  std::vector<Blob> blobs;
  absl::Time created;
};

// Encodes and signs `entry` for `remote_key` (which the MAC covers, so a
// value copied under another key is rejected). Compresses the body with zstd
// at `compression_level` when that saves space.
std::string EncodeRemoteEntry(const HmacSha256& mac,
                              absl::string_view remote_key, const Digest& key,
                              const RemoteEntry& entry, int compression_level);

// Verifies and decodes a value read from `remote_key`. DataLoss, with the
// reason, for anything that is not a well-formed, correctly signed entry for
// `key` whose blobs match their digests, or whose body exceeds `max_size`.
absl::StatusOr<RemoteEntry> DecodeRemoteEntry(const HmacSha256& mac,
                                              absl::string_view remote_key,
                                              const Digest& key,
                                              absl::string_view value,
                                              uint64_t max_size);

}  // namespace kiln::cache

#endif  // KILN_CACHE_REMOTE_ENTRY_CODEC_H_
