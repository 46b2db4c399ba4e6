#include "cache/remote_tier.h"

#include <pthread.h>
#include <signal.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
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
      Job job;
      job.key = key;
      job.entry = std::move(entry);
      job.bytes = bytes;
      queue_.push_back(std::move(job));
    }
  }
  if (dropped) Count(kRemotePutsDropped);
}

void RemoteTier::Remove(const Digest& key) {
  absl::MutexLock lock(&mu_);
  if (queue_.size() < options_.max_pending_puts) {
    Job job;
    job.kind = Job::Kind::kRemove;
    job.key = key;
    queue_.push_back(std::move(job));
  }
}

namespace {

// Lease values: "L1 <token>" while a daemon compiles the key; after a
// failed compile "F1 <status code> <MAC, hex> <message>".
constexpr absl::string_view kHeldPrefix = "L1 ";
constexpr absl::string_view kFailedPrefix = "F1 ";

}  // namespace

std::string RemoteTier::LeaseKey(const Digest& key) const {
  return absl::StrCat(options_.key_namespace, ":lease:v1:", key.hex());
}

std::string RemoteTier::FailureValue(const std::string& lease_key,
                                     const absl::Status& failure) const {
  const std::string code = absl::StrCat(static_cast<int>(failure.code()));
  const absl::string_view message = failure.message();
  return absl::StrCat(kFailedPrefix, code, " ",
                      absl::BytesToHexString(mac_.Sign(
                          {lease_key, absl::string_view("\0", 1), code,
                           absl::string_view("\0", 1), message})),
                      " ", message);
}

std::optional<absl::Status> RemoteTier::ParseFailure(
    const std::string& lease_key, absl::string_view value) const {
  if (!absl::ConsumePrefix(&value, kFailedPrefix)) return std::nullopt;
  std::vector<absl::string_view> parts =
      absl::StrSplit(value, absl::MaxSplits(' ', 2));
  int code = 0;
  if (parts.size() != 3 || !absl::SimpleAtoi(parts[0], &code) || code <= 0 ||
      code > static_cast<int>(absl::StatusCode::kUnauthenticated) ||
      parts[1].size() != 2 * HmacSha256::kMacSize ||
      !std::all_of(parts[1].begin(), parts[1].end(), absl::ascii_isxdigit) ||
      !mac_.Verify({lease_key, absl::string_view("\0", 1), parts[0],
                    absl::string_view("\0", 1), parts[2]},
                   absl::HexStringToBytes(parts[1]))) {
    return std::nullopt;
  }
  return absl::Status(static_cast<absl::StatusCode>(code), parts[2]);
}

RemoteTier::Lease RemoteTier::AcquireLease(const Digest& key,
                                           absl::string_view token,
                                           absl::Duration ttl) {
  Lease lease;
  if (!Available()) return lease;
  const std::string lease_key = LeaseKey(key);
  std::string holder;
  absl::StatusOr<bool> set = storage_->SetIfAbsent(
      lease_key, absl::StrCat(kHeldPrefix, token), ttl, &holder);
  if (!set.ok()) {
    // A backend without leases is no failure of the backend.
    if (!absl::IsUnimplemented(set.status())) {
      Failed(set.status(), "lease");
    }
    return lease;
  }
  if (*set) {
    Count(kRemoteLeases);
    lease.state = LeaseState::kAcquired;
    return lease;
  }
  if (absl::StartsWith(holder, kHeldPrefix)) {
    lease.state = LeaseState::kHeld;
  } else if (std::optional<absl::Status> failure =
                 ParseFailure(lease_key, holder)) {
    lease.state = LeaseState::kFailed;
    lease.failure = *std::move(failure);
  } else {
    // Not ours to interpret (forged, or another format's): compile here.
    Count(kRemoteRejected);
  }
  return lease;
}

bool RemoteTier::RenewLease(const Digest& key, absl::string_view token,
                            absl::Duration ttl) {
  if (!Available()) return false;
  const std::string held = absl::StrCat(kHeldPrefix, token);
  absl::StatusOr<bool> renewed =
      storage_->ReplaceIf(LeaseKey(key), held, held, ttl);
  if (!renewed.ok()) {
    Failed(renewed.status(), "lease renewal");
    return false;
  }
  if (!*renewed) Count(kRemoteLeasesLost);
  return *renewed;
}

void RemoteTier::ReleaseLease(const Digest& key, absl::string_view token) {
  ReleaseLeaseWithFailure(key, token, absl::OkStatus(), absl::ZeroDuration());
}

void RemoteTier::ReleaseLeaseWithFailure(const Digest& key,
                                         absl::string_view token,
                                         const absl::Status& failure,
                                         absl::Duration failure_ttl) {
  Job job;
  job.kind = Job::Kind::kEndLease;
  job.key = key;
  job.token = absl::StrCat(kHeldPrefix, token);
  if (!failure.ok() && failure_ttl > absl::ZeroDuration()) {
    job.replacement = FailureValue(LeaseKey(key), failure);
    job.replacement_ttl = failure_ttl;
  }
  // Never dropped: it is small, and a lease left behind would make the
  // cluster wait for its expiry.
  absl::MutexLock lock(&mu_);
  queue_.push_back(std::move(job));
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
    RunJob(job);
    absl::MutexLock lock(&mu_);
    busy_ = false;
  }
}

void RemoteTier::RunJob(Job& job) {
  if (!Available()) {
    if (job.kind == Job::Kind::kPut) Count(kRemotePutsDropped);
    return;
  }
  const std::string remote_key = RemoteKey(options_.key_namespace, job.key);
  switch (job.kind) {
    case Job::Kind::kPut: {
      std::string value = EncodeRemoteEntry(
          mac_, remote_key, job.key, *job.entry, options_.compression_level);
      absl::Status s = storage_->Put(remote_key, value);
      if (s.ok()) {
        Count(kRemotePuts);
      } else {
        Failed(s, "put");
      }
      return;
    }
    case Job::Kind::kRemove: {
      absl::Status s = storage_->Remove(remote_key);
      if (!s.ok()) Failed(s, "remove");
      return;
    }
    case Job::Kind::kEndLease: {
      absl::StatusOr<bool> ended = storage_->ReplaceIf(
          LeaseKey(job.key), job.token, job.replacement, job.replacement_ttl);
      if (!ended.ok() && !absl::IsUnimplemented(ended.status())) {
        Failed(ended.status(), "lease release");
      }
      return;
    }
  }
}

}  // namespace kiln::cache
