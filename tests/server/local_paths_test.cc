// Tests of kilnd's local paths: the default socket and directory creation.
#include "server/local_paths.h"

#include <sys/stat.h>

#include <string>

#include "gtest/gtest.h"
#include "proto/default_address.h"
#include "tests/support/subprocess.h"

namespace kiln::server {
namespace {

TEST(LocalPathsTest, SocketPathFollowsXdgRuntimeDir) {
  EXPECT_EQ(proto::SocketPathFor("/run/user/1000", 1000),
            "/run/user/1000/kiln/kilnd.sock");
  EXPECT_EQ(proto::SocketPathFor("", 1000), "/tmp/kiln-1000/kilnd.sock");
  EXPECT_EQ(proto::SocketPathFor("run", 7), "/tmp/kiln-7/kilnd.sock");
  EXPECT_EQ(proto::DefaultAddress(), "unix:" + proto::DefaultSocketPath());
}

TEST(LocalPathsTest, ParentDirectory) {
  EXPECT_EQ(ParentDirectory("/a/b/c"), "/a/b");
  EXPECT_EQ(ParentDirectory("/a/b/"), "/a");
  EXPECT_EQ(ParentDirectory("/a"), "/");
  EXPECT_EQ(ParentDirectory("name"), ".");
}

TEST(LocalPathsTest, MakeDirectoriesCreatesEveryLevel) {
  testing::TempDir dir;
  std::string deep = dir.File("a/b/c");
  ASSERT_TRUE(MakeDirectories(deep, 0700).ok());
  struct stat st;
  ASSERT_EQ(stat(deep.c_str(), &st), 0);
  EXPECT_TRUE(S_ISDIR(st.st_mode));
  EXPECT_EQ(st.st_mode & 0777, 0700);
  EXPECT_TRUE(MakeDirectories(deep, 0700).ok()) << "not idempotent";
}

TEST(LocalPathsTest, MakeDirectoriesRefusesAFileInTheWay) {
  testing::TempDir dir;
  testing::WriteFile(dir.File("file"), "x");
  absl::Status status = MakeDirectories(dir.File("file/sub"), 0700);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  status = MakeDirectories(dir.File("file"), 0700);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
}

}  // namespace
}  // namespace kiln::server
