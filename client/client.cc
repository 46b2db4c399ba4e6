#include "client/client.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/support/sync_stream.h>
#include <sys/stat.h>

#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "proto/default_address.h"
#include "proto/grpc/health/v1/health.grpc.pb.h"
#include "proto/grpc_status.h"
#include "proto/kiln.grpc.pb.h"

namespace kiln::client {
namespace {

using ::grpc::health::v1::Health;
using ::grpc::health::v1::HealthCheckRequest;
using ::grpc::health::v1::HealthCheckResponse;

std::chrono::system_clock::time_point DeadlineAfter(absl::Duration timeout) {
  return std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout);
}

// The socket path of a "unix:" target ("unix:///p" and "unix:/p" are "/p").
absl::string_view UnixPath(absl::string_view target) {
  absl::string_view path = target.substr(5);
  if (absl::StartsWith(path, "//")) path.remove_prefix(2);
  return path;
}

}  // namespace

std::string TierName(kiln::v1::Tier tier) {
  switch (tier) {
    case kiln::v1::TIER_MEMORY:
      return "memory";
    case kiln::v1::TIER_LOCAL:
      return "local";
    case kiln::v1::TIER_REMOTE:
      return "remote";
    case kiln::v1::TIER_COMPILED:
      return "compiled";
    default:
      return "";
  }
}

absl::StatusOr<std::string> ToGrpcTarget(absl::string_view address) {
  if (address.empty()) return proto::DefaultAddress();
  if (address.front() == '/') return absl::StrCat("unix:", address);
  if (absl::StartsWith(address, "unix:")) {
    if (UnixPath(address).empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("address '", address, "' has no socket path"));
    }
    return std::string(address);
  }
  if (absl::StartsWith(address, "dns:") || absl::StartsWith(address, "ipv4:") ||
      absl::StartsWith(address, "ipv6:") ||
      (address.find(':') != absl::string_view::npos && address.back() != ':')) {
    return std::string(address);
  }
  return absl::InvalidArgumentError(
      absl::StrCat("bad daemon address '", address,
                   "': expected unix:PATH, /PATH or HOST:PORT"));
}

namespace {

grpc::ClientContext* Prepare(grpc::ClientContext* context,
                             const std::string& token, absl::Time deadline) {
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
  if (deadline != absl::InfiniteFuture()) {
    context->set_deadline(absl::ToChronoTime(deadline));
  }
  return context;
}

template <typename Response>
absl::StatusOr<Response> Result(const grpc::Status& status, Response response) {
  if (!status.ok()) return proto::ToAbslStatus(status);
  return response;
}

// A short deadline for calls that do no compiling.
absl::Time Soon() { return absl::Now() + absl::Seconds(30); }

class GrpcTransport final : public Transport {
 public:
  GrpcTransport(std::shared_ptr<grpc::Channel> channel, std::string token)
      : channel_(std::move(channel)),
        health_(Health::NewStub(channel_)),
        kiln_(kiln::v1::Kiln::NewStub(channel_)),
        token_(std::move(token)) {}

  absl::Status Health(absl::Time deadline) override {
    grpc::ClientContext context;
    HealthCheckRequest request;  // the empty service name: the whole server
    HealthCheckResponse response;
    grpc::Status status =
        health_->Check(Prepare(&context, token_, deadline), request, &response);
    if (!status.ok()) return proto::ToAbslStatus(status);
    if (response.status() != HealthCheckResponse::SERVING) {
      return absl::UnavailableError(absl::StrCat(
          "kilnd is not serving (",
          HealthCheckResponse::ServingStatus_Name(response.status()), ")"));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<kiln::v1::CapabilitiesResponse> Capabilities(
      absl::Time deadline) override {
    return Call(&kiln::v1::Kiln::Stub::Capabilities,
                kiln::v1::CapabilitiesRequest(), deadline);
  }
  absl::StatusOr<kiln::v1::CompileResponse> Compile(
      const kiln::v1::CompileRequest& request, absl::Time deadline) override {
    return Call(&kiln::v1::Kiln::Stub::Compile, request, deadline);
  }
  absl::StatusOr<kiln::v1::GetKernelResponse> GetKernel(
      const kiln::v1::GetKernelRequest& request) override {
    return Call(&kiln::v1::Kiln::Stub::GetKernel, request, Soon());
  }
  absl::StatusOr<kiln::v1::LookupResponse> Lookup(
      const kiln::v1::LookupRequest& request) override {
    return Call(&kiln::v1::Kiln::Stub::Lookup, request, Soon());
  }
  absl::Status Prewarm(
      const kiln::v1::PrewarmRequest& request, absl::Time deadline,
      const std::function<void(const kiln::v1::PrewarmProgress&)>& progress)
      override {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<kiln::v1::PrewarmProgress>> reader =
        kiln_->Prewarm(Prepare(&context, token_, deadline), request);
    kiln::v1::PrewarmProgress message;
    while (reader->Read(&message)) {
      if (progress) progress(message);
    }
    return proto::ToAbslStatus(reader->Finish());
  }
  absl::Status Autotune(
      const kiln::v1::AutotuneRequest& request, absl::Time deadline,
      const std::function<void(const kiln::v1::AutotuneProgress&)>& progress)
      override {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<kiln::v1::AutotuneProgress>> reader =
        kiln_->Autotune(Prepare(&context, token_, deadline), request);
    kiln::v1::AutotuneProgress message;
    while (reader->Read(&message)) {
      if (progress) progress(message);
    }
    return proto::ToAbslStatus(reader->Finish());
  }
  absl::StatusOr<kiln::v1::StatsResponse> Stats() override {
    return Call(&kiln::v1::Kiln::Stub::Stats, kiln::v1::StatsRequest(), Soon());
  }
  absl::StatusOr<kiln::v1::ListKernelsResponse> ListKernels(
      const kiln::v1::ListKernelsRequest& request) override {
    return Call(&kiln::v1::Kiln::Stub::ListKernels, request, Soon());
  }
  absl::StatusOr<kiln::v1::EvictResponse> Evict(
      const kiln::v1::EvictRequest& request) override {
    return Call(&kiln::v1::Kiln::Stub::Evict, request, Soon());
  }
  absl::StatusOr<kiln::v1::EchoResponse> Echo(
      const kiln::v1::EchoRequest& request) override {
    return Call(&kiln::v1::Kiln::Stub::Echo, request, Soon());
  }

 private:
  // Calls one unary method of the Kiln stub.
  template <typename Request, typename Response>
  absl::StatusOr<Response> Call(
      grpc::Status (kiln::v1::Kiln::Stub::*method)(grpc::ClientContext*,
                                                   const Request&, Response*),
      const Request& request, absl::Time deadline) {
    grpc::ClientContext context;
    Response response;
    grpc::Status status = (kiln_.get()->*method)(
        Prepare(&context, token_, deadline), request, &response);
    return Result(status, std::move(response));
  }

  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<Health::Stub> health_;
  std::unique_ptr<kiln::v1::Kiln::Stub> kiln_;
  const std::string token_;
};

absl::Time DeadlineIn(absl::Duration timeout) {
  return timeout == absl::InfiniteDuration() ? absl::InfiniteFuture()
                                             : absl::Now() + timeout;
}

absl::StatusOr<Kernel> LoadHandle(kiln::v1::KernelHandle* handle,
                                  std::string tier, double compile_ms) {
  KernelParts parts;
  parts.key = std::move(*handle->mutable_key());
  parts.binary = std::move(*handle->mutable_binary());
  parts.metadata = std::move(*handle->mutable_metadata());
  parts.compile_log = std::move(*handle->mutable_compile_log());
  parts.tier = std::move(tier);
  parts.compile_ms = compile_ms;
  return Kernel::Load(std::move(parts));
}

}  // namespace

kiln::v1::CompileRequest ToProto(const KernelRequest& request) {
  kiln::v1::CompileRequest out;
  out.set_ir_text(request.ir_text);
  out.set_kernel(request.kernel);
  out.set_target(request.target);
  out.mutable_bindings()->insert(request.bindings.begin(),
                                 request.bindings.end());
  out.set_filename(request.filename);
  return out;
}

Client::Client(std::string target, std::unique_ptr<Transport> transport)
    : target_(std::move(target)), transport_(std::move(transport)) {}

Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(
    absl::string_view address, ConnectOptions options) {
  absl::StatusOr<std::string> target = ToGrpcTarget(address);
  if (!target.ok()) return target.status();
  const bool unix_socket = absl::StartsWith(*target, "unix:");
  if (unix_socket) {
    // gRPC would retry a missing socket until the timeout; say it at once.
    std::string path(UnixPath(*target));
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      return absl::UnavailableError(
          absl::StrCat("no kilnd at ", *target, ": ", path, " does not exist"));
    }
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::InsecureChannelCredentials();
  grpc::ChannelArguments arguments;
  arguments.SetMaxReceiveMessageSize(-1);  // responses carry binaries
  if (!options.tls_root_certs.empty()) {
    if (unix_socket) {
      return absl::InvalidArgumentError(
          "TLS options were given for a unix socket address");
    }
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_root_certs;
    ssl.pem_cert_chain = options.tls_client_cert;
    ssl.pem_private_key = options.tls_client_key;
    credentials = grpc::SslCredentials(ssl);
    if (!options.tls_server_name.empty()) {
      arguments.SetSslTargetNameOverride(options.tls_server_name);
    }
  } else if (!options.tls_client_cert.empty()) {
    return absl::InvalidArgumentError(
        "a TLS client certificate needs the CA certificates (tls_root_certs)");
  }
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(*target, credentials, arguments);
  if (!channel->WaitForConnected(DeadlineAfter(options.timeout))) {
    return absl::UnavailableError(absl::StrCat(
        "no kilnd at ", *target, ": connection not accepted within ",
        absl::FormatDuration(options.timeout),
        options.tls_root_certs.empty() ? "" : " (TLS handshake included)"));
  }
  return std::make_unique<Client>(
      *target, std::make_unique<GrpcTransport>(std::move(channel),
                                               options.bearer_token));
}

absl::Status Client::Health(absl::Duration timeout) const {
  absl::Status status = transport_->Health(DeadlineIn(timeout));
  if (absl::IsUnavailable(status)) {
    return absl::UnavailableError(
        absl::StrCat("kilnd at ", target_, ": ", status.message()));
  }
  return status;
}

absl::StatusOr<kiln::v1::CapabilitiesResponse> Client::Capabilities(
    absl::Duration timeout) const {
  return transport_->Capabilities(DeadlineIn(timeout));
}

absl::StatusOr<kiln::v1::CompileResponse> Client::CompileRaw(
    const KernelRequest& request, bool omit_binary) const {
  kiln::v1::CompileRequest message = ToProto(request);
  message.set_omit_binary(omit_binary);
  return transport_->Compile(message, DeadlineIn(request.timeout));
}

absl::StatusOr<Kernel> Client::Compile(const KernelRequest& request) const {
  absl::StatusOr<kiln::v1::CompileResponse> response = CompileRaw(request);
  if (!response.ok()) return response.status();
  return LoadHandle(response->mutable_kernel(), TierName(response->tier()),
                    response->compile_ms());
}

absl::StatusOr<Kernel> Client::GetKernel(const std::string& key) const {
  kiln::v1::GetKernelRequest request;
  request.set_key(key);
  absl::StatusOr<kiln::v1::GetKernelResponse> response =
      transport_->GetKernel(request);
  if (!response.ok()) return response.status();
  return LoadHandle(response->mutable_kernel(), TierName(response->tier()), 0);
}

absl::StatusOr<bool> Client::Lookup(const std::string& key) const {
  kiln::v1::LookupRequest request;
  request.set_key(key);
  absl::StatusOr<kiln::v1::LookupResponse> response =
      transport_->Lookup(request);
  if (!response.ok()) return response.status();
  return response->present();
}

absl::StatusOr<kiln::v1::LookupResponse> Client::Lookup(
    const KernelRequest& request) const {
  kiln::v1::LookupRequest message;
  *message.mutable_request() = ToProto(request);
  return transport_->Lookup(message);
}

absl::Status Client::Prewarm(
    const std::vector<KernelRequest>& requests,
    const std::function<void(const kiln::v1::PrewarmProgress&)>& progress,
    absl::Duration timeout) const {
  kiln::v1::PrewarmRequest message;
  for (const KernelRequest& r : requests) {
    *message.add_requests() = ToProto(r);
  }
  return transport_->Prewarm(message, DeadlineIn(timeout), progress);
}

absl::StatusOr<kiln::v1::AutotuneResult> Client::Autotune(
    const kiln::v1::AutotuneRequest& request,
    const std::function<void(const kiln::v1::AutotuneProgress&)>& progress,
    absl::Duration timeout) const {
  kiln::v1::AutotuneResult result;
  bool finished = false;
  absl::Status status = transport_->Autotune(
      request, DeadlineIn(timeout),
      [&](const kiln::v1::AutotuneProgress& message) {
        if (message.event() == kiln::v1::AutotuneProgress::EVENT_DONE ||
            message.event() == kiln::v1::AutotuneProgress::EVENT_CACHED) {
          result = message.result();
          finished = true;
        }
        if (progress) progress(message);
      });
  if (!status.ok()) return status;
  if (!finished) {
    return absl::InternalError("the autotune stream ended without a result");
  }
  return result;
}

absl::StatusOr<kiln::v1::StatsResponse> Client::Stats() const {
  return transport_->Stats();
}

absl::StatusOr<kiln::v1::ListKernelsResponse> Client::ListKernels(
    const kiln::v1::ListKernelsRequest& request) const {
  return transport_->ListKernels(request);
}

absl::StatusOr<kiln::v1::EvictResponse> Client::Evict(
    const std::vector<std::string>& keys) const {
  kiln::v1::EvictRequest request;
  for (const std::string& key : keys) request.add_keys(key);
  return transport_->Evict(request);
}

absl::StatusOr<std::string> Client::Echo(const std::string& payload) const {
  kiln::v1::EchoRequest request;
  request.set_payload(payload);
  absl::StatusOr<kiln::v1::EchoResponse> response = transport_->Echo(request);
  if (!response.ok()) return response.status();
  return std::move(*response->mutable_payload());
}

}  // namespace kiln::client
