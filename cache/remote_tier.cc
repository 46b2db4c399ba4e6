#include "cache/remote_tier.h"

#include <pthread.h>
#include <signal.h>

#include "absl/strings/str_cat.h"
#include "cache/status_macros.h"
#include "spdlog/spdlog.h"

namespace kiln::cache {

absl::StatusOr<std::unique_ptr<RemoteTier>> RemoteTier::Create(
    const RemoteTierOptions& options, CounterSink sink) {
  CACHE_ASSIGN_OR_RETURN(std::unique_ptr<RemoteStorage> storage,
                         CreateRemoteStorage(options.url, options.storage));
  return Create(std::move(storage), options, std::move(sink));
}

absl::StatusOr<std::unique_ptr<RemoteTier>> RemoteTier::Create(
    std::unique_ptr<RemoteStorage> storage, const RemoteTierOptions& options,
    CounterSink sink) {
  CACHE_RETURN_IF_ERROR(ValidateNamespace(options.key_namespace));
  absl::StatusOr<HmacSha256> mac = HmacSha256::Create(options.secret);
  if (!mac.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "remote cache ", storage->Describe(), ": ", mac.status().message()));
  }
  return std::unique_ptr<RemoteTier>(new RemoteTier(
      std::move(storage), options, *std::move(mac), std::move(sink)));
}

RemoteTier::RemoteTier(std::unique_ptr<RemoteStorage> storage,
                       RemoteTierOptions options, HmacSha256 mac,
                       CounterSink sink)
    : storage_(std::move(storage)),
      options_(std::move(options)),
      mac_(std::move(mac)),
      sink_(std::move(sink)) {
  worker_ = std::thread([this] { Run(); });
}

RemoteTier::~RemoteTier() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  worker_.join();
}

void RemoteTier::Count(const char* name, int64_t delta) {
  {
    absl::MutexLock lock(&mu_);
    counters_[name] += delta;
  }
  if (sink_) sink_(name, delta);
}

std::map<std::string, int64_t> RemoteTier::Counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

bool RemoteTier::InCooldown() const {
  absl::MutexLock lock(&mu_);
  return absl::Now() < down_until_;
}

bool RemoteTier::Available() {
  if (!InCooldown()) return true;
  Count(kRemoteSkipped);
  return false;
}

void RemoteTier::Failed(const absl::Status& status, absl::string_view what) {
  Count(absl::IsDeadlineExceeded(status) ? kRemoteTimeouts : kRemoteErrors);
  bool first;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = absl::Now();
    first = now >= down_until_;
    down_until_ = now + options_.cooldown;
  }
  if (first) {
    // Backend messages carry the redacted URL only.
    spdlog::warn("remote cache {}: {} failed ({}); skipping it for {}",
                 storage_->Describe(), std::string(what),
                 std::string(status.message()),
                 absl::FormatDuration(options_.cooldown));
  }
}

std::optional<RemoteEntry> RemoteTier::Get(const Digest& key) {
  if (!Available()) return std::nullopt;
  const std::string remote_key = RemoteKey(options_.key_namespace, key);
  absl::StatusOr<std::optional<std::string>> value = storage_->Get(remote_key);
  if (!value.ok()) {
    Failed(value.status(), "get");
    return std::nullopt;
  }
  if (!value->has_value()) {
    Count(kRemoteMisses);
    return std::nullopt;
  }
  absl::StatusOr<RemoteEntry> entry = DecodeRemoteEntry(
      mac_, remote_key, key, **value, options_.max_entry_size);
  if (!entry.ok()) {
    Count(kRemoteRejected);
    spdlog::warn("remote cache {}: {}: {}", storage_->Describe(), remote_key,
                 std::string(entry.status().message()));
    return std::nullopt;
  }
  Count(kRemoteHits);
  return *std::move(entry);
}

void RemoteTier::Put(const Digest& key, RemoteEntry entry) {
  uint64_t bytes = 0;
  for (const Blob& blob : entry.blobs) bytes += blob.data.size();
  bool dropped = false;
  {
    absl::MutexLock lock(&mu_);
    if (absl::Now() < down_until_ || bytes > options_.max_entry_size ||
        queue_.size() >= options_.max_pending_puts ||
        queued_bytes_ + bytes > options_.max_pending_bytes) {
      dropped = true;
    } else {
      queued_bytes_ += bytes;
      queue_.push_back(Job{key, std::move(entry), bytes});
    }
  }
  if (dropped) Count(kRemotePutsDropped);
}

void RemoteTier::Remove(const Digest& key) {
  absl::MutexLock lock(&mu_);
  if (queue_.size() < options_.max_pending_puts) {
    queue_.push_back(Job{key, std::nullopt, 0});
  }
}

void RemoteTier::Flush() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](RemoteTier* t) ABSL_NO_THREAD_SAFETY_ANALYSIS {
        return t->stop_ || (t->queue_.empty() && !t->busy_);
      },
      this));
}

void RemoteTier::Run() {
  // This thread only talks to the network; SIGPIPE stays blocked on it.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  while (true) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](RemoteTier* t) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return t->stop_ || !t->queue_.empty();
          },
          this));
      if (stop_) return;
      job = std::move(queue_.front());
      queue_.pop_front();
      queued_bytes_ -= job.bytes;
      busy_ = true;
    }
    const std::string remote_key = RemoteKey(options_.key_namespace, job.key);
    if (!Available()) {
      if (job.entry) Count(kRemotePutsDropped);
    } else if (job.entry) {
      std::string value = EncodeRemoteEntry(
          mac_, remote_key, job.key, *job.entry, options_.compression_level);
      absl::Status s = storage_->Put(remote_key, value);
      if (s.ok()) {
        Count(kRemotePuts);
      } else {
        Failed(s, "put");
      }
    } else {
      absl::Status s = storage_->Remove(remote_key);
      if (!s.ok()) Failed(s, "remove");
    }
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

}  // namespace kiln::cache
