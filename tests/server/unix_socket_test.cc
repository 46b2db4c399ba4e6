// Tests of UnixSocketClaim: one daemon per socket path, stale sockets
// replaced, unsafe places refused.
#include "server/unix_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;

// Leaves a socket file at `path` with nobody listening, as a crashed daemon
// would.
void MakeStaleSocket(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0)
      << std::strerror(errno);
  close(fd);
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

TEST(UnixSocketClaimTest, CreatesTheDirectory) {
  testing::TempDir dir;
  std::string path = dir.File("run/kiln/kilnd.sock");
  absl::StatusOr<UnixSocketClaim> claim = UnixSocketClaim::Claim(path);
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_EQ(claim->path(), path);
  EXPECT_EQ(claim->GrpcAddress(), "unix:" + path);
  struct stat st;
  ASSERT_EQ(stat(dir.File("run/kiln").c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
}

TEST(UnixSocketClaimTest, SecondClaimOfTheSamePathFails) {
  testing::TempDir dir;
  std::string path = dir.File("kilnd.sock");
  absl::StatusOr<UnixSocketClaim> first = UnixSocketClaim::Claim(path);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<UnixSocketClaim> second = UnixSocketClaim::Claim(path);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(second.status().message(), HasSubstr("another kilnd"));
}

TEST(UnixSocketClaimTest, ReleasingAllowsANewClaimAndRemovesTheSocket) {
  testing::TempDir dir;
  std::string path = dir.File("kilnd.sock");
  {
    absl::StatusOr<UnixSocketClaim> claim = UnixSocketClaim::Claim(path);
    ASSERT_TRUE(claim.ok()) << claim.status();
    MakeStaleSocket(path);  // stands in for the server's socket
    ASSERT_TRUE(claim->SetSocketMode(0660).ok());
    struct stat st;
    ASSERT_EQ(lstat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0660);
  }
  EXPECT_FALSE(Exists(path));
  EXPECT_TRUE(UnixSocketClaim::Claim(path).ok());
}

TEST(UnixSocketClaimTest, RemovesAStaleSocket) {
  testing::TempDir dir;
  std::string path = dir.File("kilnd.sock");
  MakeStaleSocket(path);
  ASSERT_TRUE(Exists(path));
  absl::StatusOr<UnixSocketClaim> claim = UnixSocketClaim::Claim(path);
  ASSERT_TRUE(claim.ok()) << claim.status();
  EXPECT_FALSE(Exists(path));
}

TEST(UnixSocketClaimTest, RefusesToReplaceARegularFile) {
  testing::TempDir dir;
  std::string path = dir.File("kilnd.sock");
  testing::WriteFile(path, "precious");
  absl::StatusOr<UnixSocketClaim> claim = UnixSocketClaim::Claim(path);
  ASSERT_FALSE(claim.ok());
  EXPECT_EQ(claim.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(claim.status().message(), HasSubstr("not a socket"));
  EXPECT_EQ(testing::ReadFile(path), "precious");
}

TEST(UnixSocketClaimTest, RefusesADirectoryOthersCanWrite) {
  testing::TempDir dir;
  std::string shared = dir.File("shared");
  ASSERT_EQ(mkdir(shared.c_str(), 0700), 0);
  ASSERT_EQ(chmod(shared.c_str(), 0777), 0);
  absl::StatusOr<UnixSocketClaim> claim =
      UnixSocketClaim::Claim(shared + "/kilnd.sock");
  ASSERT_FALSE(claim.ok());
  EXPECT_EQ(claim.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(claim.status().message(), HasSubstr("writable by other users"));
}

TEST(UnixSocketClaimTest, RejectsRelativeAndOverlongPaths) {
  EXPECT_EQ(UnixSocketClaim::Claim("kilnd.sock").status().code(),
            absl::StatusCode::kInvalidArgument);
  std::string overlong = "/tmp/" + std::string(200, 'x') + "/kilnd.sock";
  absl::Status status = UnixSocketClaim::Claim(overlong).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("107"));
}

}  // namespace
}  // namespace kiln::server
