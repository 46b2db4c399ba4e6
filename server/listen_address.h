// TCP listen addresses for kilnd: parsing `HOST:PORT` and the rule that TCP
// needs TLS or a bearer token, except on a loopback address when the
// operator says --insecure-loopback.
#ifndef KILN_SERVER_LISTEN_ADDRESS_H_
#define KILN_SERVER_LISTEN_ADDRESS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::server {

struct TcpAddress {
  std::string host;  // "127.0.0.1", "::1" (no brackets), "localhost", ...
  int port = 0;      // 0: any free port

  // The address as gRPC spells it: "127.0.0.1:50051", "[::1]:50051".
  std::string ToString() const;
};

// Parses "HOST:PORT" or "[IPV6]:PORT". InvalidArgument, naming the problem,
// for a missing host or port, a port outside 0..65535, or junk.
absl::StatusOr<TcpAddress> ParseTcpAddress(absl::string_view text);

// True for "localhost", any 127.0.0.0/8 address and ::1 (also written as an
// IPv4-mapped ::ffff:127.x.y.z). False for names that would need DNS.
bool IsLoopbackHost(absl::string_view host);

// How a TCP listener is protected.
struct TcpSecurity {
  bool tls = false;           // server certificate (maybe client certs too)
  bool bearer_token = false;  // every call must carry the token
  bool insecure_loopback = false;  // the operator accepts plaintext
};

// OK when kilnd may listen on `address` with `security`: TLS or a bearer
// token allow any address; otherwise only a loopback address, and only with
// insecure_loopback. PermissionDenied saying what to do otherwise.
absl::Status CheckTcpSecurity(const TcpAddress& address,
                              const TcpSecurity& security);

}  // namespace kiln::server

#endif  // KILN_SERVER_LISTEN_ADDRESS_H_
