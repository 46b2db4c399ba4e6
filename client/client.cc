#include "client/client.h"

#include <grpcpp/client_context.h>
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
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

struct Client::Stubs {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<Health::Stub> health;
  std::unique_ptr<kiln::v1::Kiln::Stub> kiln;
};

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

Client::Client(std::string target, std::unique_ptr<Stubs> stubs)
    : target_(std::move(target)), stubs_(std::move(stubs)) {}

Client::~Client() = default;

absl::StatusOr<std::unique_ptr<Client>> Client::Connect(
    absl::string_view address, ConnectOptions options) {
  absl::StatusOr<std::string> target = ToGrpcTarget(address);
  if (!target.ok()) return target.status();
  if (absl::StartsWith(*target, "unix:")) {
    // gRPC would retry a missing socket until the timeout; say it at once.
    std::string path(UnixPath(*target));
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      return absl::UnavailableError(
          absl::StrCat("no kilnd at ", *target, ": ", path, " does not exist"));
    }
  }
  auto stubs = std::make_unique<Stubs>();
  stubs->channel =
      grpc::CreateChannel(*target, grpc::InsecureChannelCredentials());
  if (!stubs->channel->WaitForConnected(DeadlineAfter(options.timeout))) {
    return absl::UnavailableError(absl::StrCat(
        "no kilnd at ", *target, ": connection not accepted within ",
        absl::FormatDuration(options.timeout)));
  }
  stubs->health = Health::NewStub(stubs->channel);
  stubs->kiln = kiln::v1::Kiln::NewStub(stubs->channel);
  return std::unique_ptr<Client>(
      new Client(*std::move(target), std::move(stubs)));
}

absl::Status Client::Health(absl::Duration timeout) const {
  grpc::ClientContext context;
  context.set_deadline(DeadlineAfter(timeout));
  HealthCheckRequest request;  // the empty service name: the whole server
  HealthCheckResponse response;
  grpc::Status status = stubs_->health->Check(&context, request, &response);
  if (!status.ok()) return proto::ToAbslStatus(status);
  if (response.status() != HealthCheckResponse::SERVING) {
    return absl::UnavailableError(absl::StrCat(
        "kilnd at ", target_, " is not serving (",
        HealthCheckResponse::ServingStatus_Name(response.status()), ")"));
  }
  return absl::OkStatus();
}

absl::StatusOr<kiln::v1::CapabilitiesResponse> Client::Capabilities(
    absl::Duration timeout) const {
  grpc::ClientContext context;
  context.set_deadline(DeadlineAfter(timeout));
  kiln::v1::CapabilitiesResponse response;
  grpc::Status status = stubs_->kiln->Capabilities(
      &context, kiln::v1::CapabilitiesRequest(), &response);
  if (!status.ok()) return proto::ToAbslStatus(status);
  return response;
}

}  // namespace kiln::client
