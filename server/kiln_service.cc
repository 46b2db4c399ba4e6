#include "server/kiln_service.h"

#include <openssl/crypto.h>

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "proto/grpc_status.h"
#include "spdlog/spdlog.h"

namespace kiln::server {
namespace {

CallContext ToCallContext(grpc::ServerContext* context) {
  CallContext call;
  const auto deadline = context->deadline();
  if (deadline < std::chrono::system_clock::time_point::max() -
                     std::chrono::hours(24 * 365)) {
    call.deadline = absl::FromChrono(deadline);
  }
  call.cancelled = [context] { return context->IsCancelled(); };
  return call;
}

template <typename T>
grpc::Status Reply(absl::StatusOr<T> result, T* response) {
  if (!result.ok()) return proto::ToGrpcStatus(result.status());
  *response = *std::move(result);
  return grpc::Status::OK;
}

}  // namespace

KilnService::KilnService(ServiceCore* core, std::string bearer_token)
    : core_(core), bearer_token_(std::move(bearer_token)) {}

grpc::Status KilnService::Authorize(const grpc::ServerContext& context) const {
  if (bearer_token_.empty()) return grpc::Status::OK;
  // The unix socket is guarded by its file mode.
  if (absl::StartsWith(context.peer(), "unix:")) return grpc::Status::OK;
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it != metadata.end()) {
    const grpc::string_ref value = it->second;
    constexpr std::string_view kBearer = "Bearer ";
    if (value.size() == kBearer.size() + bearer_token_.size() &&
        std::string_view(value.data(), kBearer.size()) == kBearer &&
        CRYPTO_memcmp(value.data() + kBearer.size(), bearer_token_.data(),
                      bearer_token_.size()) == 0) {
      return grpc::Status::OK;
    }
  }
  spdlog::warn("refused a call from {}: missing or wrong bearer token",
               context.peer());
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      "kilnd requires a bearer token on TCP "
                      "(authorization: Bearer TOKEN)");
}

grpc::Status KilnService::Capabilities(
    grpc::ServerContext* context, const kiln::v1::CapabilitiesRequest* request,
    kiln::v1::CapabilitiesResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  *response = core_->Capabilities();
  return grpc::Status::OK;
}

grpc::Status KilnService::Compile(grpc::ServerContext* context,
                                  const kiln::v1::CompileRequest* request,
                                  kiln::v1::CompileResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  absl::StatusOr<kiln::v1::CompileResponse> result =
      core_->Compile(*request, ToCallContext(context));
  if (!result.ok() && !absl::IsInvalidArgument(result.status()) &&
      !absl::IsNotFound(result.status())) {
    spdlog::warn("Compile {} for {}: {}", request->kernel(), context->peer(),
                 result.status().ToString());
  }
  return Reply(std::move(result), response);
}

grpc::Status KilnService::GetKernel(grpc::ServerContext* context,
                                    const kiln::v1::GetKernelRequest* request,
                                    kiln::v1::GetKernelResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  return Reply(core_->GetKernel(*request), response);
}

grpc::Status KilnService::Lookup(grpc::ServerContext* context,
                                 const kiln::v1::LookupRequest* request,
                                 kiln::v1::LookupResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  return Reply(core_->Lookup(*request), response);
}

grpc::Status KilnService::Prewarm(
    grpc::ServerContext* context, const kiln::v1::PrewarmRequest* request,
    grpc::ServerWriter<kiln::v1::PrewarmProgress>* writer) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  bool writable = true;
  absl::Status status =
      core_->Prewarm(*request, ToCallContext(context),
                     [&](const kiln::v1::PrewarmProgress& progress) {
                       if (writable) writable = writer->Write(progress);
                     });
  if (status.ok() && context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "prewarm cancelled");
  }
  return proto::ToGrpcStatus(status);
}

grpc::Status KilnService::Autotune(
    grpc::ServerContext* context, const kiln::v1::AutotuneRequest* request,
    grpc::ServerWriter<kiln::v1::AutotuneProgress>* writer) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  bool writable = true;
  absl::Status status =
      core_->Autotune(*request, ToCallContext(context),
                      [&](const kiln::v1::AutotuneProgress& progress) {
                        if (writable) writable = writer->Write(progress);
                      });
  const std::string& kernel =
      request->kernel().empty() ? request->filename() : request->kernel();
  if (status.ok()) {
    spdlog::info("autotuned {} for {}", kernel, context->peer());
  } else if (!absl::IsInvalidArgument(status) && !absl::IsNotFound(status)) {
    spdlog::warn("Autotune {} for {}: {}", kernel, context->peer(),
                 status.ToString());
  }
  return proto::ToGrpcStatus(status);
}

grpc::Status KilnService::Stats(grpc::ServerContext* context,
                                const kiln::v1::StatsRequest* request,
                                kiln::v1::StatsResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  return Reply(core_->Stats(), response);
}

grpc::Status KilnService::ListKernels(
    grpc::ServerContext* context, const kiln::v1::ListKernelsRequest* request,
    kiln::v1::ListKernelsResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  return Reply(core_->ListKernels(*request), response);
}

grpc::Status KilnService::Evict(grpc::ServerContext* context,
                                const kiln::v1::EvictRequest* request,
                                kiln::v1::EvictResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  absl::StatusOr<kiln::v1::EvictResponse> result = core_->Evict(*request);
  if (result.ok()) {
    spdlog::info("evicted {} kernel(s) for {}", result->evicted_size(),
                 context->peer());
  }
  return Reply(std::move(result), response);
}

grpc::Status KilnService::Echo(grpc::ServerContext* context,
                               const kiln::v1::EchoRequest* request,
                               kiln::v1::EchoResponse* response) {
  if (grpc::Status s = Authorize(*context); !s.ok()) return s;
  response->set_payload(request->payload());
  return grpc::Status::OK;
}

}  // namespace kiln::server
