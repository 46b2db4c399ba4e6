#include "client/embedded.h"

#include <algorithm>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "cache/cache.h"
#include "cache/cache_dir.h"
#include "server/capabilities.h"
#include "server/engine/compile_engine.h"
#include "server/service_core.h"

namespace kiln::client {
namespace {

server::CallContext Until(absl::Time deadline) {
  server::CallContext call;
  call.deadline = deadline;
  return call;
}

class EmbeddedTransport final : public Transport {
 public:
  EmbeddedTransport(std::unique_ptr<cache::Cache> cache,
                    std::unique_ptr<server::CompileEngine> engine)
      : cache_(std::move(cache)),
        engine_(std::move(engine)),
        core_(engine_.get(), server::ProbeHostCapabilities()) {
    core_.EnableAutotune(cache_.get());
  }

  ~EmbeddedTransport() override { engine_->Shutdown(); }

  absl::Status Health(absl::Time) override { return absl::OkStatus(); }
  absl::StatusOr<kiln::v1::CapabilitiesResponse> Capabilities(
      absl::Time) override {
    return core_.Capabilities();
  }
  absl::StatusOr<kiln::v1::CompileResponse> Compile(
      const kiln::v1::CompileRequest& request, absl::Time deadline) override {
    return core_.Compile(request, Until(deadline));
  }
  absl::StatusOr<kiln::v1::GetKernelResponse> GetKernel(
      const kiln::v1::GetKernelRequest& request) override {
    return core_.GetKernel(request);
  }
  absl::StatusOr<kiln::v1::LookupResponse> Lookup(
      const kiln::v1::LookupRequest& request) override {
    return core_.Lookup(request);
  }
  absl::Status Prewarm(
      const kiln::v1::PrewarmRequest& request, absl::Time deadline,
      const std::function<void(const kiln::v1::PrewarmProgress&)>& progress)
      override {
    return core_.Prewarm(request, Until(deadline),
                         [&](const kiln::v1::PrewarmProgress& message) {
                           if (progress) progress(message);
                         });
  }
  absl::Status Autotune(
      const kiln::v1::AutotuneRequest& request, absl::Time deadline,
      const std::function<void(const kiln::v1::AutotuneProgress&)>& progress)
      override {
    return core_.Autotune(request, Until(deadline),
                          [&](const kiln::v1::AutotuneProgress& message) {
                            if (progress) progress(message);
                          });
  }
  absl::StatusOr<kiln::v1::StatsResponse> Stats() override {
    return core_.Stats();
  }
  absl::StatusOr<kiln::v1::ListKernelsResponse> ListKernels(
      const kiln::v1::ListKernelsRequest& request) override {
    return core_.ListKernels(request);
  }
  absl::StatusOr<kiln::v1::EvictResponse> Evict(
      const kiln::v1::EvictRequest& request) override {
    return core_.Evict(request);
  }
  absl::StatusOr<kiln::v1::EchoResponse> Echo(
      const kiln::v1::EchoRequest& request) override {
    kiln::v1::EchoResponse response;
    response.set_payload(request.payload());
    return response;
  }

 private:
  std::unique_ptr<cache::Cache> cache_;
  std::unique_ptr<server::CompileEngine> engine_;
  server::ServiceCore core_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Client>> Embedded(EmbeddedOptions options) {
  const std::string dir = options.cache_dir.empty()
                              ? cache::DefaultCacheDirectory()
                              : options.cache_dir;
  absl::StatusOr<std::unique_ptr<cache::Cache>> cache =
      cache::Cache::Open(dir, cache::CacheOptions{});
  if (!cache.ok()) return cache.status();
  server::CompileEngineOptions engine_options;
  engine_options.worker_threads =
      options.worker_threads > 0
          ? options.worker_threads
          : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  absl::StatusOr<std::unique_ptr<server::CompileEngine>> engine =
      server::CompileEngine::Create(cache->get(), std::move(engine_options));
  if (!engine.ok()) return engine.status();
  return std::make_unique<Client>(absl::StrCat("embedded:", dir),
                                  std::make_unique<EmbeddedTransport>(
                                      *std::move(cache), *std::move(engine)));
}

}  // namespace kiln::client
