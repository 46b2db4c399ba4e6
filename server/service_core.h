// ServiceCore: the Kiln service's behaviour, request message in, response
// message (or absl::Status) out, with no transport. The gRPC service
// (kiln_service.h) wraps it for kilnd; the client's embedded mode calls it
// in process, so both answer exactly alike.
#ifndef KILN_SERVER_SERVICE_CORE_H_
#define KILN_SERVER_SERVICE_CORE_H_

#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/kiln.pb.h"
#include "server/capabilities.h"
#include "server/engine/compile_engine.h"

namespace kiln::server {

namespace tuning {
class Autotuner;
}  // namespace tuning

// What a call carries besides its message.
struct CallContext {
  // When the caller stops waiting.
  absl::Time deadline = absl::InfiniteFuture();
  // True once the caller has gone away (polled while waiting).
  std::function<bool()> cancelled;
};

// Fills `response` from `capabilities` (replacing what it held).
void CapabilitiesToProto(const HostCapabilities& capabilities,
                         kiln::v1::CapabilitiesResponse* response);

// The concrete target for a requested one: "auto" or "" become the first
// GPU's target when the host has a GPU whose target is compilable, else
// "cpu"; anything else is returned as given (the compiler checks it).
std::string ResolveTarget(const HostCapabilities& capabilities,
                          const std::string& requested);

class ServiceCore {
 public:
  // `engine` is not owned and must outlive the core.
  ServiceCore(CompileEngine* engine, HostCapabilities capabilities);
  ~ServiceCore();

  // Turns Autotune on: results are stored in `cache` (not owned; the
  // engine's cache; must outlive the core). Call once, before serving.
  void EnableAutotune(cache::Cache* cache);

  const HostCapabilities& capabilities() const { return capabilities_; }

  kiln::v1::CapabilitiesResponse Capabilities() const;

  // Errors as CompileEngine::Compile (InvalidArgument for an empty IR text).
  absl::StatusOr<kiln::v1::CompileResponse> Compile(
      const kiln::v1::CompileRequest& request, const CallContext& call);

  absl::StatusOr<kiln::v1::GetKernelResponse> GetKernel(
      const kiln::v1::GetKernelRequest& request);

  // InvalidArgument when neither a key nor a request is given.
  absl::StatusOr<kiln::v1::LookupResponse> Lookup(
      const kiln::v1::LookupRequest& request);

  // Calls `progress` once per request as each finishes (one call at a
  // time). InvalidArgument (before any work) for an empty batch or one
  // larger than kMaxPrewarmBatch.
  absl::Status Prewarm(
      const kiln::v1::PrewarmRequest& request, const CallContext& call,
      const std::function<void(const kiln::v1::PrewarmProgress&)>& progress);

  absl::StatusOr<kiln::v1::StatsResponse> Stats();

  absl::StatusOr<kiln::v1::ListKernelsResponse> ListKernels(
      const kiln::v1::ListKernelsRequest& request);

  // InvalidArgument for a malformed key (nothing is evicted then).
  absl::StatusOr<kiln::v1::EvictResponse> Evict(
      const kiln::v1::EvictRequest& request);

  // Tunes one kernel (server/tuning/autotuner.h), calling `progress` for
  // every event, the last carrying the result. "auto" targets resolve as
  // for Compile. Unimplemented when EnableAutotune was not called; other
  // errors as tuning::Autotuner::Tune.
  absl::Status Autotune(
      const kiln::v1::AutotuneRequest& request, const CallContext& call,
      const std::function<void(const kiln::v1::AutotuneProgress&)>& progress);

  static constexpr int kMaxPrewarmBatch = 100000;

 private:
  CompileRequest ToEngineRequest(const kiln::v1::CompileRequest& request,
                                 const CallContext& call) const;

  CompileEngine* const engine_;
  const HostCapabilities capabilities_;
  const absl::Time started_ = absl::Now();
  std::unique_ptr<tuning::Autotuner> autotuner_;
};

}  // namespace kiln::server

#endif  // KILN_SERVER_SERVICE_CORE_H_
