// RemoteStorage: the tiny interface every remote backend implements (ccache's
// model): get, put and remove of opaque values under string keys, failures
// reported as "timeout" or "error". Signing, encoding, cooldown and counting
// live above it, in RemoteTier, so a backend only moves bytes.
#ifndef KILN_CACHE_REMOTE_STORAGE_H_
#define KILN_CACHE_REMOTE_STORAGE_H_

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace kiln::cache {

struct RemoteStorageOptions {
  absl::Duration connect_timeout = absl::Milliseconds(200);
  absl::Duration operation_timeout = absl::Seconds(1);
  // Expiry set on every put; zero means none (rely on the server's
  // maxmemory-policy, e.g. allkeys-lru).
  absl::Duration ttl = absl::ZeroDuration();
};

class RemoteStorage {
 public:
  virtual ~RemoteStorage() = default;

  // The value under `key`, or nullopt if there is none. Errors:
  // DeadlineExceeded for a timeout, Unavailable for anything else (refused
  // connection, protocol error, server error). Thread-safe.
  virtual absl::StatusOr<std::optional<std::string>> Get(
      absl::string_view key) = 0;

  // Stores `value` under `key` (overwriting). Same errors as Get.
  virtual absl::Status Put(absl::string_view key, absl::string_view value) = 0;

  // Deletes `key`; absent is fine. Same errors as Get.
  virtual absl::Status Remove(absl::string_view key) = 0;

  // The two atomic operations of compile leases (RemoteTier::AcquireLease).
  // A backend without them answers Unimplemented, and every host then
  // compiles its own misses.
  //
  // Sets `key` to `value`, expiring after `ttl`, only if `key` is absent.
  // True if it is now `value` (set by this call, or already holding exactly
  // `value`); false if it holds another value, which goes to `holder` when
  // that is not null. Same errors as Get.
  virtual absl::StatusOr<bool> SetIfAbsent(absl::string_view key,
                                           absl::string_view value,
                                           absl::Duration ttl,
                                           std::string* holder);
  // Only if `key` holds `expected`: replaces it with `value` expiring after
  // `ttl`, or deletes it when `value` is empty. True if it held `expected`.
  // Same errors as Get.
  virtual absl::StatusOr<bool> ReplaceIf(absl::string_view key,
                                         absl::string_view expected,
                                         absl::string_view value,
                                         absl::Duration ttl);

  // Where this backend points, safe for logs (no secrets).
  virtual std::string Describe() const = 0;
};

// Creates the backend for `url` by its scheme: redis://, redis+unix://.
// InvalidArgument for an unknown scheme or a malformed URL (message
// redacted). Does not connect: the first operation does, so a cache with an
// unreachable remote still opens.
absl::StatusOr<std::unique_ptr<RemoteStorage>> CreateRemoteStorage(
    absl::string_view url, const RemoteStorageOptions& options);

}  // namespace kiln::cache

#endif  // KILN_CACHE_REMOTE_STORAGE_H_
