// RemoteTier: the shared cluster cache in front of a RemoteStorage backend.
//
// - Get() has a timeout (the backend's) and never fails: a miss, an error,
//   a timeout, a rejected (unsigned, tampered, truncated) value or a backend
//   in cooldown all come back as nullopt, each counted.
// - Put() and Remove() only enqueue; one background thread signs, encodes
//   and sends. When the queue is full the put is dropped and counted, so the
//   caller never waits for the network.
// - A backend error or timeout starts a cooldown during which the backend is
//   skipped (counted as "remote_skipped"); it is logged once per cooldown,
//   with the URL redacted.
// Thread-safe.
#ifndef KILN_CACHE_REMOTE_TIER_H_
#define KILN_CACHE_REMOTE_TIER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/digest.h"
#include "cache/hmac.h"
#include "cache/remote_entry_codec.h"
#include "cache/remote_storage.h"

namespace kiln::cache {

struct RemoteTierOptions {
  std::string url;     // redis://HOST[:PORT][/DB], redis+unix:///PATH, ...
  std::string secret;  // cluster secret for HMAC-SHA256, >= 16 bytes
  std::string key_namespace = "kiln";
  RemoteStorageOptions storage;
  absl::Duration cooldown = absl::Seconds(30);
  size_t max_pending_puts = 256;
  uint64_t max_pending_bytes = 256ull << 20;
  int compression_level = 3;
  uint64_t max_entry_size = 512ull << 20;  // Redis's string limit
};

// Counter names.
inline constexpr char kRemoteHits[] = "remote_hits";
inline constexpr char kRemoteMisses[] = "remote_misses";
inline constexpr char kRemoteErrors[] = "remote_errors";
inline constexpr char kRemoteTimeouts[] = "remote_timeouts";
inline constexpr char kRemoteSkipped[] = "remote_skipped";
inline constexpr char kRemoteRejected[] = "remote_rejected";
inline constexpr char kRemotePuts[] = "remote_puts";
inline constexpr char kRemotePutsDropped[] = "remote_puts_dropped";
inline constexpr char kRemoteLeases[] = "remote_leases";
inline constexpr char kRemoteLeasesLost[] = "remote_leases_lost";

class RemoteTier {
 public:
  // Receives every counter increment (e.g. LocalStore::AddCounter, so remote
  // stats persist beside the local ones).
  using CounterSink = std::function<void(absl::string_view, int64_t)>;

  // Creates the backend from options.url. InvalidArgument for a bad URL,
  // namespace or secret. Does not connect.
  static absl::StatusOr<std::unique_ptr<RemoteTier>> Create(
      const RemoteTierOptions& options, CounterSink sink = nullptr);
  // Same over a given backend (tests use fakes).
  static absl::StatusOr<std::unique_ptr<RemoteTier>> Create(
      std::unique_ptr<RemoteStorage> storage, const RemoteTierOptions& options,
      CounterSink sink = nullptr);

  // Stops the background thread after the operation in flight; queued
  // operations are dropped (call Flush() first to send them).
  ~RemoteTier();

  // The verified entry, or nullopt (see the class comment).
  std::optional<RemoteEntry> Get(const Digest& key);

  // Queues a put / a delete; returns at once.
  void Put(const Digest& key, RemoteEntry entry);
  void Remove(const Digest& key);

  // Compile leases: cluster single-flight. Before compiling a miss, a
  // daemon takes the lease of its key (a Redis key beside the entry's,
  // holding `token`, expiring after `ttl` unless renewed); the daemons that
  // find it taken wait for the entry instead of compiling it again, and take
  // over when the holder dies (its lease expires). The holder releases the
  // lease after its put of the entry has been sent, or replaces it with the
  // compile's error (signed, like entries) for the failed-compile time, so
  // the waiters get the error rather than compiling the same failure.
  enum class LeaseState {
    kAcquired,     // this token holds it now
    kHeld,         // another daemon's token holds it
    kFailed,       // a compile of the key failed lately; see `failure`
    kUnavailable,  // no backend support, an error, a cooldown: compile here
  };
  struct Lease {
    LeaseState state = LeaseState::kUnavailable;
    absl::Status failure;  // kFailed: the compile's error
  };
  Lease AcquireLease(const Digest& key, absl::string_view token,
                     absl::Duration ttl);
  // Extends a held lease; false if it is no longer held by `token` (it
  // expired and another daemon took it) or the backend failed.
  bool RenewLease(const Digest& key, absl::string_view token,
                  absl::Duration ttl);
  // Queue the end of a held lease behind every queued operation, so that
  // waiters see the entry before they see the lease gone; with a failure,
  // the lease is replaced by that error for `failure_ttl` (zero: released).
  void ReleaseLease(const Digest& key, absl::string_view token);
  void ReleaseLeaseWithFailure(const Digest& key, absl::string_view token,
                               const absl::Status& failure,
                               absl::Duration failure_ttl);

  // Blocks until the queue is empty and nothing is in flight.
  void Flush();

  // This process's counts since creation.
  std::map<std::string, int64_t> Counters() const;
  std::string Describe() const { return storage_->Describe(); }
  bool InCooldown() const;

 private:
  RemoteTier(std::unique_ptr<RemoteStorage> storage, RemoteTierOptions options,
             HmacSha256 mac, CounterSink sink);

  struct Job {
    enum class Kind { kPut, kRemove, kEndLease };
    Kind kind = Kind::kPut;
    Digest key;
    std::optional<RemoteEntry> entry;  // kPut
    uint64_t bytes = 0;
    // kEndLease: the token, and the value replacing it ("" deletes it).
    std::string token;
    std::string replacement;
    absl::Duration replacement_ttl;
  };
  std::string LeaseKey(const Digest& key) const;
  std::string FailureValue(const std::string& lease_key,
                           const absl::Status& failure) const;
  // The failure a lease value records, if it is a correctly signed one.
  std::optional<absl::Status> ParseFailure(const std::string& lease_key,
                                           absl::string_view value) const;
  void RunJob(Job& job);
  void Count(const char* name, int64_t delta = 1);
  bool Available();  // false (and counted) during a cooldown
  void Failed(const absl::Status& status, absl::string_view what);
  void Run();

  const std::unique_ptr<RemoteStorage> storage_;
  const RemoteTierOptions options_;
  const HmacSha256 mac_;
  const CounterSink sink_;

  mutable absl::Mutex mu_;
  std::map<std::string, int64_t> counters_ ABSL_GUARDED_BY(mu_);
  absl::Time down_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::deque<Job> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t queued_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  bool busy_ ABSL_GUARDED_BY(mu_) = false;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread worker_;
};

}  // namespace kiln::cache

#endif  // KILN_CACHE_REMOTE_TIER_H_
