// KilnService: the gRPC face of the daemon (service kiln.v1.Kiln in
// proto/kiln.proto). An adapter only: each method converts the request,
// calls transport-free code, and converts the answer back.
#ifndef KILN_SERVER_KILN_SERVICE_H_
#define KILN_SERVER_KILN_SERVICE_H_

#include "proto/kiln.grpc.pb.h"
#include "server/capabilities.h"

namespace kiln::server {

// Fills `response` from `capabilities` (replacing what it held).
void CapabilitiesToProto(const HostCapabilities& capabilities,
                         kiln::v1::CapabilitiesResponse* response);

class KilnService final : public kiln::v1::Kiln::Service {
 public:
  // `capabilities` is probed once by the caller; the service answers from it.
  explicit KilnService(HostCapabilities capabilities);

  grpc::Status Capabilities(grpc::ServerContext* context,
                            const kiln::v1::CapabilitiesRequest* request,
                            kiln::v1::CapabilitiesResponse* response) override;

 private:
  const HostCapabilities capabilities_;
};

}  // namespace kiln::server

#endif  // KILN_SERVER_KILN_SERVICE_H_
