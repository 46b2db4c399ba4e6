// gRPC server reflection v1 (grpc.reflection.v1.ServerReflection), which
// tools now ask for before v1alpha; Debian's gRPC serves only v1alpha (its
// plugin stays registered beside this). Descriptors come from the protobuf
// generated pool, which holds every message and service kilnd links.
#ifndef KILN_SERVER_REFLECTION_V1_H_
#define KILN_SERVER_REFLECTION_V1_H_

#include <memory>
#include <string>
#include <vector>

namespace grpc {
class Service;
}  // namespace grpc

namespace kiln::server {

// The service, listing `services` (fully qualified names) and itself.
std::unique_ptr<grpc::Service> MakeReflectionV1Service(
    std::vector<std::string> services);

}  // namespace kiln::server

#endif  // KILN_SERVER_REFLECTION_V1_H_
