// Client: the thin C++ client of kilnd. Connects over the daemon's unix socket
// (or loopback TCP) and calls it; links no compiler and no cache, so
// applications that only ask kilnd for kernels stay small.
#ifndef KILN_CLIENT_CLIENT_H_
#define KILN_CLIENT_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/kiln.pb.h"

namespace kiln::client {

// The gRPC target for a user-given daemon address: empty means the default
// socket (proto/default_address.h); "/PATH" and "unix:PATH" mean a unix
// socket; "HOST:PORT" (also "dns:", "ipv4:", "ipv6:" targets) means TCP.
// InvalidArgument for anything else.
absl::StatusOr<std::string> ToGrpcTarget(absl::string_view address);

struct ConnectOptions {
  // How long Connect() waits for the daemon to accept the connection.
  absl::Duration timeout = absl::Seconds(2);
};

// Thread-safe: any number of threads may call one Client at once.
class Client {
 public:
  // Connects to the kilnd at `address` (see ToGrpcTarget). InvalidArgument
  // for a malformed address; Unavailable, naming the address, when no daemon
  // accepts the connection within `options.timeout` (at once when a unix
  // socket does not exist).
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      absl::string_view address, ConnectOptions options = {});

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // The gRPC target it is connected to ("unix:/run/user/1000/kiln/...").
  const std::string& target() const { return target_; }

  // Asks the standard gRPC health service. OK when the daemon is serving;
  // Unavailable when it is shutting down or unreachable; other codes as the
  // transport reports them (DeadlineExceeded after `timeout`).
  absl::Status Health(absl::Duration timeout = absl::Seconds(5)) const;

  // The daemon's version, targets and toolchains. Errors as for Health().
  absl::StatusOr<kiln::v1::CapabilitiesResponse> Capabilities(
      absl::Duration timeout = absl::Seconds(5)) const;

 private:
  struct Stubs;  // the gRPC channel and stubs, kept out of this header
  Client(std::string target, std::unique_ptr<Stubs> stubs);

  std::string target_;
  std::unique_ptr<Stubs> stubs_;
};

}  // namespace kiln::client

#endif  // KILN_CLIENT_CLIENT_H_
