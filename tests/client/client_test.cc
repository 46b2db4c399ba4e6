// Tests of the thin client library against a real kilnd.
#include "client/client.h"

#include <signal.h>

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/default_address.h"
#include "tests/support/kilnd_process.h"

namespace kiln::client {
namespace {

using ::testing::HasSubstr;

TEST(ClientTest, ToGrpcTarget) {
  struct Case {
    std::string address;
    std::string target;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"", proto::DefaultAddress()},
           {"/run/k.sock", "unix:/run/k.sock"},
           {"unix:/run/k.sock", "unix:/run/k.sock"},
           {"unix:///run/k.sock", "unix:///run/k.sock"},
           {"127.0.0.1:5000", "127.0.0.1:5000"},
           {"[::1]:5000", "[::1]:5000"},
           {"localhost:5000", "localhost:5000"},
           {"dns:///kiln.internal:5000", "dns:///kiln.internal:5000"},
       }) {
    absl::StatusOr<std::string> target = ToGrpcTarget(c.address);
    ASSERT_TRUE(target.ok()) << c.address << ": " << target.status();
    EXPECT_EQ(*target, c.target) << c.address;
  }
  for (const char* bad : {"kilnd", "unix:", "unix://", "host:"}) {
    EXPECT_EQ(ToGrpcTarget(bad).status().code(),
              absl::StatusCode::kInvalidArgument)
        << bad;
  }
}

TEST(ClientTest, ConnectToAMissingSocketFailsAtOnce) {
  testing::TempDir dir;
  absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect(dir.File("none.sock"));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(client.status().message(), HasSubstr("none.sock"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(1));
}

TEST(ClientTest, ConnectToAStaleSocketTimesOut) {
  // A daemon that died leaves its socket file; nobody accepts on it.
  auto kilnd = testing::KilndProcess::Start(KILN_KILND_PATH);
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  (*kilnd)->process().Signal(SIGKILL);
  ASSERT_TRUE((*kilnd)->process().Wait(absl::Seconds(10)).ok());
  absl::StatusOr<std::unique_ptr<Client>> client = Client::Connect(
      (*kilnd)->address(), ConnectOptions{.timeout = absl::Milliseconds(300)});
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
}

TEST(ClientTest, HealthAndCapabilitiesOfARunningDaemon) {
  auto kilnd = testing::KilndProcess::Start(KILN_KILND_PATH);
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  absl::StatusOr<std::unique_ptr<Client>> client =
      Client::Connect((*kilnd)->address());
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ((*client)->target(), (*kilnd)->address());
  EXPECT_TRUE((*client)->Health().ok());
  absl::StatusOr<kiln::v1::CapabilitiesResponse> caps =
      (*client)->Capabilities();
  ASSERT_TRUE(caps.ok()) << caps.status();
  EXPECT_FALSE(caps->server_version().empty());
  ASSERT_GE(caps->targets_size(), 1);
  EXPECT_EQ(caps->targets(0).name(), "cpu");

  // Once the daemon is gone, calls fail with Unavailable, not a crash.
  (*kilnd)->process().Signal(SIGTERM);
  ASSERT_TRUE((*kilnd)->process().Wait(absl::Seconds(20)).ok());
  EXPECT_EQ((*client)->Health(absl::Seconds(2)).code(),
            absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace kiln::client
