// Cache: what the daemon uses. The local store, plus optionally the shared
// remote tier: reads go local first, then remote, and a remote hit is
// written back into the local store (backfill); puts go to the local store
// synchronously and to the remote tier in the background.
//
// Remote trouble never reaches the caller: only local errors are returned.
// Thread-safe; any number of Cache objects and processes may share one
// directory.
#ifndef KILN_CACHE_CACHE_H_
#define KILN_CACHE_CACHE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "cache/entry.h"
#include "cache/local_store.h"
#include "cache/remote_tier.h"

namespace kiln::cache {

struct CacheOptions {
  LocalStoreOptions local;
  // Set to enable the remote tier.
  std::optional<RemoteTierOptions> remote;
};

// Counter name: remote hits written into the local store.
inline constexpr char kBackfills[] = "backfills";

class Cache {
 public:
  // Opens the local store in `dir` and creates the remote tier (without
  // connecting). Errors: those of LocalStore::Open, and InvalidArgument for
  // bad remote options (URL, secret, namespace; messages redacted).
  static absl::StatusOr<std::unique_ptr<Cache>> Open(const std::string& dir,
                                                     CacheOptions options);
  // Same with a given remote tier (or none), e.g. over a fake backend.
  static absl::StatusOr<std::unique_ptr<Cache>> Open(
      const std::string& dir, LocalStoreOptions local,
      std::unique_ptr<RemoteTier> remote);
  // Sends the queued remote puts first (see RemoteTier::Flush).
  ~Cache();

  // Which tier answered a Get.
  enum class Tier { kLocal, kRemote };

  // Local hit, else remote hit (backfilled locally), else NotFound. Only
  // local I/O problems are errors. `record_use` as LocalStore::Get; when
  // `answered` is not null it is set to the tier of a hit.
  absl::StatusOr<Entry> Get(const Digest& key, bool record_use = true,
                            Tier* answered = nullptr);

  // Stores locally (errors as LocalStore::Put) and queues the remote put.
  absl::Status Put(const Digest& key, const EntryData& data);

  // Removes locally and queues a remote delete. NotFound if there was no
  // local entry (the remote delete is queued anyway).
  absl::Status Remove(const Digest& key);

  LocalStore& local() { return *local_; }
  RemoteTier* remote() { return remote_.get(); }

 private:
  Cache(std::unique_ptr<LocalStore> local, std::unique_ptr<RemoteTier> remote)
      : local_(std::move(local)), remote_(std::move(remote)) {}

  std::unique_ptr<LocalStore> local_;
  std::unique_ptr<RemoteTier> remote_;  // may be null
};

}  // namespace kiln::cache

#endif  // KILN_CACHE_CACHE_H_
