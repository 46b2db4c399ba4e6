// Tests of TCP address parsing and the plaintext-TCP rule of kilnd.
#include "server/listen_address.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;

TEST(ListenAddressTest, ParsesHostAndPort) {
  struct Case {
    std::string text;
    std::string host;
    int port;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"127.0.0.1:50051", "127.0.0.1", 50051},
           {"localhost:0", "localhost", 0},
           {"[::1]:65535", "::1", 65535},
           {"0.0.0.0:80", "0.0.0.0", 80},
       }) {
    absl::StatusOr<TcpAddress> address = ParseTcpAddress(c.text);
    ASSERT_TRUE(address.ok()) << c.text << ": " << address.status();
    EXPECT_EQ(address->host, c.host) << c.text;
    EXPECT_EQ(address->port, c.port) << c.text;
    EXPECT_EQ(address->ToString(), c.text);
  }
}

TEST(ListenAddressTest, RejectsMalformedAddresses) {
  for (const char* text :
       {"", "127.0.0.1", ":50051", "127.0.0.1:", "127.0.0.1:http",
        "127.0.0.1:65536", "127.0.0.1:-1", "127.0.0.1:+5", "::1:50051", "[::1]",
        "[::1:50051", "[]:5"}) {
    absl::StatusOr<TcpAddress> address = ParseTcpAddress(text);
    ASSERT_FALSE(address.ok()) << "accepted '" << text << "'";
    EXPECT_EQ(address.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(address.status().message(), HasSubstr("HOST:PORT"));
  }
}

TEST(ListenAddressTest, KnowsLoopbackHosts) {
  for (const char* host :
       {"localhost", "127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"}) {
    EXPECT_TRUE(IsLoopbackHost(host)) << host;
  }
  for (const char* host : {"0.0.0.0", "::", "10.0.0.1", "128.0.0.1",
                           "example.com", "::ffff:10.0.0.1", ""}) {
    EXPECT_FALSE(IsLoopbackHost(host)) << host;
  }
}

TEST(ListenAddressTest, PlaintextTcpNeedsLoopbackAndTheFlag) {
  TcpAddress loopback{"127.0.0.1", 5000};
  TcpAddress everywhere{"0.0.0.0", 5000};

  EXPECT_TRUE(CheckTcpSecurity(loopback, {.insecure_loopback = true}).ok());

  absl::Status no_flag = CheckTcpSecurity(loopback, {});
  EXPECT_EQ(no_flag.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(no_flag.message(), HasSubstr("--insecure-loopback"));

  for (bool flag : {false, true}) {
    absl::Status refused =
        CheckTcpSecurity(everywhere, {.insecure_loopback = flag});
    EXPECT_EQ(refused.code(), absl::StatusCode::kPermissionDenied);
    EXPECT_THAT(refused.message(), HasSubstr("without TLS or a bearer token"));
    EXPECT_THAT(refused.message(), HasSubstr("--tls-cert"));
  }
}

TEST(ListenAddressTest, TlsOrTokenAllowAnyAddress) {
  TcpAddress everywhere{"0.0.0.0", 5000};
  EXPECT_TRUE(CheckTcpSecurity(everywhere, {.tls = true}).ok());
  EXPECT_TRUE(CheckTcpSecurity(everywhere, {.bearer_token = true}).ok());
  EXPECT_TRUE(CheckTcpSecurity(TcpAddress{"::1", 1}, {.tls = true}).ok());
}

}  // namespace
}  // namespace kiln::server
