#include "server/service_core.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cache/digest.h"
#include "server/tuning/autotuner.h"

namespace kiln::server {
namespace {

kiln::v1::TargetKind KindToProto(Target::Kind kind) {
  switch (kind) {
    case Target::Kind::kCpu:
      return kiln::v1::TARGET_KIND_CPU;
    case Target::Kind::kCuda:
      return kiln::v1::TARGET_KIND_CUDA;
    case Target::Kind::kHip:
      return kiln::v1::TARGET_KIND_HIP;
  }
  return kiln::v1::TARGET_KIND_UNSPECIFIED;
}

kiln::v1::Tier TierToProto(const std::string& tier) {
  if (tier == "memory") return kiln::v1::TIER_MEMORY;
  if (tier == "local") return kiln::v1::TIER_LOCAL;
  if (tier == "remote") return kiln::v1::TIER_REMOTE;
  if (tier == "compiled") return kiln::v1::TIER_COMPILED;
  return kiln::v1::TIER_UNSPECIFIED;
}

void HandleToProto(KernelHandle handle, bool omit_binary,
                   kiln::v1::KernelHandle* out) {
  out->set_key(std::move(handle.key));
  if (!omit_binary) out->set_binary(std::move(handle.binary));
  out->set_metadata(std::move(handle.metadata));
  out->set_kernel_name(std::move(handle.kernel_name));
  out->set_target(std::move(handle.target));
  out->set_compile_log(std::move(handle.compile_log));
}

double UnixSeconds(absl::Time t) {
  return absl::ToDoubleSeconds(t - absl::UnixEpoch());
}

}  // namespace

void CapabilitiesToProto(const HostCapabilities& capabilities,
                         kiln::v1::CapabilitiesResponse* response) {
  response->Clear();
  response->set_server_version(capabilities.server_version);
  for (const Target& target : capabilities.targets) {
    kiln::v1::Target* out = response->add_targets();
    out->set_name(target.name);
    out->set_kind(KindToProto(target.kind));
  }
  for (const auto& [name, version] : capabilities.toolchain_versions) {
    (*response->mutable_toolchain_versions())[name] = version;
  }
  for (const GpuInfo& gpu : capabilities.gpus) {
    kiln::v1::Gpu* out = response->add_gpus();
    out->set_index(gpu.index);
    out->set_name(gpu.name);
    out->set_target(gpu.target);
    out->set_sku(gpu.sku);
    out->set_multiprocessors(gpu.multiprocessors);
    out->set_memory_bytes(gpu.memory_bytes);
  }
}

std::string ResolveTarget(const HostCapabilities& capabilities,
                          const std::string& requested) {
  if (!requested.empty() && requested != "auto") return requested;
  for (const GpuInfo& gpu : capabilities.gpus) {
    for (const Target& target : capabilities.targets) {
      if (target.name == gpu.target) return gpu.target;
    }
  }
  return "cpu";
}

ServiceCore::ServiceCore(CompileEngine* engine, HostCapabilities capabilities)
    : engine_(engine), capabilities_(std::move(capabilities)) {}

ServiceCore::~ServiceCore() = default;

void ServiceCore::EnableAutotune(cache::Cache* cache) {
  tuning::AutotunerOptions options;
  options.allow_faults = tuning::FaultsAllowedByEnvironment();
  for (const GpuInfo& gpu : capabilities_.gpus) {
    options.gpus.push_back({gpu.index, gpu.target, gpu.sku});
  }
  autotuner_ =
      std::make_unique<tuning::Autotuner>(engine_, cache, std::move(options));
}

absl::Status ServiceCore::Autotune(
    const kiln::v1::AutotuneRequest& request, const CallContext& call,
    const std::function<void(const kiln::v1::AutotuneProgress&)>& progress) {
  if (autotuner_ == nullptr) {
    return absl::UnimplementedError("autotuning is not enabled here");
  }
  kiln::v1::AutotuneRequest resolved = request;
  resolved.set_target(ResolveTarget(capabilities_, request.target()));
  tuning::Autotuner::Call tune_call;
  tune_call.deadline = call.deadline;
  tune_call.cancelled = call.cancelled;
  return autotuner_->Tune(resolved, tune_call, progress);
}

kiln::v1::CapabilitiesResponse ServiceCore::Capabilities() const {
  kiln::v1::CapabilitiesResponse response;
  CapabilitiesToProto(capabilities_, &response);
  return response;
}

CompileRequest ServiceCore::ToEngineRequest(
    const kiln::v1::CompileRequest& request, const CallContext& call) const {
  CompileRequest out;
  out.ir_text = request.ir_text();
  out.kernel = request.kernel();
  out.target = ResolveTarget(capabilities_, request.target());
  out.bindings.insert(request.bindings().begin(), request.bindings().end());
  if (!request.filename().empty()) out.filename = request.filename();
  out.deadline = call.deadline;
  out.cancelled = call.cancelled;
  return out;
}

absl::StatusOr<kiln::v1::CompileResponse> ServiceCore::Compile(
    const kiln::v1::CompileRequest& request, const CallContext& call) {
  const absl::Time start = absl::Now();
  if (request.ir_text().empty()) {
    return absl::InvalidArgumentError("compile request has no IR text");
  }
  absl::StatusOr<KernelHandle> handle =
      engine_->Compile(ToEngineRequest(request, call));
  if (!handle.ok()) return handle.status();
  kiln::v1::CompileResponse response;
  response.set_tier(TierToProto(handle->tier));
  response.set_compile_ms(handle->compile_ms);
  HandleToProto(*std::move(handle), request.omit_binary(),
                response.mutable_kernel());
  response.set_server_ms(absl::ToDoubleMilliseconds(absl::Now() - start));
  return response;
}

absl::StatusOr<kiln::v1::GetKernelResponse> ServiceCore::GetKernel(
    const kiln::v1::GetKernelRequest& request) {
  absl::StatusOr<KernelHandle> handle = engine_->Get(request.key());
  if (!handle.ok()) return handle.status();
  kiln::v1::GetKernelResponse response;
  response.set_tier(TierToProto(handle->tier));
  HandleToProto(*std::move(handle), false, response.mutable_kernel());
  return response;
}

absl::StatusOr<kiln::v1::LookupResponse> ServiceCore::Lookup(
    const kiln::v1::LookupRequest& request) {
  std::string key;
  switch (request.what_case()) {
    case kiln::v1::LookupRequest::kKey:
      key = request.key();
      break;
    case kiln::v1::LookupRequest::kRequest: {
      absl::StatusOr<std::string> computed =
          engine_->KeyFor(ToEngineRequest(request.request(), CallContext{}));
      if (!computed.ok()) return computed.status();
      key = *std::move(computed);
      break;
    }
    default:
      return absl::InvalidArgumentError(
          "lookup request has neither a key nor a compile request");
  }
  absl::StatusOr<bool> present = engine_->Lookup(key);
  if (!present.ok()) return present.status();
  kiln::v1::LookupResponse response;
  response.set_key(std::move(key));
  response.set_present(*present);
  return response;
}

absl::Status ServiceCore::Prewarm(
    const kiln::v1::PrewarmRequest& request, const CallContext& call,
    const std::function<void(const kiln::v1::PrewarmProgress&)>& progress) {
  const int total = request.requests_size();
  if (total == 0) {
    return absl::InvalidArgumentError("prewarm request has no kernels");
  }
  if (total > kMaxPrewarmBatch) {
    return absl::InvalidArgumentError(absl::StrCat("prewarm batch of ", total,
                                                   " kernels; the limit is ",
                                                   kMaxPrewarmBatch));
  }
  std::vector<CompileRequest> requests;
  requests.reserve(total);
  for (const kiln::v1::CompileRequest& r : request.requests()) {
    requests.push_back(ToEngineRequest(r, call));
  }
  // Enough callers to keep the workers busy and serve hits meanwhile.
  const int parallelism = static_cast<int>(
      std::clamp(2u * std::thread::hardware_concurrency(), 4u, 64u));
  int done = 0;
  engine_->CompileBatch(
      requests, parallelism,
      [&](size_t index, const absl::StatusOr<KernelHandle>& result) {
        kiln::v1::PrewarmProgress message;
        message.set_index(static_cast<int32_t>(index));
        message.set_done(++done);
        message.set_total(total);
        if (result.ok()) {
          message.set_key(result->key);
          message.set_tier(TierToProto(result->tier));
        } else {
          message.set_error_code(static_cast<int32_t>(result.status().code()));
          message.set_error_message(std::string(result.status().message()));
        }
        progress(message);
      });
  return absl::OkStatus();
}

absl::StatusOr<kiln::v1::StatsResponse> ServiceCore::Stats() {
  const EngineStats e = engine_->Stats();
  kiln::v1::StatsResponse response;
  response.set_hits(e.hits);
  response.set_memory_hits(e.memory_hits);
  response.set_cancelled(e.cancelled);
  response.set_misses(e.misses);
  response.set_compiles(e.compiles);
  response.set_single_flight_joins(e.single_flight_joins);
  response.set_errors(e.errors);
  response.set_deadline_exceeded(e.deadline_exceeded);
  response.set_active_compiles(e.active_compiles);
  response.set_peak_running_compiles(e.peak_running_compiles);
  response.set_remembered_failures(e.remembered_failures);
  response.set_cluster_waits(e.cluster_waits);
  response.set_cluster_served(e.cluster_served);
  response.set_cluster_failures(e.cluster_failures);
  response.set_cluster_takeovers(e.cluster_takeovers);
  absl::StatusOr<cache::StoreStats> c = engine_->CacheStats();
  if (!c.ok()) return c.status();
  response.set_cache_entries(c->entries);
  response.set_cache_entry_bytes(c->entry_bytes);
  response.set_cache_disk_bytes(c->disk_bytes);
  for (const auto& [name, value] : c->counters) {
    (*response.mutable_cache_counters())[name] = value;
  }
  response.set_uptime_seconds(absl::ToDoubleSeconds(absl::Now() - started_));
  return response;
}

absl::StatusOr<kiln::v1::ListKernelsResponse> ServiceCore::ListKernels(
    const kiln::v1::ListKernelsRequest& request) {
  cache::EntryFilter filter;
  filter.kernel_name = request.kernel_name();
  filter.target_arch = request.target();
  filter.limit = request.limit();
  absl::StatusOr<std::vector<cache::EntryInfo>> entries = engine_->List(filter);
  if (!entries.ok()) return entries.status();
  kiln::v1::ListKernelsResponse response;
  for (const cache::EntryInfo& info : *entries) {
    // A damaged entry is never served: listing it would promise a kernel.
    if (!info.damage.empty()) continue;
    kiln::v1::KernelSummary* out = response.add_kernels();
    out->set_key(info.key.hex());
    out->set_kernel_name(info.metadata.kernel_name);
    out->set_target(info.metadata.target_arch);
    out->set_size_bytes(info.size);
    out->set_created_unix_seconds(UnixSeconds(info.created));
    out->set_last_access_unix_seconds(UnixSeconds(info.last_access));
  }
  return response;
}

absl::StatusOr<kiln::v1::EvictResponse> ServiceCore::Evict(
    const kiln::v1::EvictRequest& request) {
  // Check every key first (no I/O): a malformed one evicts nothing.
  for (const std::string& key : request.keys()) {
    if (absl::Status status = cache::Digest::Parse(key).status();
        !status.ok()) {
      return status;
    }
  }
  kiln::v1::EvictResponse response;
  for (const std::string& key : request.keys()) {
    absl::Status status = engine_->Evict(key);
    if (status.ok()) {
      response.add_evicted(key);
    } else if (absl::IsNotFound(status)) {
      response.add_not_found(key);
    } else {
      return status;
    }
  }
  return response;
}

}  // namespace kiln::server
