#include "server/bad_request_interceptor.h"

#include <grpcpp/support/status.h>

#include <string>

namespace kiln::server {
namespace {

namespace gx = ::grpc::experimental;

class BadRequestInterceptor : public gx::Interceptor {
 public:
  explicit BadRequestInterceptor(gx::ServerRpcInfo* info)
      : method_(info->method() != nullptr ? info->method() : "") {}

  void Intercept(gx::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(
            gx::InterceptionHookPoints::POST_RECV_MESSAGE)) {
      // Null when the payload did not deserialise.
      unparsed_ = methods->GetRecvMessage() == nullptr;
    }
    if (unparsed_ && methods->QueryInterceptionHookPoint(
                         gx::InterceptionHookPoints::PRE_SEND_STATUS)) {
      const grpc::Status status = methods->GetSendStatus();
      if (status.error_code() == grpc::StatusCode::INTERNAL) {
        methods->ModifySendStatus(grpc::Status(
            grpc::StatusCode::INVALID_ARGUMENT,
            "the request is not a valid protobuf message for " + method_));
      }
    }
    methods->Proceed();
  }

 private:
  const std::string method_;
  bool unparsed_ = false;
};

class Factory : public gx::ServerInterceptorFactoryInterface {
 public:
  gx::Interceptor* CreateServerInterceptor(gx::ServerRpcInfo* info) override {
    return new BadRequestInterceptor(info);
  }
};

}  // namespace

std::vector<std::unique_ptr<gx::ServerInterceptorFactoryInterface>>
BadRequestInterceptors() {
  std::vector<std::unique_ptr<gx::ServerInterceptorFactoryInterface>> out;
  out.push_back(std::make_unique<Factory>());
  return out;
}

}  // namespace kiln::server
