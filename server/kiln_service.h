// KilnService: the gRPC face of the daemon (service kiln.v1.Kiln in
// proto/kiln.proto). An adapter only: each method checks the caller's
// credentials, converts the gRPC deadline and cancellation into a
// CallContext, calls ServiceCore (transport-free) and converts its
// absl::Status into the gRPC status with the same code.
#ifndef KILN_SERVER_KILN_SERVICE_H_
#define KILN_SERVER_KILN_SERVICE_H_

#include <string>

#include "proto/kiln.grpc.pb.h"
#include "server/service_core.h"

namespace kiln::server {

class KilnService final : public kiln::v1::Kiln::Service {
 public:
  // `core` is not owned and must outlive the service. A non-empty
  // `bearer_token` is required ("authorization: Bearer TOKEN" metadata) on
  // every call that does not arrive over the unix socket.
  KilnService(ServiceCore* core, std::string bearer_token);

  grpc::Status Capabilities(grpc::ServerContext* context,
                            const kiln::v1::CapabilitiesRequest* request,
                            kiln::v1::CapabilitiesResponse* response) override;
  grpc::Status Compile(grpc::ServerContext* context,
                       const kiln::v1::CompileRequest* request,
                       kiln::v1::CompileResponse* response) override;
  grpc::Status GetKernel(grpc::ServerContext* context,
                         const kiln::v1::GetKernelRequest* request,
                         kiln::v1::GetKernelResponse* response) override;
  grpc::Status Lookup(grpc::ServerContext* context,
                      const kiln::v1::LookupRequest* request,
                      kiln::v1::LookupResponse* response) override;
  grpc::Status Prewarm(
      grpc::ServerContext* context, const kiln::v1::PrewarmRequest* request,
      grpc::ServerWriter<kiln::v1::PrewarmProgress>* writer) override;
  grpc::Status Stats(grpc::ServerContext* context,
                     const kiln::v1::StatsRequest* request,
                     kiln::v1::StatsResponse* response) override;
  grpc::Status ListKernels(grpc::ServerContext* context,
                           const kiln::v1::ListKernelsRequest* request,
                           kiln::v1::ListKernelsResponse* response) override;
  grpc::Status Evict(grpc::ServerContext* context,
                     const kiln::v1::EvictRequest* request,
                     kiln::v1::EvictResponse* response) override;
  grpc::Status Autotune(
      grpc::ServerContext* context, const kiln::v1::AutotuneRequest* request,
      grpc::ServerWriter<kiln::v1::AutotuneProgress>* writer) override;
  grpc::Status Echo(grpc::ServerContext* context,
                    const kiln::v1::EchoRequest* request,
                    kiln::v1::EchoResponse* response) override;

 private:
  // OK, or UNAUTHENTICATED when a token is required and missing or wrong.
  grpc::Status Authorize(const grpc::ServerContext& context) const;

  ServiceCore* const core_;
  const std::string bearer_token_;
};

}  // namespace kiln::server

#endif  // KILN_SERVER_KILN_SERVICE_H_
