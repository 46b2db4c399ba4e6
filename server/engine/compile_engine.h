// CompileEngine: the daemon's transport-free compile path. Tile-IR text plus
// a target and bindings in, a KernelHandle (binary + launch metadata) out,
// through the content-addressed cache:
//
//   request -> size/deadline checks -> compiler::BinaryKey -> cache lookup
//     hit:  the stored entry (tier "local" or "remote")
//     miss: one compile per key on a bounded worker pool (single-flight: every
//           concurrent request for the same missing key waits for the same
//           compile and gets its result or its error), stored in the cache,
//           tier "compiled".
//
// Deadlines are absl::Time (absl::InfiniteFuture() means none). A caller
// whose deadline passes gets DeadlineExceeded; the shared compile keeps
// running for the other waiters and its result is still stored.
//
// No gRPC or protobuf here; the gRPC service adapts this class.
#ifndef KILN_SERVER_ENGINE_COMPILE_ENGINE_H_
#define KILN_SERVER_ENGINE_COMPILE_ENGINE_H_

#include <array>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "cache/cache.h"
#include "cache/log_throttle.h"
#include "compiler/compile.h"

namespace kiln::server {

struct CompileRequest {
  std::string ir_text;         // tile-IR program text
  std::string kernel;          // may be empty if the program has one
  std::string target = "cpu";  // see compiler::CompileOptions::target
  std::map<std::string, int64_t> bindings;  // tunables and fixed symbols
  // Name used in diagnostics ("FILE:LINE:COL").
  std::string filename = "<input>";
  // When the caller stops waiting; absl::InfiniteFuture() for never.
  absl::Time deadline = absl::InfiniteFuture();
  // Polled while the request waits for a compile (every few milliseconds);
  // when it returns true the request ends with Cancelled. A compile that no
  // request waits for any more and that has not started is dropped from the
  // queue. Empty: never cancelled.
  std::function<bool()> cancelled;
};

struct KernelHandle {
  std::string key;          // binary key, 64 lowercase hex characters
  std::string binary;       // CPU: an ELF shared object
  std::string metadata;     // launch metadata (compiler/docs/kernel-handle.md)
  std::string compile_log;  // what the compile reported (timings, prover)
  std::string kernel_name;
  std::string target;
  // Where the handle came from: "memory" (the engine's in-process cache of
  // recently served handles), "local" or "remote" (cache tiers),
  // "compiled" (compiled for this request, or for a request it joined).
  std::string tier;
  // Wall-clock milliseconds of the compile that produced this handle when
  // tier is "compiled"; 0 for cache hits.
  double compile_ms = 0;
};

// Blob names of a stored entry.
inline constexpr char kBinaryBlob[] = "binary";
inline constexpr char kMetadataBlob[] = "metadata";
inline constexpr char kCompileLogBlob[] = "compile.log";
// The text the entry's key hashes (compiler::BinaryKeyText), for `kiln cache
// show` and `kiln cache explain`.
inline constexpr char kKeyTextBlob[] = "key.txt";

struct CompileEngineOptions {
  // Threads compiling (bounded pool); at least 1.
  int worker_threads = 2;
  // Larger IR texts are InvalidArgument.
  size_t max_ir_bytes = 4 << 20;
  // Distinct compiles queued or running at once; a request that would start
  // one more is ResourceExhausted. Requests joining a running compile do not
  // count.
  int max_queued_compiles = 256;
  // A compile still unfinished this long after it was queued fails with
  // DeadlineExceeded for all its waiters. The compiler cannot be interrupted:
  // the worker finishes it anyway and stores a successful result.
  absl::Duration compile_time_limit = absl::Minutes(10);
  // Bytes of recently served handles kept in memory, least recently used
  // dropped first (0: no memory tier). A memory hit skips parsing the
  // program and reading the cache.
  size_t memory_cache_bytes = 256 << 20;
  // A compile that failed for a reason that does not go away by itself (an
  // error in the program, the passes or the toolchain) is remembered this
  // long: requests for the same key get its error without compiling again
  // (so 500 clients asking for a broken kernel cost one compile). Zero turns
  // it off. At most kMaxRememberedFailures are kept.
  absl::Duration failed_compile_ttl = absl::Seconds(10);
  // Cluster single-flight, when the cache has a remote tier: a miss is
  // compiled only by the daemon that takes its lease in the shared tier
  // (cache::RemoteTier::AcquireLease); the others park it, wait for the
  // holder's entry (or its error) and serve that. The holder renews its
  // lease while it compiles; a lease not renewed this long (its holder died)
  // is taken over. Zero: every daemon compiles its own misses.
  absl::Duration cluster_lease_ttl = absl::Seconds(10);
  // How often parked misses look at their leases again.
  absl::Duration cluster_poll = absl::Milliseconds(50);
  // The compiler, replaceable for tests; compiler::Compile if empty. It
  // gets the kernel as loaded for the key (parsed and verified once).
  std::function<absl::StatusOr<compiler::CompiledKernel>(
      const compiler::LoadedKernel&)>
      compile_fn;
};

// Upper bounds (seconds) of the compile-duration histogram's buckets; a
// last bucket takes the longer compiles.
inline constexpr std::array<double, 12> kCompileSecondsBuckets = {
    0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 600};

// Counters since the engine was created (Compile() calls only).
struct EngineStats {
  int64_t hits = 0;         // served from the cache (any tier)
  int64_t memory_hits = 0;  // of which: from the in-process memory tier
  int64_t misses = 0;       // not in the cache (started or joined a compile)
  int64_t compiles = 0;     // compiles actually run by the pool
  int64_t single_flight_joins = 0;    // misses that joined a pending compile
  int64_t errors = 0;                 // Compile() calls that returned an error
  int64_t deadline_exceeded = 0;      // of which: deadline or time limit
  int64_t cancelled = 0;              // of which: cancelled by the caller
  int64_t active_compiles = 0;        // queued or running now
  int64_t peak_running_compiles = 0;  // most compiles running at once
  // Errors answered from a remembered failed compile (failed_compile_ttl).
  int64_t remembered_failures = 0;
  // Cluster single-flight (cluster_lease_ttl): compiles that found another
  // daemon compiling their key and waited; of those, how many got its
  // entry, how many its error, and how many were compiled here after all
  // (the holder died or its entry never arrived).
  int64_t cluster_waits = 0;
  int64_t cluster_served = 0;
  int64_t cluster_failures = 0;
  int64_t cluster_takeovers = 0;
  // The compiles run, by duration: compile_seconds[b] counts those of at
  // most kCompileSecondsBuckets[b] seconds and more than the bound before
  // (the last entry: longer than every bound), and their total seconds.
  std::array<int64_t, kCompileSecondsBuckets.size() + 1> compile_seconds{};
  double compile_seconds_sum = 0;
};

inline constexpr size_t kMaxRememberedFailures = 4096;

class CompileEngine {
 public:
  // Creates the engine over `cache` (not owned; must outlive the engine) and
  // starts the workers. InvalidArgument for a null cache or bad options.
  static absl::StatusOr<std::unique_ptr<CompileEngine>> Create(
      cache::Cache* cache, CompileEngineOptions options = {});
  // Shutdown(), then frees everything.
  ~CompileEngine();
  CompileEngine(const CompileEngine&) = delete;
  CompileEngine& operator=(const CompileEngine&) = delete;

  // The handle for `request`, from the cache or compiled (see the file
  // comment). Errors:
  // - Unavailable after Shutdown() began;
  // - InvalidArgument for oversized IR, and whatever compiler::BinaryKey or
  //   compiler::Compile report (invalid programs with FILE:LINE:COL lines,
  //   unknown targets, missing or bad tunables; NotFound for unknown kernels;
  //   Unimplemented, Internal) passed through unchanged;
  // - DeadlineExceeded when request.deadline passes (also if it had already
  //   passed on entry) or the compile exceeds compile_time_limit;
  // - ResourceExhausted when max_queued_compiles compiles are pending;
  // - cache I/O errors of the local tier.
  // Thread-safe; blocks until the result or the deadline.
  absl::StatusOr<KernelHandle> Compile(const CompileRequest& request);

  // Whether the local cache holds `key` (index only; no blob reads, no hit
  // counted). InvalidArgument for a malformed key. Thread-safe.
  absl::StatusOr<bool> Lookup(std::string_view key);

  // The stored handle for `key` (local tier, then remote): tier "local" or
  // "remote". NotFound if absent, InvalidArgument for a malformed key.
  // Thread-safe.
  absl::StatusOr<KernelHandle> Get(std::string_view key);

  // The binary key `request` would get (parse and verify only; no cache
  // access). Errors as Compile() for bad programs. Thread-safe.
  absl::StatusOr<std::string> KeyFor(const CompileRequest& request) const;

  // Compiles every request with up to `parallelism` requests in flight
  // (hits are served while misses compile), calling `done(index, result)`
  // once per request as each finishes, from the engine's calling threads,
  // one call at a time. Returns when all are done. Thread-safe.
  void CompileBatch(
      const std::vector<CompileRequest>& requests, int parallelism,
      const std::function<void(size_t, const absl::StatusOr<KernelHandle>&)>&
          done);

  // The local cache's entries (cache/entry.h filter), most recently used
  // first.
  absl::StatusOr<std::vector<cache::EntryInfo>> List(
      const cache::EntryFilter& filter);

  // Removes `key` from the cache (see cache::Cache::Remove). NotFound if it
  // was not in the local cache; InvalidArgument for a malformed key.
  absl::Status Evict(std::string_view key);

  // The local cache's size and persistent counters.
  absl::StatusOr<cache::StoreStats> CacheStats();

  // A snapshot of the counters. Thread-safe.
  EngineStats Stats() const;

  // Refuses new Compile() calls (Unavailable), waits for every queued and
  // running compile to finish (their waiters get their results), then stops
  // the workers. Idempotent; thread-safe; must not be called from a worker.
  void Shutdown();

 private:
  struct Flight;

  CompileEngine(cache::Cache* cache, CompileEngineOptions options);
  absl::StatusOr<KernelHandle> DoCompile(const CompileRequest& request);
  // Local tier, then remote if configured. NotFound on a miss.
  absl::StatusOr<KernelHandle> Fetch(const cache::Digest& digest);
  // Compiles `flight` (or finds it stored meanwhile) and finishes it; false
  // when it was parked instead, another daemon holding its lease.
  bool RunFlight(std::shared_ptr<Flight> flight);
  // The cluster lease step of RunFlight: compile here now, or the flight
  // was parked, or finished with another daemon's error.
  enum class LeaseStep { kCompile, kParked, kFinished };
  LeaseStep TakeLease(const std::shared_ptr<Flight>& flight);
  // Ends the lease `flight` holds, if any, after a compile ending in
  // `status` (see RemoteTier::ReleaseLeaseWithFailure).
  void EndLease(const std::shared_ptr<Flight>& flight,
                const absl::Status& status);
  // Renews held leases and looks at the parked flights' leases, every
  // cluster_poll until Shutdown.
  void ClusterLoop();
  // `flight` holds its cluster lease now (renewed by ClusterLoop) / no
  // longer; DropLease says whether it held it.
  void HoldLease(const std::shared_ptr<Flight>& flight)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool DropLease(const std::shared_ptr<Flight>& flight)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Takes `flight` out of the queue or the parked list, if it is there,
  // counting it no longer pending; whether it was there.
  bool Unqueue(const std::shared_ptr<Flight>& flight)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Remembers a failed compile of `key` (see failed_compile_ttl).
  void RememberFailure(const std::string& key, const absl::Status& status)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Logs a cache lookup that failed for another reason than a miss (at most
  // one line per interval, counting the rest).
  void WarnLookupFailure(std::string_view key, const absl::Status& status);
  void WorkerLoop();
  // Marks `flight` done with `result` (if not done yet) and unlists it.
  void Finish(const std::shared_ptr<Flight>& flight,
              absl::StatusOr<KernelHandle> result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // The memory tier and the request -> key memo (see memory_cache_bytes).
  struct MemoryTier;
  // The memo's key for `request`: every input of compiler::BinaryKey.
  static std::string MemoKey(const CompileRequest& request);
  std::shared_ptr<const KernelHandle> MemoryGet(const std::string& memo_key);
  void MemoryPut(const std::string& memo_key, const KernelHandle& handle);
  void MemoryForget(std::string_view key);

  cache::Cache* const cache_;
  const CompileEngineOptions options_;
  std::unique_ptr<MemoryTier> memory_;

  absl::Mutex shutdown_mu_;  // one Shutdown() at a time
  mutable absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  absl::flat_hash_map<std::string, std::shared_ptr<Flight>> flights_
      ABSL_GUARDED_BY(mu_);
  std::deque<std::shared_ptr<Flight>> queue_ ABSL_GUARDED_BY(mu_);
  // Flights waiting for another daemon's compile, and flights holding a
  // cluster lease (renewed by ClusterLoop).
  std::vector<std::shared_ptr<Flight>> parked_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<Flight>> leased_ ABSL_GUARDED_BY(mu_);
  // This engine's lease tokens: "<host>:<pid>:<random>:<n>".
  std::string lease_owner_;
  int64_t lease_serial_ ABSL_GUARDED_BY(mu_) = 0;
  bool cluster_stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread cluster_thread_;
  int64_t pending_jobs_ ABSL_GUARDED_BY(mu_) = 0;  // queued + running
  int64_t running_ ABSL_GUARDED_BY(mu_) = 0;
  EngineStats stats_ ABSL_GUARDED_BY(mu_);
  // Failed compiles by binary key, with when they are forgotten.
  struct Failure {
    absl::Status status;
    absl::Time until;
  };
  absl::flat_hash_map<std::string, Failure> failures_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> workers_;
  // Cache lookup failures are logged at most every 30 s.
  cache::LogThrottle lookup_warnings_{absl::Seconds(30)};
};

}  // namespace kiln::server

#endif  // KILN_SERVER_ENGINE_COMPILE_ENGINE_H_
