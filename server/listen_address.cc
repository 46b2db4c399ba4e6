#include "server/listen_address.h"

#include <arpa/inet.h>

#include <cstdint>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kiln::server {

std::string TcpAddress::ToString() const {
  if (host.find(':') != std::string::npos) {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<TcpAddress> ParseTcpAddress(absl::string_view text) {
  auto invalid = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "bad TCP address '", text, "': ", why, " (expected HOST:PORT)"));
  };
  TcpAddress address;
  absl::string_view port_text;
  if (!text.empty() && text.front() == '[') {
    size_t close = text.find(']');
    if (close == absl::string_view::npos) return invalid("missing ']'");
    address.host = std::string(text.substr(1, close - 1));
    absl::string_view rest = text.substr(close + 1);
    if (rest.empty() || rest.front() != ':') return invalid("missing port");
    port_text = rest.substr(1);
  } else {
    size_t colon = text.rfind(':');
    if (colon == absl::string_view::npos) return invalid("missing port");
    address.host = std::string(text.substr(0, colon));
    if (address.host.find(':') != std::string::npos) {
      return invalid("write IPv6 addresses in brackets: [::1]:PORT");
    }
    port_text = text.substr(colon + 1);
  }
  if (address.host.empty()) return invalid("missing host");
  int port = 0;
  if (port_text.empty() || !absl::SimpleAtoi(port_text, &port) || port < 0 ||
      port > 65535 || port_text.front() == '+' || port_text.front() == '-') {
    return invalid("port must be a number in 0..65535");
  }
  address.port = port;
  return address;
}

bool IsLoopbackHost(absl::string_view host) {
  if (host == "localhost") return true;
  std::string text(host);
  in_addr v4;
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6;
  if (inet_pton(AF_INET6, text.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

absl::Status CheckTcpSecurity(const TcpAddress& address,
                              const TcpSecurity& security) {
  if (security.tls || security.bearer_token) return absl::OkStatus();
  if (!IsLoopbackHost(address.host)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "refusing to listen on ", address.ToString(),
        " without TLS or a bearer token: give --tls-cert and --tls-key "
        "(and --tls-client-ca for client certificates), or --auth-token-file, "
        "or use the unix socket"));
  }
  if (!security.insecure_loopback) {
    return absl::PermissionDeniedError(absl::StrCat(
        "refusing to listen on ", address.ToString(),
        " without TLS or a bearer token: give --tls-cert/--tls-key or "
        "--auth-token-file, or add --insecure-loopback to accept plaintext "
        "TCP from every local user, or use the unix socket"));
  }
  return absl::OkStatus();
}

}  // namespace kiln::server
