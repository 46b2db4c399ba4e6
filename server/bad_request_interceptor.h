// BadRequestInterceptor: a request whose bytes do not parse as the method's
// protobuf message is the client's error. gRPC answers it with INTERNAL (the
// handler never runs); this server interceptor notices that no message was
// received and turns that status into INVALID_ARGUMENT, saying so.
#ifndef KILN_SERVER_BAD_REQUEST_INTERCEPTOR_H_
#define KILN_SERVER_BAD_REQUEST_INTERCEPTOR_H_

#include <grpcpp/support/server_interceptor.h>

#include <memory>
#include <vector>

namespace kiln::server {

// The interceptor factories kilnd installs (just this one).
std::vector<
    std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
BadRequestInterceptors();

}  // namespace kiln::server

#endif  // KILN_SERVER_BAD_REQUEST_INTERCEPTOR_H_
