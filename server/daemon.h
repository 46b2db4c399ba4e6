// Daemon: a running kilnd. Owns the gRPC server (the Kiln service, the
// standard health service and server reflection), the unix socket it listens
// on, and the optional loopback TCP port.
#ifndef KILN_SERVER_DAEMON_H_
#define KILN_SERVER_DAEMON_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "server/config.h"
#include "server/unix_socket.h"

namespace grpc {
class Server;
class Service;
}  // namespace grpc

namespace kiln::cache {
class Cache;
}  // namespace kiln::cache

namespace kiln::server {

class CompileEngine;
class KilnService;
class MetricsServer;
class ServiceCore;

class Daemon {
 public:
  // Creates the cache directory, claims the unix socket (unix_socket.h),
  // checks the TCP address (listen_address.h), probes the host's
  // capabilities and starts serving. On failure nothing is left listening;
  // the status says what was wrong (InvalidArgument / PermissionDenied for
  // bad settings, AlreadyExists when another kilnd owns the socket,
  // Unavailable when a port cannot be bound).
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(
      const ServerConfig& config);

  Daemon(const Daemon&) = delete;
  Daemon& operator=(const Daemon&) = delete;
  // Shuts down with no grace period if Shutdown() was not called.
  ~Daemon();

  // Where it listens, as gRPC targets: "unix:/run/...", "127.0.0.1:43210"
  // (with the real port when 0 was asked for).
  const std::vector<std::string>& addresses() const { return addresses_; }
  // The metrics endpoint's port (--metrics-address), 0 when off.
  int metrics_port() const;

  // Reports NOT_SERVING to health checks, stops accepting calls, lets
  // in-flight calls run for up to `grace`, cancels the rest, waits for the
  // compiles already running to finish and be stored, and returns once
  // the server has stopped. Idempotent. Connected clients are told to go away
  // and their acknowledgement is awaited (within `grace`): an idle gRPC
  // client may take up to its backup poll interval (5 s) to answer.
  void Shutdown(absl::Duration grace);

 private:
  Daemon();

  std::optional<UnixSocketClaim> socket_;
  // The temporary cache directory used when --cache-dir is unusable; deleted
  // after the cache (members are destroyed bottom-up).
  struct TemporaryCache {
    std::string path;
    ~TemporaryCache();
  } temporary_cache_;
  // Destroyed bottom-up: the server first, the cache last.
  std::unique_ptr<cache::Cache> cache_;
  std::unique_ptr<CompileEngine> engine_;
  std::unique_ptr<ServiceCore> core_;
  std::unique_ptr<KilnService> service_;
  std::unique_ptr<grpc::Service> reflection_v1_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsServer> metrics_;  // stopped before the engine
  std::vector<std::string> addresses_;
  bool stopped_ = false;
};

}  // namespace kiln::server

#endif  // KILN_SERVER_DAEMON_H_
