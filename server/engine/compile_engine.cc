#include "server/engine/compile_engine.h"

#include <unistd.h>

#include <algorithm>
#include <list>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cache/digest.h"
#include "cache/entry.h"
#include "spdlog/spdlog.h"

namespace kiln::server {

struct CompileEngine::Flight {
  std::string key;
  cache::Digest digest;
  compiler::LoadedKernel loaded;  // parsed and verified once
  absl::Time limit;               // compile_time_limit after it was queued
  int waiters = 0;                // requests waiting for it
  bool started = false;
  // Cluster single-flight (guarded by the engine's mu_): the token this
  // flight takes its lease with, whether it holds it (and when it was last
  // renewed), whether it waited for another daemon, and whether it compiles
  // without a lease (no remote tier support, or shutting down).
  std::string lease_token;
  bool holds_lease = false;
  absl::Time renewed;
  bool waited = false;
  bool no_lease = false;
  bool done = false;
  absl::StatusOr<KernelHandle> result = absl::UnknownError("not finished");
};

// An LRU of handles by binary key, bounded in bytes, and a map from request
// (MemoKey) to binary key so that a repeated request is answered without
// parsing its program.
struct CompileEngine::MemoryTier {
  struct Item {
    std::shared_ptr<const KernelHandle> handle;
    std::list<std::string>::iterator lru;  // position in `order`
  };
  absl::Mutex mu;
  size_t budget = 0;
  size_t bytes ABSL_GUARDED_BY(mu) = 0;
  std::list<std::string> order ABSL_GUARDED_BY(mu);  // most recent first
  absl::flat_hash_map<std::string, Item> items ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, std::string> keys ABSL_GUARDED_BY(mu);

  static size_t Size(const KernelHandle& h) {
    return h.binary.size() + h.metadata.size() + h.compile_log.size() + 256;
  }
};

namespace {

// The memo holds at most this many request -> key entries (then starts
// over): requests are small, but a client sending endless distinct programs
// must not grow it without bound.
constexpr size_t kMaxMemoEntries = 1 << 16;

// How often a waiting request polls its `cancelled` callback.
constexpr absl::Duration kCancelPoll = absl::Milliseconds(20);

// Whether the same compile would fail again the same way: not running out
// of time or resources, not being cancelled.
bool IsLastingFailure(const absl::Status& status) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kDeadlineExceeded:
    case absl::StatusCode::kCancelled:
    case absl::StatusCode::kUnavailable:
    case absl::StatusCode::kResourceExhausted:
    case absl::StatusCode::kAborted:
      return false;
    default:
      return true;
  }
}

// "<host>:<pid>:<random>:": unique to this engine in the cluster.
std::string LeaseOwner() {
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  std::random_device random;
  const uint64_t nonce = (uint64_t{random()} << 32) ^ random();
  return absl::StrCat(host[0] != '\0' ? host : "host", ":", getpid(), ":",
                      absl::Hex(nonce, absl::kZeroPad16), ":");
}

compiler::CompileOptions ToCompileOptions(const CompileRequest& request) {
  compiler::CompileOptions copts;
  copts.target = request.target;
  copts.kernel = request.kernel;
  copts.bindings = request.bindings;
  copts.filename = request.filename;
  return copts;
}

// This Abseil's string_view is its own type, not std::string_view.
absl::string_view AbslView(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

std::string CompileLog(const compiler::CompiledKernel& k) {
  return absl::StrCat(
      "parse_verify_ms ", k.timings.parse_verify_ms, "\npasses_ms ",
      k.timings.passes_ms, "\ncodegen_ms ", k.timings.codegen_ms, "\ntotal_ms ",
      k.timings.total_ms, "\nprover_queries ", k.prover_queries,
      "\nprover_z3_queries ", k.prover_z3_queries, "\ntoolchain ", k.toolchain,
      "\ncompiler ", AbslView(compiler::CompilerVersion()), "\n");
}

absl::StatusOr<KernelHandle> HandleFromEntry(const cache::Entry& entry,
                                             std::string tier) {
  const cache::Blob* binary = entry.Find(kBinaryBlob);
  if (binary == nullptr) {
    return absl::DataLossError(absl::StrCat(
        "cache entry ", entry.info.key.hex(), " has no \"binary\" blob"));
  }
  KernelHandle h;
  h.key = entry.info.key.hex();
  h.binary = binary->data;
  if (const cache::Blob* m = entry.Find(kMetadataBlob)) h.metadata = m->data;
  if (const cache::Blob* l = entry.Find(kCompileLogBlob)) {
    h.compile_log = l->data;
  }
  h.kernel_name = entry.info.metadata.kernel_name;
  h.target = entry.info.metadata.target_arch;
  h.tier = std::move(tier);
  return h;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CompileEngine>> CompileEngine::Create(
    cache::Cache* cache, CompileEngineOptions options) {
  if (cache == nullptr) {
    return absl::InvalidArgumentError("compile engine needs a cache");
  }
  if (options.worker_threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "worker_threads must be at least 1, got ", options.worker_threads));
  }
  if (options.max_queued_compiles < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_queued_compiles must be at least 1, got ",
                     options.max_queued_compiles));
  }
  if (!options.compile_fn) {
    options.compile_fn = [](const compiler::LoadedKernel& k) {
      return compiler::Compile(k);
    };
  }
  return std::unique_ptr<CompileEngine>(
      new CompileEngine(cache, std::move(options)));
}

CompileEngine::CompileEngine(cache::Cache* cache, CompileEngineOptions options)
    : cache_(cache),
      options_(std::move(options)),
      memory_(std::make_unique<MemoryTier>()) {
  memory_->budget = options_.memory_cache_bytes;
  workers_.reserve(options_.worker_threads);
  for (int i = 0; i < options_.worker_threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
  if (cache_->remote() != nullptr &&
      options_.cluster_lease_ttl > absl::ZeroDuration()) {
    lease_owner_ = LeaseOwner();
    cluster_thread_ = std::thread([this] { ClusterLoop(); });
  }
}

CompileEngine::~CompileEngine() { Shutdown(); }

void CompileEngine::Shutdown() {
  absl::MutexLock serial(&shutdown_mu_);
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return;
    shutting_down_ = true;
    mu_.Await(absl::Condition(
        +[](CompileEngine* e)
             ABSL_NO_THREAD_SAFETY_ANALYSIS { return e->pending_jobs_ == 0; },
        this));
    stopped_ = true;
    cluster_stop_ = true;
  }
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  if (cluster_thread_.joinable()) cluster_thread_.join();
}

EngineStats CompileEngine::Stats() const {
  absl::MutexLock lock(&mu_);
  EngineStats s = stats_;
  s.active_compiles = pending_jobs_;
  return s;
}

absl::StatusOr<KernelHandle> CompileEngine::Compile(
    const CompileRequest& request) {
  absl::StatusOr<KernelHandle> result = DoCompile(request);
  if (!result.ok()) {
    absl::MutexLock lock(&mu_);
    ++stats_.errors;
    if (absl::IsDeadlineExceeded(result.status())) ++stats_.deadline_exceeded;
    if (absl::IsCancelled(result.status())) ++stats_.cancelled;
  }
  return result;
}

absl::StatusOr<KernelHandle> CompileEngine::DoCompile(
    const CompileRequest& request) {
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) {
      return absl::UnavailableError("compile engine is shutting down");
    }
  }
  if (request.ir_text.size() > options_.max_ir_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("IR text is ", request.ir_text.size(),
                     " bytes; the limit is ", options_.max_ir_bytes));
  }
  if (request.deadline <= absl::Now()) {
    return absl::DeadlineExceededError(
        "deadline passed before the compile request was looked at");
  }
  if (request.cancelled && request.cancelled()) {
    return absl::CancelledError("request cancelled before it was looked at");
  }
  const std::string memo_key = MemoKey(request);
  if (std::shared_ptr<const KernelHandle> remembered = MemoryGet(memo_key)) {
    KernelHandle h = *remembered;
    h.tier = "memory";
    h.compile_ms = 0;
    absl::MutexLock lock(&mu_);
    ++stats_.hits;
    ++stats_.memory_hits;
    return h;
  }
  // The program is parsed and verified once: the key comes from the loaded
  // kernel, and a miss compiles it without reading the text again.
  absl::StatusOr<compiler::LoadedKernel> loaded =
      compiler::Load(request.ir_text, ToCompileOptions(request));
  if (!loaded.ok()) return loaded.status();
  const std::string key = loaded->key;
  absl::StatusOr<cache::Digest> digest = cache::Digest::Parse(key);
  if (!digest.ok()) {
    return absl::InternalError(absl::StrCat("compiler gave a malformed key: ",
                                            digest.status().message()));
  }

  absl::StatusOr<KernelHandle> hit = Fetch(*digest);
  if (hit.ok()) {
    MemoryPut(memo_key, *hit);
    absl::MutexLock lock(&mu_);
    ++stats_.hits;
    return hit;
  }
  // A lookup that fails for any other reason than a miss (a damaged index, a
  // full disk, an I/O error) is a miss too: compiling answers the request.
  if (!absl::IsNotFound(hit.status())) {
    WarnLookupFailure(key, hit.status());
  }

  absl::MutexLock lock(&mu_);
  if (shutting_down_) {
    return absl::UnavailableError("compile engine is shutting down");
  }
  ++stats_.misses;
  if (auto failed = failures_.find(key); failed != failures_.end()) {
    if (absl::Now() < failed->second.until) {
      ++stats_.remembered_failures;
      return failed->second.status;
    }
    failures_.erase(failed);
  }
  std::shared_ptr<Flight> flight;
  auto it = flights_.find(key);
  if (it != flights_.end()) {
    flight = it->second;
    ++stats_.single_flight_joins;
  } else {
    if (pending_jobs_ >= options_.max_queued_compiles) {
      return absl::ResourceExhaustedError(
          absl::StrCat("too many compiles pending (", pending_jobs_,
                       "; the limit is ", options_.max_queued_compiles, ")"));
    }
    flight = std::make_shared<Flight>();
    flight->key = key;
    flight->digest = *digest;
    flight->loaded = *std::move(loaded);
    flight->limit = absl::Now() + options_.compile_time_limit;
    flights_.emplace(key, flight);
    queue_.push_back(flight);
    ++pending_jobs_;
  }
  const absl::Time wait_until = std::min(request.deadline, flight->limit);
  ++flight->waiters;
  bool cancelled = false;
  if (!request.cancelled) {
    mu_.AwaitWithDeadline(absl::Condition(&flight->done), wait_until);
  } else {
    while (!flight->done && absl::Now() < wait_until) {
      mu_.AwaitWithDeadline(absl::Condition(&flight->done),
                            std::min(wait_until, absl::Now() + kCancelPoll));
      if (flight->done) break;
      mu_.Unlock();  // the callback may take its own locks
      cancelled = request.cancelled();
      mu_.Lock();
      if (cancelled) break;
    }
  }
  --flight->waiters;
  if (!flight->done && cancelled) {
    if (flight->waiters == 0 && !flight->started) {
      // Nobody wants it any more and no worker has it: drop it, and its
      // cluster lease if it took one while parked.
      Unqueue(flight);
      if (DropLease(flight)) {
        cache_->remote()->ReleaseLease(flight->digest, flight->lease_token);
      }
      Finish(flight, absl::CancelledError("compile cancelled"));
    }
    return absl::CancelledError(absl::StrCat(
        "request cancelled while waiting for the compile of ", key));
  }
  if (!flight->done) {
    if (absl::Now() < flight->limit) {
      // Only this caller gives up; the compile goes on for the others.
      return absl::DeadlineExceededError(absl::StrCat(
          "deadline passed while waiting for the compile of ", key));
    }
    Finish(flight, absl::DeadlineExceededError(absl::StrCat(
                       "compile of ", key, " exceeded the time limit of ",
                       absl::FormatDuration(options_.compile_time_limit))));
  }
  absl::StatusOr<KernelHandle> result = flight->result;
  mu_.Unlock();
  if (result.ok()) MemoryPut(memo_key, *result);
  mu_.Lock();
  return result;
}

std::string CompileEngine::MemoKey(const CompileRequest& request) {
  std::string key = absl::StrCat(request.target.size(), ":", request.target,
                                 request.kernel.size(), ":", request.kernel);
  for (const auto& [name, value] : request.bindings) {
    absl::StrAppend(&key, name.size(), ":", name, "=", value, ";");
  }
  absl::StrAppend(&key, "|", request.ir_text);
  return key;
}

std::shared_ptr<const KernelHandle> CompileEngine::MemoryGet(
    const std::string& memo_key) {
  MemoryTier& m = *memory_;
  if (m.budget == 0) return nullptr;
  absl::MutexLock lock(&m.mu);
  auto key = m.keys.find(memo_key);
  if (key == m.keys.end()) return nullptr;
  auto item = m.items.find(key->second);
  if (item == m.items.end()) return nullptr;
  m.order.splice(m.order.begin(), m.order, item->second.lru);
  return item->second.handle;
}

void CompileEngine::MemoryPut(const std::string& memo_key,
                              const KernelHandle& handle) {
  MemoryTier& m = *memory_;
  const size_t size = MemoryTier::Size(handle);
  if (m.budget == 0 || size > m.budget / 2) return;
  absl::MutexLock lock(&m.mu);
  if (m.keys.size() >= kMaxMemoEntries) m.keys.clear();
  m.keys[memo_key] = handle.key;
  if (m.items.contains(handle.key)) return;
  m.order.push_front(handle.key);
  auto stored = std::make_shared<KernelHandle>(handle);
  stored->compile_ms = 0;
  m.items[handle.key] = {std::move(stored), m.order.begin()};
  m.bytes += size;
  while (m.bytes > m.budget && !m.order.empty()) {
    auto victim = m.items.find(m.order.back());
    m.bytes -= MemoryTier::Size(*victim->second.handle);
    m.items.erase(victim);
    m.order.pop_back();
  }
}

void CompileEngine::MemoryForget(std::string_view key) {
  MemoryTier& m = *memory_;
  absl::MutexLock lock(&m.mu);
  auto item = m.items.find(AbslView(key));
  if (item == m.items.end()) return;
  m.bytes -= MemoryTier::Size(*item->second.handle);
  m.order.erase(item->second.lru);
  m.items.erase(item);
}

void CompileEngine::Finish(const std::shared_ptr<Flight>& flight,
                           absl::StatusOr<KernelHandle> result) {
  if (!flight->done) {
    flight->result = std::move(result);
    flight->done = true;
  }
  auto it = flights_.find(flight->key);
  if (it != flights_.end() && it->second == flight) flights_.erase(it);
}

void CompileEngine::HoldLease(const std::shared_ptr<Flight>& flight) {
  flight->holds_lease = true;
  flight->renewed = absl::Now();
  leased_.push_back(flight);
}

bool CompileEngine::DropLease(const std::shared_ptr<Flight>& flight) {
  if (!flight->holds_lease) return false;
  flight->holds_lease = false;
  leased_.erase(std::remove(leased_.begin(), leased_.end(), flight),
                leased_.end());
  return true;
}

bool CompileEngine::Unqueue(const std::shared_ptr<Flight>& flight) {
  if (auto pos = std::find(queue_.begin(), queue_.end(), flight);
      pos != queue_.end()) {
    queue_.erase(pos);
  } else if (auto parked = std::find(parked_.begin(), parked_.end(), flight);
             parked != parked_.end()) {
    parked_.erase(parked);
  } else {
    return false;
  }
  --pending_jobs_;
  return true;
}

void CompileEngine::WorkerLoop() {
  while (true) {
    std::shared_ptr<Flight> flight;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](CompileEngine* e) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            return e->stopped_ || !e->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopped, and nothing left
      flight = std::move(queue_.front());
      queue_.pop_front();
      flight->started = true;
      ++running_;
      stats_.peak_running_compiles =
          std::max(stats_.peak_running_compiles, running_);
    }
    const bool parked = RunFlight(flight);
    absl::MutexLock lock(&mu_);
    --running_;
    if (!parked) --pending_jobs_;  // a parked flight is still pending
  }
}

CompileEngine::LeaseStep CompileEngine::TakeLease(
    const std::shared_ptr<Flight>& flight) {
  cache::RemoteTier* remote = cache_->remote();
  std::string token;
  {
    absl::MutexLock lock(&mu_);
    if (!cluster_thread_.joinable() || flight->no_lease ||
        flight->holds_lease) {
      return LeaseStep::kCompile;
    }
    if (flight->lease_token.empty()) {
      flight->lease_token = absl::StrCat(lease_owner_, ++lease_serial_);
    }
    token = flight->lease_token;
  }
  const cache::RemoteTier::Lease lease =
      remote->AcquireLease(flight->digest, token, options_.cluster_lease_ttl);
  absl::MutexLock lock(&mu_);
  switch (lease.state) {
    case cache::RemoteTier::LeaseState::kAcquired:
      HoldLease(flight);
      return LeaseStep::kCompile;
    case cache::RemoteTier::LeaseState::kHeld:
      // Another daemon compiles it: wait for its entry (ClusterLoop), and
      // let this worker compile something else meanwhile.
      flight->started = false;
      flight->waited = true;
      parked_.push_back(flight);
      ++stats_.cluster_waits;
      return LeaseStep::kParked;
    case cache::RemoteTier::LeaseState::kFailed:
      ++stats_.cluster_failures;
      Finish(flight, lease.failure);
      return LeaseStep::kFinished;
    case cache::RemoteTier::LeaseState::kUnavailable:
      flight->no_lease = true;
      return LeaseStep::kCompile;
  }
  return LeaseStep::kCompile;
}

void CompileEngine::EndLease(const std::shared_ptr<Flight>& flight,
                             const absl::Status& status) {
  std::string token;
  {
    absl::MutexLock lock(&mu_);
    if (!DropLease(flight)) return;
    token = flight->lease_token;
  }
  cache::RemoteTier* remote = cache_->remote();
  if (IsLastingFailure(status) &&
      options_.failed_compile_ttl > absl::ZeroDuration()) {
    remote->ReleaseLeaseWithFailure(flight->digest, token, status,
                                    options_.failed_compile_ttl);
  } else {
    remote->ReleaseLease(flight->digest, token);
  }
}

void CompileEngine::ClusterLoop() {
  cache::RemoteTier* remote = cache_->remote();
  const absl::Duration ttl = options_.cluster_lease_ttl;
  while (true) {
    std::vector<std::shared_ptr<Flight>> parked;
    std::vector<std::shared_ptr<Flight>> renew;
    {
      absl::MutexLock lock(&mu_);
      mu_.AwaitWithTimeout(absl::Condition(&cluster_stop_),
                           options_.cluster_poll);
      if (cluster_stop_) return;
      // Flights finished meanwhile (their compile time limit) leave the
      // list; at shutdown the rest are compiled here.
      for (auto it = parked_.begin(); it != parked_.end();) {
        if ((*it)->done || shutting_down_) {
          if (!(*it)->done) {
            (*it)->no_lease = true;
            queue_.push_front(*it);
          } else {
            --pending_jobs_;
          }
          it = parked_.erase(it);
        } else {
          ++it;
        }
      }
      parked = parked_;
      const absl::Time now = absl::Now();
      for (const std::shared_ptr<Flight>& f : leased_) {
        if (now - f->renewed >= ttl / 3) renew.push_back(f);
      }
    }
    for (const std::shared_ptr<Flight>& f : renew) {
      std::string token;
      {
        absl::MutexLock lock(&mu_);
        if (!f->holds_lease) continue;
        f->renewed = absl::Now();
        token = f->lease_token;
      }
      if (!remote->RenewLease(f->digest, token, ttl)) {
        spdlog::warn(
            "compile lease of {} lost (not renewed in time, or the remote "
            "cache failed); another daemon may compile it too",
            f->key);
      }
    }
    for (const std::shared_ptr<Flight>& f : parked) {
      std::string token;
      {
        absl::MutexLock lock(&mu_);
        token = f->lease_token;
      }
      const cache::RemoteTier::Lease lease =
          remote->AcquireLease(f->digest, token, ttl);
      if (lease.state == cache::RemoteTier::LeaseState::kHeld) continue;
      bool still_parked;
      {
        absl::MutexLock lock(&mu_);
        auto pos = std::find(parked_.begin(), parked_.end(), f);
        still_parked = pos != parked_.end() && !f->done;
        if (still_parked) {
          parked_.erase(pos);
          switch (lease.state) {
            case cache::RemoteTier::LeaseState::kAcquired:
              // The holder is done (its entry is stored) or gone: the
              // worker looks for the entry first.
              HoldLease(f);
              queue_.push_front(f);
              break;
            case cache::RemoteTier::LeaseState::kFailed:
              --pending_jobs_;
              ++stats_.cluster_failures;
              Finish(f, lease.failure);
              break;
            default:
              f->no_lease = true;
              queue_.push_front(f);
              break;
          }
        }
      }
      if (!still_parked &&
          lease.state == cache::RemoteTier::LeaseState::kAcquired) {
        remote->ReleaseLease(f->digest, token);  // nobody wants it now
      }
    }
  }
}

bool CompileEngine::RunFlight(std::shared_ptr<Flight> flight) {
  switch (TakeLease(flight)) {
    case LeaseStep::kParked:
      return true;
    case LeaseStep::kFinished:
      return false;
    case LeaseStep::kCompile:
      break;
  }
  bool holds_lease;
  bool waited;
  {
    absl::MutexLock lock(&mu_);
    holds_lease = flight->holds_lease;
    waited = flight->waited;
  }
  // A request that missed the cache just before another compile of the same
  // key stored it starts a new flight; serve that from the local store. (The
  // remote tier was asked moments ago by the request itself: asking it again
  // would only add a round trip to every miss. With a cluster lease it is
  // asked again: another daemon may have stored it while this flight
  // waited or queued.)
  absl::StatusOr<KernelHandle> result = absl::NotFoundError("not cached");
  if (holds_lease) {
    result = Fetch(flight->digest);
    if (result.ok() && waited) {
      absl::MutexLock lock(&mu_);
      ++stats_.cluster_served;
    }
  } else if (absl::StatusOr<cache::Entry> stored =
                 cache_->local().Get(flight->digest, /*record_use=*/false);
             stored.ok()) {
    result = HandleFromEntry(*stored, "local");
  }
  if (!result.ok()) {
    {
      absl::MutexLock lock(&mu_);
      ++stats_.compiles;
      if (waited) ++stats_.cluster_takeovers;
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<compiler::CompiledKernel> compiled =
        options_.compile_fn(flight->loaded);
    const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    {
      absl::MutexLock lock(&mu_);
      const double seconds = ms / 1000;
      size_t b = 0;
      while (b < kCompileSecondsBuckets.size() &&
             seconds > kCompileSecondsBuckets[b]) {
        ++b;
      }
      ++stats_.compile_seconds[b];
      stats_.compile_seconds_sum += seconds;
    }
    if (!compiled.ok()) {
      result = compiled.status();
      RememberFailure(flight->key, compiled.status());
    } else {
      KernelHandle h;
      h.key = flight->key;
      h.binary = std::move(compiled->binary);
      h.metadata = std::move(compiled->metadata);
      h.compile_log = CompileLog(*compiled);
      h.kernel_name = compiled->name;
      h.target = compiled->target;
      h.tier = "compiled";
      h.compile_ms = ms;
      cache::EntryData data;
      data.metadata.kernel_name = h.kernel_name;
      data.metadata.target_arch = h.target;
      data.metadata.extra =
          absl::StrCat("compiler ", AbslView(compiler::CompilerVersion()),
                       "\ntoolchain ", compiled->toolchain);
      data.blobs = {{kBinaryBlob, h.binary},
                    {kMetadataBlob, h.metadata},
                    {kCompileLogBlob, h.compile_log},
                    {kKeyTextBlob, flight->loaded.key_text}};
      absl::Status put = cache_->Put(flight->digest, data);
      if (!put.ok()) {
        // The kernel is good; only later requests lose the cache.
        absl::StrAppend(&h.compile_log, "cache put failed: ", put.ToString(),
                        "\n");
      }
      result = std::move(h);
    }
  }
  EndLease(flight, result.status());
  absl::MutexLock lock(&mu_);
  Finish(flight, std::move(result));
  return false;
}

absl::StatusOr<KernelHandle> CompileEngine::Fetch(const cache::Digest& digest) {
  cache::Cache::Tier tier = cache::Cache::Tier::kLocal;
  absl::StatusOr<cache::Entry> entry =
      cache_->Get(digest, /*record_use=*/true, &tier);
  if (!entry.ok()) return entry.status();
  absl::StatusOr<KernelHandle> handle = HandleFromEntry(
      *entry, tier == cache::Cache::Tier::kRemote ? "remote" : "local");
  if (handle.ok()) return handle;
  // Sound rows, sound blobs, but not a kernel (a blob renamed): nothing can
  // serve it, so it goes, and the request compiles.
  WarnLookupFailure(digest.hex(), handle.status());
  (void)cache_->Remove(digest);
  return absl::NotFoundError(absl::StrCat(
      "no usable cache entry ", digest.hex(), ": ", handle.status().message()));
}

void CompileEngine::RememberFailure(const std::string& key,
                                    const absl::Status& status) {
  if (!IsLastingFailure(status) ||
      options_.failed_compile_ttl <= absl::ZeroDuration()) {
    return;
  }
  const absl::Time now = absl::Now();
  absl::MutexLock lock(&mu_);
  if (failures_.size() >= kMaxRememberedFailures) {
    // Forget the expired ones; if none were, forget them all.
    absl::erase_if(failures_,
                   [&](const auto& kv) { return kv.second.until <= now; });
    if (failures_.size() >= kMaxRememberedFailures) failures_.clear();
  }
  failures_[key] = Failure{status, now + options_.failed_compile_ttl};
}

void CompileEngine::WarnLookupFailure(std::string_view key,
                                      const absl::Status& status) {
  std::optional<int64_t> held_back = lookup_warnings_.Admit(absl::Now());
  if (!held_back) return;
  spdlog::warn("cache lookup of {} failed ({}); compiling instead{}",
               std::string(key.substr(0, 64)), status.ToString(),
               *held_back > 0 ? absl::StrCat(" (", *held_back,
                                             " more such failures before it)")
                              : "");
}

absl::StatusOr<std::string> CompileEngine::KeyFor(
    const CompileRequest& request) const {
  if (request.ir_text.size() > options_.max_ir_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("IR text is ", request.ir_text.size(),
                     " bytes; the limit is ", options_.max_ir_bytes));
  }
  return compiler::BinaryKey(request.ir_text, ToCompileOptions(request));
}

void CompileEngine::CompileBatch(
    const std::vector<CompileRequest>& requests, int parallelism,
    const std::function<void(size_t, const absl::StatusOr<KernelHandle>&)>&
        done) {
  absl::Mutex batch_mu;
  size_t next = 0;
  auto work = [&] {
    while (true) {
      size_t index;
      {
        absl::MutexLock lock(&batch_mu);
        if (next >= requests.size()) return;
        index = next++;
      }
      absl::StatusOr<KernelHandle> result = Compile(requests[index]);
      absl::MutexLock lock(&batch_mu);
      done(index, result);
    }
  };
  const size_t threads =
      std::min(requests.size(), static_cast<size_t>(std::max(1, parallelism)));
  std::vector<std::thread> pool;
  for (size_t i = 1; i < threads; ++i) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
}

absl::StatusOr<std::vector<cache::EntryInfo>> CompileEngine::List(
    const cache::EntryFilter& filter) {
  return cache_->local().List(filter);
}

absl::Status CompileEngine::Evict(std::string_view key) {
  absl::StatusOr<cache::Digest> digest = cache::Digest::Parse(AbslView(key));
  if (!digest.ok()) return digest.status();
  MemoryForget(key);
  return cache_->Remove(*digest);
}

absl::StatusOr<cache::StoreStats> CompileEngine::CacheStats() {
  return cache_->local().Stats();
}

absl::StatusOr<bool> CompileEngine::Lookup(std::string_view key) {
  absl::StatusOr<cache::Digest> digest = cache::Digest::Parse(AbslView(key));
  if (!digest.ok()) return digest.status();
  absl::StatusOr<cache::EntryInfo> info = cache_->local().Stat(*digest);
  if (info.ok()) return info->damage.empty();
  if (absl::IsNotFound(info.status())) return false;
  return info.status();
}

absl::StatusOr<KernelHandle> CompileEngine::Get(std::string_view key) {
  absl::StatusOr<cache::Digest> digest = cache::Digest::Parse(AbslView(key));
  if (!digest.ok()) return digest.status();
  return Fetch(*digest);
}

}  // namespace kiln::server
