// The remote entry format and the Redis URL, without a server.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cache/redis_url.h"
#include "cache/remote_entry_codec.h"
#include "tests/cache/test_util.h"

namespace kiln::cache {
namespace {

using ::kiln::cache::testing::KeyFor;
using ::kiln::cache::testing::MakeEntry;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSecret[] = "cluster-secret-0123456789";

HmacSha256 Mac(const char* secret = kSecret) {
  return *HmacSha256::Create(secret);
}

RemoteEntry Sample(int n, size_t size = 300) {
  EntryData data = MakeEntry(n, size);
  return RemoteEntry{data.metadata, data.blobs, absl::FromUnixMillis(1234567)};
}

TEST(RemoteEntryCodecTest, RoundTrip) {
  const std::string rk = RemoteKey("kiln", KeyFor(1));
  EXPECT_EQ(rk, "kiln:v1:" + KeyFor(1).hex());
  for (int level : {0, 3}) {
    RemoteEntry in = Sample(1, 5000);
    in.blobs[0].data = std::string(5000, 'q');  // compressible
    std::string value = EncodeRemoteEntry(Mac(), rk, KeyFor(1), in, level);
    if (level > 0) EXPECT_LT(value.size(), 1000u);
    absl::StatusOr<RemoteEntry> out =
        DecodeRemoteEntry(Mac(), rk, KeyFor(1), value, 1 << 20);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(out->metadata, in.metadata);
    EXPECT_EQ(out->blobs, in.blobs);
    EXPECT_EQ(out->created, in.created);
  }
}

TEST(RemoteEntryCodecTest, EveryFlippedByteAndEveryTruncationIsRejected) {
  const std::string rk = RemoteKey("kiln", KeyFor(2));
  for (int level : {0, 3}) {
    const std::string value =
        EncodeRemoteEntry(Mac(), rk, KeyFor(2), Sample(2), level);
    for (size_t i = 0; i < value.size(); ++i) {
      std::string bad = value;
      bad[i] ^= 0x01;
      absl::StatusOr<RemoteEntry> out =
          DecodeRemoteEntry(Mac(), rk, KeyFor(2), bad, 1 << 20);
      ASSERT_TRUE(absl::IsDataLoss(out.status())) << "byte " << i;
    }
    for (size_t len = 0; len < value.size(); ++len) {
      absl::StatusOr<RemoteEntry> out = DecodeRemoteEntry(
          Mac(), rk, KeyFor(2), value.substr(0, len), 1 << 20);
      ASSERT_TRUE(absl::IsDataLoss(out.status())) << "length " << len;
    }
  }
}

TEST(RemoteEntryCodecTest, WrongSecretKeyOrPlaceIsRejected) {
  const std::string rk = RemoteKey("kiln", KeyFor(3));
  const std::string value =
      EncodeRemoteEntry(Mac(), rk, KeyFor(3), Sample(3), 3);
  auto decode = [&](const HmacSha256& mac, absl::string_view where,
                    const Digest& key) {
    return DecodeRemoteEntry(mac, where, key, value, 1 << 20).status();
  };
  EXPECT_THAT(decode(Mac("another-cluster-secret"), rk, KeyFor(3)).message(),
              HasSubstr("bad signature"));
  // Copied under another key: the MAC covers the Redis key.
  EXPECT_TRUE(
      absl::IsDataLoss(decode(Mac(), RemoteKey("kiln", KeyFor(4)), KeyFor(4))));
  EXPECT_TRUE(absl::IsDataLoss(
      decode(Mac(), RemoteKey("other", KeyFor(3)), KeyFor(3))));
  // A validly signed value whose body names another key.
  const std::string misfiled =
      EncodeRemoteEntry(Mac(), rk, KeyFor(5), Sample(5), 3);
  EXPECT_THAT(DecodeRemoteEntry(Mac(), rk, KeyFor(3), misfiled, 1 << 20)
                  .status()
                  .message(),
              HasSubstr("wrong key"));
  // Over the size limit.
  EXPECT_THAT(
      DecodeRemoteEntry(Mac(), rk, KeyFor(3), value, 10).status().message(),
      HasSubstr("exceeds the limit"));
}

TEST(RemoteEntryCodecTest, Namespace) {
  EXPECT_TRUE(ValidateNamespace("kiln-prod_2.x").ok());
  for (const char* bad : {"", "a:b", "{tag}", "sp ace", "a/b"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(ValidateNamespace(bad))) << bad;
  }
}

struct UrlCase {
  std::string url;
  std::string host;
  int port;
  std::string socket;
  std::string user;
  std::string password;
  int db;
};

TEST(RedisUrlTest, Parses) {
  const UrlCase cases[] = {
      {"redis://cache.internal", "cache.internal", 6379, "", "", "", 0},
      {"redis://cache:7000/3", "cache", 7000, "", "", "", 3},
      {"redis://:s3cret@cache:7000/1", "cache", 7000, "", "", "s3cret", 1},
      {"redis://s3cret@cache", "cache", 6379, "", "", "s3cret", 0},
      {"redis://bob:p%40ss%2Fw@cache", "cache", 6379, "", "bob", "p@ss/w", 0},
      {"redis://[::1]:6380", "::1", 6380, "", "", "", 0},
      {"redis+unix:///run/redis.sock", "", 0, "/run/redis.sock", "", "", 0},
      {"redis+unix://:pw@/run/redis.sock?db=5", "", 0, "/run/redis.sock", "",
       "pw", 5},
      {"redis+unix:/run/redis.sock", "", 0, "/run/redis.sock", "", "", 0},
  };
  for (const UrlCase& c : cases) {
    absl::StatusOr<RedisUrl> url = RedisUrl::Parse(c.url);
    ASSERT_TRUE(url.ok()) << c.url << ": " << url.status();
    EXPECT_EQ(url->host, c.host) << c.url;
    EXPECT_EQ(url->port, c.port) << c.url;
    EXPECT_EQ(url->socket_path, c.socket) << c.url;
    EXPECT_EQ(url->username, c.user) << c.url;
    EXPECT_EQ(url->password, c.password) << c.url;
    EXPECT_EQ(url->db, c.db) << c.url;
    if (!c.password.empty()) {
      EXPECT_THAT(url->Redacted(), Not(HasSubstr(c.password))) << c.url;
      EXPECT_THAT(url->Redacted(), HasSubstr("***")) << c.url;
    }
  }
}

TEST(RedisUrlTest, ErrorsNeverShowThePassword) {
  for (const char* bad :
       {"redis://:hunter2-secret@cache:99999", "redis://:hunter2-secret@",
        "rediss://:hunter2-secret@cache", "http://:hunter2-secret@cache",
        "redis://:hunter2-secret@cache/notadb",
        "redis+unix://:hunter2-secret@/s?db=x", "redis://hunter2-secret@:1"}) {
    absl::StatusOr<RedisUrl> url = RedisUrl::Parse(bad);
    ASSERT_TRUE(absl::IsInvalidArgument(url.status())) << bad;
    EXPECT_THAT(url.status().message(), Not(HasSubstr("hunter2"))) << bad;
  }
  EXPECT_EQ(RedactRedisUrl("redis://user:pw@host:1/2"),
            "redis://user:***@host:1/2");
  EXPECT_EQ(RedactRedisUrl("redis://pw@host"), "redis://:***@host");
  EXPECT_EQ(RedactRedisUrl("redis://host:1"), "redis://host:1");
  EXPECT_EQ(RedactRedisUrl("redis+unix://:pw@/run/s"),
            "redis+unix://:***@/run/s");
}

}  // namespace
}  // namespace kiln::cache
