// `kiln cache ...` end to end: runs the command-line driver as a process and
// checks exit statuses and output.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "cache/blob_directory.h"
#include "cache/local_store.h"
#include "tests/cache/test_util.h"

namespace kiln::cache {
namespace {

using ::kiln::cache::testing::KeyFor;
using ::kiln::cache::testing::MakeEntry;
using ::kiln::cache::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

struct Result {
  int status = -1;
  std::string out;  // stdout and stderr together
};

Result Kiln(const std::string& args, const std::string& env = "") {
  const std::string command =
      absl::StrCat(env, " ", KILN_CACHE_CLI, " ", args, " 2>&1");
  Result r;
  FILE* pipe = popen(command.c_str(), "r");
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) r.out.append(buf, n);
  int status = pclose(pipe);
  r.status = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

class CacheCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.Sub("cache");
    LocalStoreOptions options;
    options.fsync = false;
    options.touch_interval = absl::ZeroDuration();  // the Get below counts
    // A clock one second apart per call, so the LRU order never depends on
    // two operations landing in the same millisecond.
    auto ticks = std::make_shared<int>(0);
    const absl::Time start = absl::Now() - absl::Hours(1);
    options.clock = [ticks, start] { return start + absl::Seconds(++*ticks); };
    auto store = *LocalStore::Open(dir_, options);
    for (int n = 0; n < 6; ++n)
      ASSERT_TRUE(store->Put(KeyFor(n), MakeEntry(n)).ok());
    ASSERT_TRUE(store->Get(KeyFor(0)).ok());
  }
  std::string D() const { return " --dir " + dir_; }

  TempDir tmp_;
  std::string dir_;
};

TEST_F(CacheCliTest, StatsLsShow) {
  Result r = Kiln("cache stats" + D());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("entries              6"));
  EXPECT_THAT(r.out, HasSubstr("hits"));

  r = Kiln("cache stats --json" + D());
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, StartsWith("{\"dir\":"));
  EXPECT_THAT(r.out, HasSubstr("\"entries\":6"));
  EXPECT_THAT(r.out, HasSubstr("\"hits\":1"));

  r = Kiln("cache ls" + D());
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr(KeyFor(5).hex()));
  EXPECT_THAT(r.out, HasSubstr("gfx942"));

  r = Kiln("cache ls --arch sm_90a --json" + D());
  EXPECT_EQ(r.status, 0);
  EXPECT_THAT(r.out, HasSubstr(KeyFor(4).hex()));
  EXPECT_THAT(r.out, Not(HasSubstr(KeyFor(5).hex())));
  EXPECT_THAT(r.out, HasSubstr("\"metadata\":\"{\\\"n\\\":4}\""));

  r = Kiln("cache show " + KeyFor(3).hex() + D());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("kernel_3"));
  EXPECT_THAT(r.out, HasSubstr("launch.json"));
  r = Kiln("cache show --json " + KeyFor(3).hex() + D());
  EXPECT_THAT(r.out, HasSubstr("\"kernel_name\":\"kernel_3\""));
}

TEST_F(CacheCliTest, ExitStatuses) {
  // Bad key: invalid input.
  Result r = Kiln("cache show NOTAKEY" + D());
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.out, HasSubstr("64 lowercase hex"));
  // Unknown key.
  r = Kiln("cache show " + KeyFor(77).hex() + D());
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.out, HasSubstr("no cache entry"));
  // No cache there: reported, not created.
  r = Kiln("cache stats --dir " + tmp_.Sub("none"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.out, HasSubstr("no kiln cache"));
  EXPECT_FALSE(std::filesystem::exists(tmp_.Sub("none")));
  // Usage errors: unknown flag, missing argument, malformed SIZE/AGE.
  EXPECT_EQ(Kiln("cache stats --bogus" + D()).status, 2);
  EXPECT_EQ(Kiln("cache show" + D()).status, 2);
  EXPECT_EQ(Kiln("cache").status, 2);
  r = Kiln("cache gc --max-size 10X" + D());
  EXPECT_EQ(r.status, 2);
  EXPECT_THAT(r.out, HasSubstr("unknown unit"));
  EXPECT_EQ(Kiln("cache gc --max-age 7" + D()).status, 2);
  EXPECT_EQ(Kiln("cache --help").status, 0);
}

TEST_F(CacheCliTest, RmAndGc) {
  Result r = Kiln("cache rm " + KeyFor(1).hex() + " " + KeyFor(2).hex() + D());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_EQ(Kiln("cache rm " + KeyFor(1).hex() + D()).status, 1);
  r = Kiln("cache gc --max-size 2K --max-age 30d --json" + D());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"evicted_entries\":3"));
  r = Kiln("cache ls --json" + D());
  EXPECT_THAT(r.out, HasSubstr(KeyFor(0).hex()));  // most recently used
}

TEST_F(CacheCliTest, VerifyReportsQuarantine) {
  Result r = Kiln("cache verify" + D());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("clean"));
  const Digest blob = Digest::Of(MakeEntry(4).blobs[0].data);
  const std::string path = BlobDirectory(dir_).PathOf(blob);
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  bytes[40] ^= 1;
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
  r = Kiln("cache verify --json" + D());
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"clean\":false"));
  EXPECT_THAT(r.out, HasSubstr(blob.hex()));
  EXPECT_THAT(r.out, HasSubstr(KeyFor(4).hex()));
  EXPECT_EQ(Kiln("cache verify" + D()).status, 0);  // quarantined: clean now
  EXPECT_EQ(Kiln("cache show " + KeyFor(4).hex() + D()).status, 1);
}

TEST_F(CacheCliTest, ImportKeepsCachedEntriesChecksSignaturesRefusesFifos) {
  const std::string secret = tmp_.Sub("secret");
  std::ofstream(secret) << "a cluster secret of some length\n";
  const std::string bundle = tmp_.Sub("signed.kbundle");
  Result r = Kiln("cache export " + bundle + " --secret-file " + secret + D());
  ASSERT_EQ(r.status, 0) << r.out;

  // The target already holds other content under key 2: it is kept.
  const std::string other_dir = tmp_.Sub("other");
  {
    LocalStoreOptions options;
    options.fsync = false;
    auto store = *LocalStore::Open(other_dir, options);
    EntryData mine = MakeEntry(2);
    mine.blobs[0].data = "the binary this cache compiled itself";
    ASSERT_TRUE(store->Put(KeyFor(2), mine).ok());
  }
  const std::string other = " --dir " + other_dir;
  r = Kiln("cache import " + bundle + " --secret-file " + secret + other);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("imported 5 entries"));
  EXPECT_THAT(r.out, HasSubstr("1 kept as cached"));
  EXPECT_THAT(r.out, HasSubstr("signature verified"));
  {
    auto store = *LocalStore::Open(other_dir);
    EXPECT_EQ(store->Get(KeyFor(2))->blobs[0].data,
              "the binary this cache compiled itself");
  }
  // With another secret, nothing is taken.
  const std::string wrong = tmp_.Sub("wrong");
  std::ofstream(wrong) << "another secret, not the cluster's";
  r = Kiln("cache import " + bundle + " --secret-file " + wrong + " --dir " +
           tmp_.Sub("third"));
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("signature does not match"));

  const std::string fifo = tmp_.Sub("fifo.kbundle");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  r = Kiln("cache import " + fifo + other);  // returns: does not block
  EXPECT_EQ(r.status, 1) << r.out;
  EXPECT_THAT(r.out, HasSubstr("not a regular file"));
}

TEST_F(CacheCliTest, ExportImport) {
  const std::string bundle = tmp_.Sub("h100.kbundle");
  Result r =
      Kiln("cache export " + bundle + " --sku 'NVIDIA H100 80GB HBM3'" + D());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("exported 2 entries"));  // n = 0, 3
  r = Kiln("cache import --dry-run --json " + bundle);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"entries\":2"));
  const std::string other = " --dir " + tmp_.Sub("other");
  r = Kiln("cache import " + bundle + other);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("imported 2 entries"));
  EXPECT_EQ(Kiln("cache show " + KeyFor(3).hex() + other).status, 0);

  std::ofstream(tmp_.Sub("keys.txt")) << KeyFor(1).hex() << "\n"
                                      << KeyFor(2).hex() << "\n";
  r = Kiln("cache export " + tmp_.Sub("k.kbundle") + " --keys-file " +
           tmp_.Sub("keys.txt") + " --key " + KeyFor(5).hex() + " --json" +
           D());
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr("\"entries\":3"));
  // A damaged bundle is refused with a clear message, and nothing imported.
  std::ofstream(tmp_.Sub("bad.kbundle"))
      << "definitely not a bundle, but long "
         "enough to have a header of 64 bytes";
  r = Kiln("cache import " + tmp_.Sub("bad.kbundle") + " --dir " +
           tmp_.Sub("third"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.out, HasSubstr("not a kiln bundle"));
  EXPECT_EQ(Kiln("cache export " + tmp_.Sub("x") + " --arch none" + D()).status,
            1);
}

TEST_F(CacheCliTest, DefaultDirectoryFollowsXdg) {
  const std::string xdg = tmp_.Sub("xdg");
  std::filesystem::create_directories(xdg);
  std::filesystem::rename(dir_, xdg + "/kiln");
  Result r = Kiln("cache stats --json", "XDG_CACHE_HOME=" + xdg);
  EXPECT_EQ(r.status, 0) << r.out;
  EXPECT_THAT(r.out, HasSubstr(xdg + "/kiln"));
  r = Kiln("cache stats --json", "XDG_CACHE_HOME= HOME=" + tmp_.Sub("home"));
  EXPECT_EQ(r.status, 1);
  EXPECT_THAT(r.out, HasSubstr(tmp_.Sub("home") + "/.cache/kiln"));
}

}  // namespace
}  // namespace kiln::cache
