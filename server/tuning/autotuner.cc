#include "server/tuning/autotuner.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "cache/digest.h"
#include "cache/entry.h"
#include "compiler/tuning_space.h"
#include "server/tuning/output_check.h"
#include "server/tuning/resource_check.h"
#include "server/tuning/tune_plan.h"
#include "server/tuning/tuning_key.h"
#include "server/tuning/tuning_record.h"
#include "server/tuning/worker_process.h"

namespace kiln::server::tuning {

// One benchmark device: its SKU and worker, used by one tuning at a time.
struct Autotuner::Device {
  std::string name;  // the worker's --device: "cpu", "cuda:0"
  std::string sku;
  absl::Mutex mu;
  std::unique_ptr<WorkerProcess> worker ABSL_GUARDED_BY(mu);
};

namespace {

using kiln::v1::AutotuneProgress;
using kiln::v1::AutotuneRequest;
using kiln::v1::AutotuneResult;
using kiln::v1::CandidateResult;

constexpr int kDefaultMinRuns = 10;
constexpr double kDefaultMinTimeMs = 50;
constexpr double kDefaultTimeLimitS = 20;
constexpr int kDefaultRemeasureTop = 3;
constexpr uint64_t kDefaultSeed = 0x6b696c6e;  // "kiln"
constexpr int kWarmupRuns = 2;
constexpr int kMaxRuns = 10000;

// A compile error that says nothing about the candidate (the caller gave
// up, the engine is full or shutting down): it ends the tuning instead of
// pruning.
bool IsAboutTheCall(const absl::Status& status) {
  return absl::IsCancelled(status) || absl::IsDeadlineExceeded(status) ||
         absl::IsUnavailable(status) || absl::IsResourceExhausted(status);
}

template <typename T>
T Or(T value, T fallback) {
  return value > 0 ? value : fallback;
}

}  // namespace

bool FaultsAllowedByEnvironment() {
  const char* v = std::getenv("KILN_BENCH_WORKER_FAULTS");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

Autotuner::Autotuner(CompileEngine* engine, cache::Cache* cache,
                     AutotunerOptions options)
    : engine_(engine), cache_(cache), options_(std::move(options)) {}

Autotuner::~Autotuner() = default;

int Autotuner::worker_starts() const {
  absl::MutexLock lock(&mu_);
  int n = 0;
  for (const auto& [name, device] : devices_) {
    absl::MutexLock device_lock(&device->mu);
    if (device->worker != nullptr) n += device->worker->starts();
  }
  return n;
}

absl::StatusOr<Autotuner::Device*> Autotuner::DeviceFor(
    const std::string& target) {
  std::string name, sku;
  if (target == "cpu") {
    name = "cpu";
    sku = CpuSku();
  } else if (absl::StartsWith(target, "gfx")) {
    // The benchmark worker runs CUDA and CPU kernels only.
    return absl::FailedPreconditionError(absl::StrCat(
        "autotuning ", target,
        " is not supported yet: the benchmark worker has no HIP path "
        "(compile with fixed values instead: kiln compile --target ",
        target, " -D ...)"));
  } else {
    for (const TuningGpu& gpu : options_.gpus) {
      if (gpu.target == target) {
        name = absl::StrCat("cuda:", gpu.index);
        sku = gpu.sku;
        break;
      }
    }
    if (name.empty()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "no GPU of target ", target,
          " on this host: autotuning runs the candidates, so it needs one"));
    }
  }
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Device>& device = devices_[name];
  if (device == nullptr) {
    device = std::make_unique<Device>();
    device->name = name;
    device->sku = sku;
  }
  return device.get();
}

absl::StatusOr<kiln::bench::v1::BenchReply> Autotuner::CpuReference(
    const CompileRequest& request, const kiln::bench::v1::BenchRequest& bench,
    Device* held, const std::string& worker_path, absl::Duration limit,
    const Call& call) {
  absl::StatusOr<KernelHandle> handle = engine_->Compile(request);
  if (!handle.ok()) return handle.status();
  absl::StatusOr<Device*> cpu = DeviceFor("cpu");
  if (!cpu.ok()) return cpu.status();
  // The caller holds its device's lock; a CPU tuning holds the CPU's.
  std::optional<absl::MutexLock> lock;
  if (*cpu != held) lock.emplace(&(*cpu)->mu);
  if ((*cpu)->worker == nullptr) {
    (*cpu)->worker = std::make_unique<WorkerProcess>(worker_path, "cpu",
                                                     options_.allow_faults);
  }
  kiln::bench::v1::BenchRequest run = bench;
  run.set_label("cpu-reference");
  run.set_binary(handle->binary);
  run.set_metadata(handle->metadata);
  run.set_return_outputs(true);
  run.set_fault("");
  run.set_warmup_runs(0);
  run.set_min_runs(1);
  run.set_max_runs(1);
  run.set_min_time_ms(0);
  absl::StatusOr<kiln::bench::v1::BenchReply> reply =
      (*cpu)->worker->Call(run, limit, call.cancelled);
  if (reply.ok() && !reply->error().empty()) {
    return absl::InternalError(reply->error());
  }
  return reply;
}

absl::Status Autotuner::Tune(
    const AutotuneRequest& request, const Call& call,
    const std::function<void(const AutotuneProgress&)>& progress) {
  const absl::Time start = absl::Now();
  absl::StatusOr<TunePlan> plan = PlanTuning(request, options_.allow_faults);
  if (!plan.ok()) return plan.status();
  const kiln::v1::AutotuneOptions& opt = request.options();
  const compiler::Kernel* kernel = &plan->kernel;
  const std::string& filename = plan->filename;
  const std::string& target = plan->target;
  const Bindings& shape = plan->shape;
  const Bindings& fixed = plan->fixed;
  const std::vector<compiler::TunableValues>& space = plan->space;

  // Compiling only needs no device (and stores no result).
  Device* device = nullptr;
  if (!opt.compile_only()) {
    absl::StatusOr<Device*> found = DeviceFor(target);
    if (!found.ok()) return found.status();
    device = *found;
  }
  const std::string sku = device != nullptr ? device->sku : "";
  TuningKeyParts parts;
  parts.kernel_hash = KernelHashWithoutTunableValues(*kernel);
  parts.fixed = fixed;
  parts.target = target;
  parts.sku = sku;
  parts.bucket = ShapeBucket(shape);
  const std::string key_text = TuningKeyText(parts);
  const std::string tuning_key = TuningKey(parts);
  absl::StatusOr<cache::Digest> digest = cache::Digest::Parse(tuning_key);
  if (!digest.ok()) return digest.status();

  AutotuneProgress event;
  event.set_tuning_key(tuning_key);
  event.set_total(static_cast<int32_t>(space.size()));
  const auto emit = [&](AutotuneProgress::Event kind, std::string message) {
    event.set_event(kind);
    event.set_message(std::move(message));
    progress(event);
    event.clear_candidate();
  };

  // A stored result answers at once when it considered every candidate of
  // today's space (so its choice is also today's best) and its choice is
  // in today's space. A result tuned over fewer configs is not reused for
  // a wider space.
  if (!opt.force() && !opt.compile_only()) {
    absl::StatusOr<cache::Entry> entry = cache_->Get(*digest);
    if (entry.ok()) {
      const cache::Blob* blob = entry->Find(kTuningResultBlob);
      AutotuneResult stored;
      if (blob != nullptr && stored.ParseFromString(blob->data)) {
        compiler::TunableValues best(stored.best_bindings().begin(),
                                     stored.best_bindings().end());
        std::set<compiler::TunableValues> considered;
        for (const auto& c : stored.candidates()) {
          considered.emplace(c.bindings().begin(), c.bindings().end());
        }
        const bool covers = std::all_of(space.begin(), space.end(),
                                        [&](const compiler::TunableValues& v) {
                                          return considered.count(v) > 0;
                                        });
        if (covers &&
            std::find(space.begin(), space.end(), best) != space.end()) {
          stored.set_cached(true);
          stored.mutable_excluded_configs()->Assign(
              plan->excluded_configs.begin(), plan->excluded_configs.end());
          *event.mutable_result() = std::move(stored);
          emit(AutotuneProgress::EVENT_CACHED,
               absl::StrCat("cached: ", event.result().best_label(),
                            " (tuning key ", tuning_key, ")"));
          return absl::OkStatus();
        }
      }
    } else if (!absl::IsNotFound(entry.status())) {
      return entry.status();
    }
  }

  AutotuneResult result;
  result.set_tuning_key(tuning_key);
  result.set_kernel_name(kernel->name);
  result.set_target(target);
  result.set_device_sku(sku);
  result.mutable_shape()->insert(shape.begin(), shape.end());
  result.mutable_shape_bucket()->insert(parts.bucket.begin(),
                                        parts.bucket.end());
  result.mutable_fixed_bindings()->insert(fixed.begin(), fixed.end());
  result.mutable_excluded_configs()->Assign(plan->excluded_configs.begin(),
                                            plan->excluded_configs.end());
  for (size_t i = 0; i < space.size(); ++i) {
    CandidateResult* c = result.add_candidates();
    c->set_index(static_cast<int32_t>(i));
    c->mutable_bindings()->insert(space[i].begin(), space[i].end());
    c->set_label(Label(space[i]));
  }
  emit(AutotuneProgress::EVENT_STARTED,
       device != nullptr
           ? absl::StrCat("tuning ", kernel->name, " for ", target, " (", sku,
                          "): ", space.size(), " candidates")
           : absl::StrCat("compiling the ", space.size(), " candidates of ",
                          kernel->name, " for ", target,
                          " (compile only: nothing is benchmarked)"));

  // Compile every candidate in parallel, through the cache.
  std::vector<CompileRequest> compiles;
  for (const compiler::TunableValues& v : space) {
    CompileRequest r;
    r.ir_text = request.ir_text();
    r.kernel = kernel->name;
    r.target = target;
    r.bindings = fixed;
    r.bindings.insert(v.begin(), v.end());
    r.filename = filename;
    r.deadline = call.deadline;
    r.cancelled = call.cancelled;
    compiles.push_back(std::move(r));
  }
  std::vector<KernelHandle> handles(space.size());
  int compiled = 0;
  absl::Status call_error;
  const int parallelism =
      options_.compile_parallelism > 0
          ? options_.compile_parallelism
          : static_cast<int>(
                std::clamp(2u * std::thread::hardware_concurrency(), 2u, 64u));
  engine_->CompileBatch(
      compiles, parallelism,
      [&](size_t i, const absl::StatusOr<KernelHandle>& handle) {
        CandidateResult* c = result.mutable_candidates(static_cast<int>(i));
        if (!handle.ok() && IsAboutTheCall(handle.status())) {
          // Not the candidate's fault: the whole tuning stops below.
          if (call_error.ok()) call_error = handle.status();
          c->set_status(kiln::v1::CANDIDATE_STATUS_FAILED);
          c->set_reason(std::string(handle.status().message()));
        } else if (!handle.ok()) {
          c->set_status(kiln::v1::CANDIDATE_STATUS_PRUNED);
          c->set_reason(
              absl::StrCat("does not compile: ", handle.status().message()));
        } else {
          c->set_kernel_key(handle->key);
          c->set_compile_ms(handle->compile_ms);
          std::string excess = ResourceExcess(handle->metadata, target);
          if (!excess.empty()) {
            c->set_status(kiln::v1::CANDIDATE_STATUS_PRUNED);
            c->set_reason(std::move(excess));
          } else {
            c->set_status(kiln::v1::CANDIDATE_STATUS_COMPILED);
            handles[i] = *handle;
          }
        }
        event.set_compiled(++compiled);
        *event.mutable_candidate() = *c;
        switch (c->status()) {
          case kiln::v1::CANDIDATE_STATUS_PRUNED:
            emit(AutotuneProgress::EVENT_PRUNED,
                 absl::StrCat("pruned ", c->label(), ": ", c->reason()));
            break;
          case kiln::v1::CANDIDATE_STATUS_FAILED:
            emit(AutotuneProgress::EVENT_FAILED,
                 absl::StrCat(c->label(), ": ", c->reason()));
            break;
          default:
            emit(AutotuneProgress::EVENT_COMPILED,
                 absl::StrCat("compiled ", c->label()));
            break;
        }
      });
  const auto stopped = [&]() -> absl::Status {
    if (call.cancelled && call.cancelled()) {
      return absl::CancelledError("autotune cancelled by the caller");
    }
    if (absl::Now() > call.deadline) {
      return absl::DeadlineExceededError("autotune deadline exceeded");
    }
    return absl::OkStatus();
  };
  if (absl::Status s = stopped(); !s.ok()) return s;
  if (!call_error.ok()) return call_error;

  // Spilling candidates are pruned when some candidate does not spill (a
  // kernel that spills is almost never the fastest, and measuring it costs
  // time); when all spill, all are measured.
  std::vector<std::string> spills(space.size());
  bool some_fit = false;
  for (size_t i = 0; i < space.size(); ++i) {
    if (result.candidates(static_cast<int>(i)).status() !=
        kiln::v1::CANDIDATE_STATUS_COMPILED) {
      continue;
    }
    spills[i] = SpillReport(handles[i].metadata);
    some_fit = some_fit || spills[i].empty();
  }
  for (size_t i = 0; i < space.size() && some_fit; ++i) {
    if (spills[i].empty()) continue;
    CandidateResult* c = result.mutable_candidates(static_cast<int>(i));
    c->set_status(kiln::v1::CANDIDATE_STATUS_PRUNED);
    c->set_reason(spills[i]);
    *event.mutable_candidate() = *c;
    emit(AutotuneProgress::EVENT_PRUNED,
         absl::StrCat("pruned ", c->label(), ": ", c->reason()));
  }

  if (device == nullptr) {
    result.set_compile_only(true);
    result.clear_tuning_key();
    result.set_tuning_ms(absl::ToDoubleMilliseconds(absl::Now() - start));
    result.set_created_unix_seconds(absl::ToUnixSeconds(absl::Now()));
    const int ready = static_cast<int>(std::count_if(
        result.candidates().begin(), result.candidates().end(),
        [](const CandidateResult& c) {
          return c.status() == kiln::v1::CANDIDATE_STATUS_COMPILED;
        }));
    *event.mutable_result() = std::move(result);
    emit(AutotuneProgress::EVENT_DONE,
         absl::StrCat("compiled ", ready, " of ", space.size(),
                      " candidates (compile only)"));
    return absl::OkStatus();
  }

  // Benchmark, one candidate at a time in the device's worker.
  absl::StatusOr<std::string> worker_path =
      options_.worker_path.empty()
          ? FindBenchWorker()
          : absl::StatusOr<std::string>(options_.worker_path);
  if (!worker_path.ok()) return worker_path.status();
  const absl::Duration limit =
      absl::Seconds(Or(opt.time_limit_per_candidate_s(), kDefaultTimeLimitS));
  kiln::bench::v1::BenchRequest bench;
  bench.mutable_shape()->insert(shape.begin(), shape.end());
  bench.mutable_shape()->insert(plan->fixed_symbols.begin(),
                                plan->fixed_symbols.end());
  bench.set_seed(opt.seed() != 0 ? opt.seed() : kDefaultSeed);
  bench.set_warmup_runs(kWarmupRuns);
  bench.set_min_runs(Or(opt.min_runs(), kDefaultMinRuns));
  bench.set_min_time_ms(Or(opt.min_time_ms(), kDefaultMinTimeMs));
  bench.set_max_runs(std::max(kMaxRuns, bench.min_runs()));
  bench.set_max_time_ms(absl::ToDoubleMilliseconds(limit) / 2);

  // One tuning at a time per device, so that timings are not disturbed;
  // a caller waiting for its turn may still give up.
  Device& dev = *device;
  bool said_waiting = false;
  while (!dev.mu.TryLock()) {
    if (absl::Status s = stopped(); !s.ok()) return s;
    if (!said_waiting) {
      emit(AutotuneProgress::EVENT_WAITING,
           absl::StrCat("waiting for the ", dev.name,
                        " benchmark worker (another tuning is running)"));
      said_waiting = true;
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  struct Unlock {
    absl::Mutex* mu;
    ~Unlock() { mu->Unlock(); }
  } device_lock{&dev.mu};
  if (dev.worker == nullptr) {
    dev.worker = std::make_unique<WorkerProcess>(*worker_path, dev.name,
                                                 options_.allow_faults);
  }
  // Runs candidate `i`; its reply, or the reason it failed.
  const auto run =
      [&](size_t i,
          bool outputs) -> absl::StatusOr<kiln::bench::v1::BenchReply> {
    CandidateResult& c = *result.mutable_candidates(static_cast<int>(i));
    bench.set_label(c.label());
    bench.set_binary(handles[i].binary);
    bench.set_metadata(handles[i].metadata);
    bench.set_return_outputs(outputs);
    auto fault = opt.faults().find(c.label());
    bench.set_fault(fault != opt.faults().end() ? fault->second : "");
    absl::StatusOr<kiln::bench::v1::BenchReply> reply =
        dev.worker->Call(bench, limit, call.cancelled);
    if (reply.ok() && !reply->error().empty()) {
      return absl::InternalError(reply->error());
    }
    return reply;
  };
  int benchmarked = 0;
  google::protobuf::RepeatedPtrField<kiln::bench::v1::Tensor> reference;
  std::string reference_label;
  bool have_reference = false;

  // At small shapes a GPU tuning checks every candidate against the CPU
  // target's output, so that a wrong first candidate cannot become the
  // reference of the others.
  int64_t work = 1;
  for (const auto& [name, value] : bench.shape()) {
    work = value > 0 && work <= options_.cpu_reference_max_work / value
               ? work * value
               : options_.cpu_reference_max_work + 1;
  }
  if (options_.cpu_reference_always ||
      (target != "cpu" && work <= options_.cpu_reference_max_work)) {
    auto first =
        std::find_if(result.candidates().begin(), result.candidates().end(),
                     [](const CandidateResult& c) {
                       return c.status() == kiln::v1::CANDIDATE_STATUS_COMPILED;
                     });
    if (first != result.candidates().end()) {
      CompileRequest r = compiles[first->index()];
      r.target = "cpu";
      absl::StatusOr<kiln::bench::v1::BenchReply> cpu =
          CpuReference(r, bench, &dev, *worker_path, limit, call);
      if (absl::IsCancelled(cpu.status())) return cpu.status();
      if (cpu.ok()) {
        reference = std::move(*cpu->mutable_tensors());
        reference_label = "the CPU target";
        have_reference = true;
        result.set_reference(
            absl::StrCat("the CPU target (", first->label(), ")"));
      } else {
        result.set_reference(absl::StrCat(
            "the first candidate that ran (the CPU target could not: ",
            cpu.status().message(), ")"));
      }
    }
  }
  // A candidate whose first few runs are this much slower than the best so
  // far cannot win: its timing stops there (the check of its output does
  // not).
  constexpr double kDropAbove = 1.5;
  double best_so_far = 0;
  for (size_t i = 0; i < space.size(); ++i) {
    CandidateResult& c = *result.mutable_candidates(static_cast<int>(i));
    if (c.status() != kiln::v1::CANDIDATE_STATUS_COMPILED) continue;
    if (absl::Status s = stopped(); !s.ok()) return s;
    bench.set_stop_above_us(best_so_far * kDropAbove);
    absl::StatusOr<kiln::bench::v1::BenchReply> reply = run(i, true);
    bench.set_stop_above_us(0);
    if (absl::IsCancelled(reply.status())) return reply.status();
    AutotuneProgress::Event kind = AutotuneProgress::EVENT_BENCHMARKED;
    if (!reply.ok()) {
      c.set_status(kiln::v1::CANDIDATE_STATUS_FAILED);
      c.set_reason(std::string(reply.status().message()));
      kind = AutotuneProgress::EVENT_FAILED;
    } else if (!have_reference) {
      reference = std::move(*reply->mutable_tensors());
      reference_label = c.label();
      have_reference = true;
      if (result.reference().empty()) {
        result.set_reference(
            absl::StrCat(c.label(), " (the first candidate that ran)"));
      }
    } else if (std::string diff = CompareOutputs(reply->tensors(), reference);
               !diff.empty()) {
      c.set_status(kiln::v1::CANDIDATE_STATUS_WRONG);
      c.set_reason(
          absl::StrCat("output differs from ", reference_label, "'s: ", diff));
      kind = AutotuneProgress::EVENT_WRONG;
    }
    if (kind == AutotuneProgress::EVENT_BENCHMARKED) {
      c.set_status(kiln::v1::CANDIDATE_STATUS_BENCHMARKED);
      SetTimes({reply->times_us().begin(), reply->times_us().end()}, &c);
      if (best_so_far > 0 && c.median_us() > best_so_far * kDropAbove &&
          reply->times_us_size() < bench.min_runs()) {
        c.set_reason(absl::StrFormat(
            "timing stopped after %d runs: %.2fx the best so far",
            reply->times_us_size(), c.median_us() / best_so_far));
      }
      if (best_so_far == 0 || c.median_us() < best_so_far) {
        best_so_far = c.median_us();
      }
    }
    event.set_benchmarked(++benchmarked);
    *event.mutable_candidate() = c;
    emit(kind, absl::StrCat(c.label(), ": ",
                            kind == AutotuneProgress::EVENT_BENCHMARKED
                                ? absl::StrFormat("%.1f us", c.median_us())
                                : c.reason()));
  }

  // Measure the fastest few again (without the first pass's noise).
  std::vector<int> ranked;
  for (const CandidateResult& c : result.candidates()) {
    if (c.status() == kiln::v1::CANDIDATE_STATUS_BENCHMARKED) {
      ranked.push_back(c.index());
    }
  }
  std::sort(ranked.begin(), ranked.end(), [&](int a, int b) {
    return result.candidates(a).median_us() < result.candidates(b).median_us();
  });
  const size_t top = static_cast<size_t>(
      Or<int32_t>(opt.remeasure_top(), kDefaultRemeasureTop));
  if (ranked.size() > 1) {
    for (size_t r = 0; r < std::min(top, ranked.size()); ++r) {
      if (absl::Status s = stopped(); !s.ok()) return s;
      CandidateResult& c = *result.mutable_candidates(ranked[r]);
      absl::StatusOr<kiln::bench::v1::BenchReply> reply = run(ranked[r], false);
      if (absl::IsCancelled(reply.status())) return reply.status();
      if (!reply.ok()) {
        c.set_status(kiln::v1::CANDIDATE_STATUS_FAILED);
        c.set_reason(
            absl::StrCat("when measured again: ", reply.status().message()));
      } else {
        SetTimes({reply->times_us().begin(), reply->times_us().end()}, &c);
        c.set_remeasured(true);
        c.clear_reason();  // an early stop of the first pass is moot now
      }
      *event.mutable_candidate() = c;
      emit(reply.ok() ? AutotuneProgress::EVENT_REMEASURED
                      : AutotuneProgress::EVENT_FAILED,
           absl::StrCat(c.label(), " measured again: ",
                        reply.ok() ? absl::StrFormat("%.1f us", c.median_us())
                                   : c.reason()));
    }
  }

  // The lowest median among those measured twice (when any were): a
  // candidate measured once must not win on its first pass's luck.
  bool any_remeasured = false;
  for (const CandidateResult& c : result.candidates()) {
    any_remeasured |=
        c.remeasured() && c.status() == kiln::v1::CANDIDATE_STATUS_BENCHMARKED;
  }
  const CandidateResult* best = nullptr;
  for (const CandidateResult& c : result.candidates()) {
    if (c.status() == kiln::v1::CANDIDATE_STATUS_BENCHMARKED &&
        (c.remeasured() || !any_remeasured) &&
        (best == nullptr || c.median_us() < best->median_us())) {
      best = &c;
    }
  }
  if (best == nullptr) {
    std::vector<std::string> reasons;
    for (const CandidateResult& c : result.candidates()) {
      if (reasons.size() < 3) {
        reasons.push_back(absl::StrCat(c.label(), ": ", c.reason()));
      }
    }
    return absl::FailedPreconditionError(
        absl::StrCat("no candidate of kernel '", kernel->name,
                     "' ran correctly (", absl::StrJoin(reasons, "; "),
                     result.candidates_size() > 3 ? "; ..." : "", ")"));
  }
  result.mutable_best_bindings()->insert(best->bindings().begin(),
                                         best->bindings().end());
  result.set_best_label(best->label());
  result.set_best_kernel_key(best->kernel_key());
  result.set_best_median_us(best->median_us());
  result.set_tuning_ms(absl::ToDoubleMilliseconds(absl::Now() - start));
  result.set_created_unix_seconds(absl::ToUnixSeconds(absl::Now()));

  cache::EntryData data;
  data.metadata.kernel_name = kernel->name;
  data.metadata.target_arch = target;
  data.metadata.gpu_sku = dev.sku;
  data.metadata.extra = absl::StrCat("autotune result: ", best->label());
  data.blobs.push_back({kTuningResultBlob, result.SerializeAsString()});
  data.blobs.push_back({kTuningTextBlob, ExplainTuning(result, key_text)});
  data.blobs.push_back({kTuningKeyTextBlob, key_text});
  if (absl::Status s = cache_->Put(*digest, data); !s.ok()) return s;

  *event.mutable_result() = std::move(result);
  emit(AutotuneProgress::EVENT_DONE,
       absl::StrCat("chose ", event.result().best_label(), " (tuning key ",
                    tuning_key, ")"));
  return absl::OkStatus();
}

}  // namespace kiln::server::tuning
