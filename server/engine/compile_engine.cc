#include "server/engine/compile_engine.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cache/digest.h"
#include "cache/entry.h"

namespace kiln::server {

struct CompileEngine::Flight {
  std::string key;
  cache::Digest digest;
  std::string source;
  compiler::CompileOptions options;
  absl::Time limit;  // compile_time_limit after it was queued
  bool done = false;
  absl::StatusOr<KernelHandle> result = absl::UnknownError("not finished");
};

namespace {

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
  if (!options.compile_fn) options.compile_fn = compiler::Compile;
  return std::unique_ptr<CompileEngine>(
      new CompileEngine(cache, std::move(options)));
}

CompileEngine::CompileEngine(cache::Cache* cache, CompileEngineOptions options)
    : cache_(cache), options_(std::move(options)) {
  workers_.reserve(options_.worker_threads);
  for (int i = 0; i < options_.worker_threads; ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
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
  }
  for (std::thread& t : workers_) t.join();
  workers_.clear();
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
  compiler::CompileOptions copts;
  copts.target = request.target;
  copts.kernel = request.kernel;
  copts.bindings = request.bindings;
  copts.filename = request.filename;
  absl::StatusOr<std::string> key = compiler::BinaryKey(request.ir_text, copts);
  if (!key.ok()) return key.status();
  absl::StatusOr<cache::Digest> digest = cache::Digest::Parse(*key);
  if (!digest.ok()) {
    return absl::InternalError(absl::StrCat("compiler gave a malformed key: ",
                                            digest.status().message()));
  }

  absl::StatusOr<KernelHandle> hit = Fetch(*digest);
  if (hit.ok()) {
    absl::MutexLock lock(&mu_);
    ++stats_.hits;
    return hit;
  }
  if (!absl::IsNotFound(hit.status())) return hit.status();

  absl::MutexLock lock(&mu_);
  if (shutting_down_) {
    return absl::UnavailableError("compile engine is shutting down");
  }
  ++stats_.misses;
  std::shared_ptr<Flight> flight;
  auto it = flights_.find(*key);
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
    flight->key = *key;
    flight->digest = *digest;
    flight->source = request.ir_text;
    flight->options = std::move(copts);
    flight->limit = absl::Now() + options_.compile_time_limit;
    flights_.emplace(*key, flight);
    queue_.push_back(flight);
    ++pending_jobs_;
  }
  const absl::Time wait_until = std::min(request.deadline, flight->limit);
  mu_.AwaitWithDeadline(absl::Condition(&flight->done), wait_until);
  if (!flight->done) {
    if (absl::Now() < flight->limit) {
      // Only this caller gives up; the compile goes on for the others.
      return absl::DeadlineExceededError(absl::StrCat(
          "deadline passed while waiting for the compile of ", *key));
    }
    Finish(flight, absl::DeadlineExceededError(absl::StrCat(
                       "compile of ", *key, " exceeded the time limit of ",
                       absl::FormatDuration(options_.compile_time_limit))));
  }
  return flight->result;
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
      ++running_;
      stats_.peak_running_compiles =
          std::max(stats_.peak_running_compiles, running_);
    }
    RunFlight(flight);
    absl::MutexLock lock(&mu_);
    --running_;
    --pending_jobs_;
  }
}

void CompileEngine::RunFlight(std::shared_ptr<Flight> flight) {
  // A request that missed the cache just before another compile of the same
  // key stored it starts a new flight; serve that from the local store. (The
  // remote tier was asked moments ago by the request itself: asking it again
  // would only add a round trip to every miss.)
  absl::StatusOr<KernelHandle> result = absl::NotFoundError("not cached");
  if (absl::StatusOr<cache::Entry> stored =
          cache_->local().Get(flight->digest, /*record_use=*/false);
      stored.ok()) {
    result = HandleFromEntry(*stored, "local");
  }
  if (!result.ok()) {
    {
      absl::MutexLock lock(&mu_);
      ++stats_.compiles;
    }
    const absl::Time start = absl::Now();
    absl::StatusOr<compiler::CompiledKernel> compiled =
        options_.compile_fn(flight->source, flight->options);
    const double ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    if (!compiled.ok()) {
      result = compiled.status();
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
                    {kCompileLogBlob, h.compile_log}};
      absl::Status put = cache_->Put(flight->digest, data);
      if (!put.ok()) {
        // The kernel is good; only later requests lose the cache.
        absl::StrAppend(&h.compile_log, "cache put failed: ", put.ToString(),
                        "\n");
      }
      result = std::move(h);
    }
  }
  absl::MutexLock lock(&mu_);
  Finish(flight, std::move(result));
}

absl::StatusOr<KernelHandle> CompileEngine::Fetch(const cache::Digest& digest) {
  cache::Cache::Tier tier = cache::Cache::Tier::kLocal;
  absl::StatusOr<cache::Entry> entry =
      cache_->Get(digest, /*record_use=*/true, &tier);
  if (!entry.ok()) return entry.status();
  return HandleFromEntry(
      *entry, tier == cache::Cache::Tier::kRemote ? "remote" : "local");
}

absl::StatusOr<bool> CompileEngine::Lookup(std::string_view key) {
  absl::StatusOr<cache::Digest> digest = cache::Digest::Parse(AbslView(key));
  if (!digest.ok()) return digest.status();
  absl::StatusOr<cache::EntryInfo> info = cache_->local().Stat(*digest);
  if (info.ok()) return true;
  if (absl::IsNotFound(info.status())) return false;
  return info.status();
}

absl::StatusOr<KernelHandle> CompileEngine::Get(std::string_view key) {
  absl::StatusOr<cache::Digest> digest = cache::Digest::Parse(AbslView(key));
  if (!digest.ok()) return digest.status();
  return Fetch(*digest);
}

}  // namespace kiln::server
