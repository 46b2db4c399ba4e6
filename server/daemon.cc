#include "server/daemon.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/capabilities.h"
#include "server/kiln_service.h"
#include "server/listen_address.h"
#include "server/local_paths.h"
#include "spdlog/spdlog.h"

namespace kiln::server {

Daemon::Daemon() = default;

Daemon::~Daemon() { Shutdown(absl::ZeroDuration()); }

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(
    const ServerConfig& config) {
  // Check every setting before touching anything shared.
  std::optional<TcpAddress> tcp;
  if (!config.listen_tcp.empty()) {
    absl::StatusOr<TcpAddress> parsed = ParseTcpAddress(config.listen_tcp);
    if (!parsed.ok()) return parsed.status();
    if (absl::Status status =
            CheckPlaintextTcpAllowed(*parsed, config.insecure_loopback);
        !status.ok()) {
      return status;
    }
    tcp = *parsed;
  }
  if (absl::Status status = MakeDirectories(config.cache_dir, 0700);
      !status.ok()) {
    return status;
  }

  std::unique_ptr<Daemon> daemon(new Daemon());
  absl::StatusOr<UnixSocketClaim> claim =
      UnixSocketClaim::Claim(config.socket_path);
  if (!claim.ok()) return claim.status();
  daemon->socket_.emplace(*std::move(claim));

  HostCapabilities capabilities = ProbeHostCapabilities();
  daemon->service_ = std::make_unique<KilnService>(capabilities);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  int unix_port = 0;
  builder.AddListeningPort(daemon->socket_->GrpcAddress(),
                           grpc::InsecureServerCredentials(), &unix_port);
  int tcp_port = 0;
  if (tcp.has_value()) {
    builder.AddListeningPort(tcp->ToString(), grpc::InsecureServerCredentials(),
                             &tcp_port);
  }
  builder.RegisterService(daemon->service_.get());
  daemon->server_ = builder.BuildAndStart();
  if (daemon->server_ == nullptr || unix_port == 0 ||
      (tcp.has_value() && tcp_port == 0)) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", daemon->socket_->GrpcAddress(),
        tcp.has_value() ? absl::StrCat(" and ", tcp->ToString()) : "",
        " (is the TCP port in use? gRPC's log above says more)"));
  }

  // The socket exists only once the server is bound.
  if (absl::Status status = daemon->socket_->SetSocketMode(0660);
      !status.ok()) {
    return status;
  }
  daemon->server_->GetHealthCheckService()->SetServingStatus(
      kiln::v1::Kiln::service_full_name(), true);

  daemon->addresses_.push_back(daemon->socket_->GrpcAddress());
  if (tcp.has_value()) {
    tcp->port = tcp_port;
    daemon->addresses_.push_back(tcp->ToString());
  }
  spdlog::info("kilnd {} cache {}", capabilities.server_version,
               config.cache_dir);
  for (const std::string& address : daemon->addresses_) {
    spdlog::info("listening on {}", address);
  }
  return daemon;
}

void Daemon::Shutdown(absl::Duration grace) {
  if (stopped_) return;
  stopped_ = true;
  if (server_ != nullptr) {
    server_->GetHealthCheckService()->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() +
                      absl::ToChronoNanoseconds(grace));
    server_->Wait();
  }
  socket_.reset();
}

}  // namespace kiln::server
