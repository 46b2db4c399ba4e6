#include "cache/cache.h"

#include "absl/strings/str_cat.h"
#include "cache/status_macros.h"
#include "spdlog/spdlog.h"

namespace kiln::cache {

absl::StatusOr<std::unique_ptr<Cache>> Cache::Open(const std::string& dir,
                                                   CacheOptions options) {
  CACHE_ASSIGN_OR_RETURN(std::unique_ptr<LocalStore> local,
                         LocalStore::Open(dir, options.local));
  std::unique_ptr<RemoteTier> remote;
  if (options.remote) {
    LocalStore* store = local.get();
    CACHE_ASSIGN_OR_RETURN(
        remote, RemoteTier::Create(*options.remote,
                                   [store](absl::string_view name, int64_t d) {
                                     store->AddCounter(name, d);
                                   }));
  }
  return std::unique_ptr<Cache>(new Cache(std::move(local), std::move(remote)));
}

absl::StatusOr<std::unique_ptr<Cache>> Cache::Open(
    const std::string& dir, LocalStoreOptions local_options,
    std::unique_ptr<RemoteTier> remote) {
  CACHE_ASSIGN_OR_RETURN(std::unique_ptr<LocalStore> local,
                         LocalStore::Open(dir, std::move(local_options)));
  return std::unique_ptr<Cache>(new Cache(std::move(local), std::move(remote)));
}

Cache::~Cache() {
  if (remote_ != nullptr) {
    // Send what is queued: bounded, since a failing backend enters its
    // cooldown and the rest of the queue is dropped at once.
    remote_->Flush();
    // Its worker counts into the local store, so it goes first.
    remote_.reset();
  }
}

absl::StatusOr<Entry> Cache::Get(const Digest& key, bool record_use,
                                 Tier* answered) {
  absl::StatusOr<Entry> local = local_->Get(key, record_use);
  if (answered != nullptr) *answered = Tier::kLocal;
  if (local.ok() || !absl::IsNotFound(local.status()) || remote_ == nullptr) {
    return local;
  }
  std::optional<RemoteEntry> remote = remote_->Get(key);
  if (!remote) return local;
  if (answered != nullptr) *answered = Tier::kRemote;
  EntryData data{std::move(remote->metadata), std::move(remote->blobs)};
  absl::Status backfill = local_->Put(key, data);
  if (backfill.ok()) {
    local_->AddCounter(kBackfills, 1);
  } else {
    spdlog::warn("cache {}: backfill of {} failed: {}", local_->dir(),
                 key.hex(), backfill.ToString());
  }
  Entry entry;
  entry.info.key = key;
  entry.info.metadata = std::move(data.metadata);
  entry.info.created = remote->created;
  entry.info.last_access = absl::Now();
  for (const Blob& blob : data.blobs) {
    entry.info.blobs.push_back(
        BlobInfo{blob.name, Digest::Of(blob.data), blob.data.size()});
    entry.info.size += blob.data.size();
  }
  entry.blobs = std::move(data.blobs);
  return entry;
}

absl::Status Cache::Put(const Digest& key, const EntryData& data) {
  CACHE_RETURN_IF_ERROR(local_->Put(key, data));
  if (remote_ != nullptr) {
    remote_->Put(key, RemoteEntry{data.metadata, data.blobs, absl::Now()});
  }
  return absl::OkStatus();
}

absl::Status Cache::Remove(const Digest& key) {
  if (remote_ != nullptr) remote_->Remove(key);
  return local_->Remove(key);
}

}  // namespace kiln::cache
