// The remote tier against a real redis-server started by the test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <sstream>

#include "cache/cache.h"
#include "cache/redis_storage.h"
#include "spdlog/sinks/ostream_sink.h"
#include "spdlog/spdlog.h"
#include "tests/cache/redis_server.h"
#include "tests/cache/test_util.h"

namespace kiln::cache {
namespace {

using ::kiln::cache::testing::FindRedisServer;
using ::kiln::cache::testing::KeyFor;
using ::kiln::cache::testing::MakeEntry;
using ::kiln::cache::testing::MatchesEntry;
using ::kiln::cache::testing::RedisServer;
using ::kiln::cache::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSecret[] = "test-cluster-secret-0123456789";
constexpr char kPassword[] = "pa55-w0rd-never-logged";

class RedisTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (FindRedisServer().empty()) {
      GTEST_SKIP() << "redis-server is not installed; skipping Redis tests "
                      "(deploy/install-deps.sh installs it)";
    }
    RedisServer::Options options;
    options.tcp = true;
    options.password = kPassword;
    server_ = std::make_unique<RedisServer>(tmp_.path(), options);
    ASSERT_TRUE(server_->Start()) << "redis-server did not start:\n"
                                  << server_->Log();
    // Capture every log line, to check that secrets never appear.
    log_sink_ = std::make_shared<spdlog::sinks::ostream_sink_mt>(log_);
    previous_logger_ = spdlog::default_logger();
    spdlog::set_default_logger(
        std::make_shared<spdlog::logger>("test", log_sink_));
  }
  void TearDown() override {
    if (previous_logger_) spdlog::set_default_logger(previous_logger_);
    if (!log_.str().empty()) std::cerr << "captured log:\n" << log_.str();
    EXPECT_THAT(log_.str(), Not(HasSubstr(kPassword)));
    EXPECT_THAT(log_.str(), Not(HasSubstr(kSecret)));
  }

  RemoteTierOptions TierOptions(const std::string& url) {
    RemoteTierOptions options;
    options.url = url;
    options.secret = kSecret;
    options.cooldown = absl::Milliseconds(300);
    options.storage.connect_timeout = absl::Milliseconds(200);
    options.storage.operation_timeout = absl::Milliseconds(200);
    return options;
  }

  std::unique_ptr<Cache> OpenCache(
      const std::string& name, const std::string& url,
      absl::Duration timeout = absl::Milliseconds(200)) {
    CacheOptions options;
    options.local.fsync = false;
    options.remote = TierOptions(url);
    options.remote->storage.operation_timeout = timeout;
    absl::StatusOr<std::unique_ptr<Cache>> cache =
        Cache::Open(tmp_.Sub(name), options);
    EXPECT_TRUE(cache.ok()) << cache.status();
    return cache.ok() ? *std::move(cache) : nullptr;
  }

  // Raw access to the server, bypassing signing.
  std::unique_ptr<RedisStorage> Raw() {
    return std::make_unique<RedisStorage>(*RedisUrl::Parse(server_->unix_url()),
                                          RemoteStorageOptions());
  }

  TempDir tmp_;
  std::unique_ptr<RedisServer> server_;
  std::ostringstream log_;
  std::shared_ptr<spdlog::sinks::ostream_sink_mt> log_sink_;
  std::shared_ptr<spdlog::logger> previous_logger_;
};

TEST_F(RedisTest, StorageBasicsOverUnixAndTcpWithAuthAndDb) {
  for (const std::string& url : {server_->unix_url(), server_->tcp_url() + "/3",
                                 server_->unix_url() + "?db=2"}) {
    absl::StatusOr<std::unique_ptr<RemoteStorage>> storage =
        CreateRemoteStorage(url, RemoteStorageOptions());
    ASSERT_TRUE(storage.ok()) << storage.status();
    EXPECT_THAT((*storage)->Describe(), Not(HasSubstr(kPassword)));
    const std::string value("bin\0ary\r\n", 9);
    absl::StatusOr<std::optional<std::string>> got = (*storage)->Get("k");
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_FALSE(got->has_value());
    ASSERT_TRUE((*storage)->Put("k", value).ok());
    got = (*storage)->Get("k");
    ASSERT_TRUE(got.ok() && got->has_value());
    EXPECT_EQ(**got, value);
    ASSERT_TRUE((*storage)->Remove("k").ok());
    EXPECT_FALSE((*storage)->Get("k")->has_value());
  }
  // Databases are separate.
  auto db3 = *CreateRemoteStorage(server_->tcp_url() + "/3", {});
  auto db0 = *CreateRemoteStorage(server_->tcp_url(), {});
  ASSERT_TRUE(db3->Put("only-in-3", "x").ok());
  EXPECT_FALSE(db0->Get("only-in-3")->has_value());
}

TEST_F(RedisTest, WrongPasswordIsUnavailableAndNotEchoed) {
  auto storage = *CreateRemoteStorage(
      "redis+unix://:wrong-password-xyz@" + server_->socket_path(), {});
  absl::StatusOr<std::optional<std::string>> got = storage->Get("k");
  EXPECT_TRUE(absl::IsUnavailable(got.status())) << got.status();
  EXPECT_THAT(got.status().message(), Not(HasSubstr("wrong-password-xyz")));
  EXPECT_THAT(got.status().message(), HasSubstr("AUTH"));
}

TEST_F(RedisTest, RemoteHitAfterLocalMissIsBackfilled) {
  auto writer = OpenCache("a", server_->unix_url());
  auto reader = OpenCache("b", server_->tcp_url());
  ASSERT_TRUE(writer->Put(KeyFor(1), MakeEntry(1, 50000)).ok());
  writer->remote()->Flush();
  EXPECT_EQ(writer->remote()->Counters()[kRemotePuts], 1);

  EXPECT_TRUE(absl::IsNotFound(reader->local().Stat(KeyFor(1)).status()));
  Cache::Tier tier = Cache::Tier::kLocal;
  absl::StatusOr<Entry> got = reader->Get(KeyFor(1), true, &tier);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(MatchesEntry(*got, 1, 50000));
  EXPECT_EQ(tier, Cache::Tier::kRemote);
  EXPECT_EQ(reader->remote()->Counters()[kRemoteHits], 1);
  // Backfilled: now a local hit, no second remote read.
  absl::StatusOr<Entry> local = reader->local().Get(KeyFor(1));
  ASSERT_TRUE(local.ok());
  EXPECT_TRUE(MatchesEntry(*local, 1, 50000));
  ASSERT_TRUE(reader->Get(KeyFor(1), true, &tier).ok());
  EXPECT_EQ(tier, Cache::Tier::kLocal);
  EXPECT_EQ(reader->remote()->Counters()[kRemoteHits], 1);
  absl::StatusOr<StoreStats> stats = reader->local().Stats();
  EXPECT_EQ(stats->counters[kBackfills], 1);
  EXPECT_EQ(stats->counters[kRemoteHits], 1);  // persisted with local stats
  // A plain miss everywhere is NotFound.
  EXPECT_TRUE(absl::IsNotFound(reader->Get(KeyFor(2)).status()));
  EXPECT_EQ(reader->remote()->Counters()[kRemoteMisses], 1);
}

TEST_F(RedisTest, KeysAreNamespacedAndVersioned) {
  RemoteTierOptions a = TierOptions(server_->unix_url());
  RemoteTierOptions b = a;
  b.key_namespace = "staging";
  auto tier_a = *RemoteTier::Create(a);
  auto tier_b = *RemoteTier::Create(b);
  EntryData data = MakeEntry(3);
  tier_a->Put(KeyFor(3), RemoteEntry{data.metadata, data.blobs, absl::Now()});
  tier_a->Flush();
  EXPECT_TRUE(tier_a->Get(KeyFor(3)).has_value());
  EXPECT_FALSE(tier_b->Get(KeyFor(3)).has_value());
  EXPECT_TRUE(Raw()->Get("kiln:v1:" + KeyFor(3).hex())->has_value());
}

TEST_F(RedisTest, TamperedTruncatedOrForeignEntriesAreRejected) {
  auto writer = OpenCache("a", server_->unix_url());
  ASSERT_TRUE(writer->Put(KeyFor(1), MakeEntry(1, 4000)).ok());
  writer->remote()->Flush();
  auto raw = Raw();
  const std::string rk = "kiln:v1:" + KeyFor(1).hex();
  const std::string good = **raw->Get(rk);

  std::string flipped = good;
  flipped[good.size() / 2] ^= 0x20;
  std::string forged_secret;
  {
    RemoteTierOptions other = TierOptions(server_->unix_url());
    other.secret = "some-other-cluster-secret";
    auto tier = *RemoteTier::Create(other);
    EntryData evil = MakeEntry(1, 4000);
    evil.blobs[0].data[0] ^= 1;
    tier->Put(KeyFor(1), RemoteEntry{evil.metadata, evil.blobs, absl::Now()});
    tier->Flush();
    forged_secret = **raw->Get(rk);
  }
  const std::string poisons[] = {flipped, good.substr(0, good.size() - 7),
                                 good.substr(0, 10), forged_secret, ""};
  int n = 0;
  for (const std::string& poison : poisons) {
    auto reader =
        OpenCache("reader" + std::to_string(n++), server_->unix_url());
    ASSERT_TRUE(raw->Put(rk, poison).ok());
    absl::StatusOr<Entry> got = reader->Get(KeyFor(1));
    EXPECT_TRUE(absl::IsNotFound(got.status())) << "poison " << n;
    EXPECT_EQ(reader->remote()->Counters()[kRemoteRejected], 1) << n;
    EXPECT_TRUE(absl::IsNotFound(reader->local().Stat(KeyFor(1)).status()))
        << "a rejected entry was backfilled";
  }
  EXPECT_THAT(log_.str(), HasSubstr("rejected"));
}

TEST_F(RedisTest, RedisStoppedMidRunIsInvisibleToCallers) {
  auto cache = OpenCache("a", server_->tcp_url());
  for (int n = 0; n < 5; ++n)
    ASSERT_TRUE(cache->Put(KeyFor(n), MakeEntry(n)).ok());
  cache->remote()->Flush();
  server_->Stop();
  // Local hits, misses and puts all behave; nothing remote leaks out.
  for (int n = 0; n < 20; ++n) {
    absl::StatusOr<Entry> got = cache->Get(KeyFor(n));
    if (n < 5) {
      ASSERT_TRUE(got.ok()) << got.status();
    } else {
      ASSERT_TRUE(absl::IsNotFound(got.status())) << got.status();
    }
    ASSERT_TRUE(cache->Put(KeyFor(100 + n), MakeEntry(100 + n)).ok());
  }
  cache->remote()->Flush();
  std::map<std::string, int64_t> counters = cache->remote()->Counters();
  EXPECT_GE(counters[kRemoteErrors], 1);
  EXPECT_GE(counters[kRemoteSkipped] + counters[kRemotePutsDropped], 10);
  EXPECT_TRUE(cache->remote()->InCooldown());
  EXPECT_THAT(log_.str(), HasSubstr("skipping it for"));
  EXPECT_THAT(log_.str(), HasSubstr("127.0.0.1"));

  // Back after the cooldown.
  ASSERT_TRUE(server_->Start());
  std::this_thread::sleep_for(std::chrono::milliseconds(350));
  ASSERT_TRUE(cache->Put(KeyFor(200), MakeEntry(200)).ok());
  cache->remote()->Flush();
  auto other = OpenCache("b", server_->tcp_url());
  EXPECT_TRUE(other->Get(KeyFor(200)).ok());
}

TEST_F(RedisTest, HungRedisTimesOutAndPutsNeverBlock) {
  auto cache = OpenCache("a", server_->unix_url(), absl::Seconds(1));
  ASSERT_TRUE(cache->Put(KeyFor(1), MakeEntry(1)).ok());
  cache->remote()->Flush();
  server_->Pause();
  auto started = std::chrono::steady_clock::now();
  for (int n = 0; n < 10; ++n) {
    ASSERT_TRUE(cache->Put(KeyFor(10 + n), MakeEntry(10 + n)).ok());
  }
  auto put_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - started)
                    .count();
  // A put that waited would take at least the 1 s operation timeout.
  EXPECT_LT(put_ms, 800) << "puts waited for the hung server";
  started = std::chrono::steady_clock::now();
  EXPECT_TRUE(absl::IsNotFound(cache->Get(KeyFor(99)).status()));
  auto get_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::steady_clock::now() - started)
                    .count();
  EXPECT_LT(get_ms, 3000);  // one 1 s operation timeout, not forever
  cache->remote()->Flush();
  EXPECT_GE(cache->remote()->Counters()[kRemoteTimeouts], 1);
  server_->Resume();
}

// One key per entry and MOVED/ASK handling: the tier works against a Redis
// Cluster given any one node's address.
TEST_F(RedisTest, ConditionalSetAndReplaceAreAtomicAndExpire) {
  std::unique_ptr<RedisStorage> raw = Raw();
  std::string holder = "untouched";
  absl::StatusOr<bool> set =
      raw->SetIfAbsent("lease", "a", absl::Seconds(30), &holder);
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_TRUE(*set);
  EXPECT_EQ(holder, "untouched");
  // The same value again is still held by its owner (a retried command).
  EXPECT_TRUE(*raw->SetIfAbsent("lease", "a", absl::Seconds(30), &holder));
  EXPECT_FALSE(*raw->SetIfAbsent("lease", "b", absl::Seconds(30), &holder));
  EXPECT_EQ(holder, "a");
  // Only the holder's value replaces or deletes it.
  EXPECT_FALSE(*raw->ReplaceIf("lease", "b", "", absl::Seconds(1)));
  EXPECT_EQ(**raw->Get("lease"), "a");
  EXPECT_TRUE(*raw->ReplaceIf("lease", "a", "c", absl::Seconds(30)));
  EXPECT_EQ(**raw->Get("lease"), "c");
  EXPECT_TRUE(*raw->ReplaceIf("lease", "c", "", absl::Seconds(1)));
  EXPECT_FALSE(raw->Get("lease")->has_value());
  EXPECT_FALSE(*raw->ReplaceIf("lease", "c", "", absl::Seconds(1)));
  // An expiry ends it: another value may take it then.
  ASSERT_TRUE(
      *raw->SetIfAbsent("short", "a", absl::Milliseconds(500), nullptr));
  EXPECT_FALSE(*raw->SetIfAbsent("short", "b", absl::Seconds(30), nullptr));
  absl::SleepFor(absl::Milliseconds(800));
  EXPECT_TRUE(*raw->SetIfAbsent("short", "b", absl::Seconds(30), nullptr));
  // A renewal (replacing a value by itself) pushes the expiry out.
  ASSERT_TRUE(*raw->SetIfAbsent("renewed", "a", absl::Seconds(1), nullptr));
  for (int i = 0; i < 4; ++i) {
    absl::SleepFor(absl::Milliseconds(300));
    ASSERT_TRUE(*raw->ReplaceIf("renewed", "a", "a", absl::Seconds(1)));
  }
  EXPECT_EQ(**raw->Get("renewed"), "a");
}

TEST_F(RedisTest, CompileLeasesSingleFlightAcrossTiers) {
  RemoteTierOptions options = TierOptions(server_->unix_url());
  auto a = *RemoteTier::Create(options);
  auto b = *RemoteTier::Create(options);
  using State = RemoteTier::LeaseState;
  const absl::Duration ttl = absl::Seconds(30);
  EXPECT_EQ(a->AcquireLease(KeyFor(1), "tok-a", ttl).state, State::kAcquired);
  EXPECT_EQ(b->AcquireLease(KeyFor(1), "tok-b", ttl).state, State::kHeld);
  // Another key is free.
  EXPECT_EQ(b->AcquireLease(KeyFor(2), "tok-b", ttl).state, State::kAcquired);
  EXPECT_TRUE(a->RenewLease(KeyFor(1), "tok-a", ttl));
  EXPECT_FALSE(b->RenewLease(KeyFor(1), "tok-b", ttl));
  EXPECT_EQ(b->Counters()[kRemoteLeasesLost], 1);
  // The holder's put is sent before its lease ends: whoever sees the lease
  // gone finds the entry.
  EntryData data = MakeEntry(1, 200000);
  a->Put(KeyFor(1), RemoteEntry{data.metadata, data.blobs, absl::Now()});
  a->ReleaseLease(KeyFor(1), "tok-a");
  while (b->AcquireLease(KeyFor(1), "tok-b", ttl).state == State::kHeld) {
    absl::SleepFor(absl::Milliseconds(1));
  }
  std::optional<RemoteEntry> got = b->Get(KeyFor(1));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->blobs, data.blobs);
  EXPECT_EQ(a->Counters()[kRemoteLeases], 1);
  EXPECT_EQ(b->Counters()[kRemoteLeases], 2);
  // Leases live beside the entries, namespaced and versioned.
  EXPECT_TRUE(Raw()->Get("kiln:lease:v1:" + KeyFor(2).hex())->has_value());
}

TEST_F(RedisTest, FailedCompileLeaseCarriesItsSignedError) {
  RemoteTierOptions options = TierOptions(server_->unix_url());
  auto a = *RemoteTier::Create(options);
  auto b = *RemoteTier::Create(options);
  using State = RemoteTier::LeaseState;
  ASSERT_EQ(a->AcquireLease(KeyFor(5), "tok-a", absl::Seconds(30)).state,
            State::kAcquired);
  const absl::Status error = absl::InvalidArgumentError(
      "gemm.tile:3:7: error: tile extent 'K' is not a constant\n  more text");
  a->ReleaseLeaseWithFailure(KeyFor(5), "tok-a", error, absl::Seconds(1));
  a->Flush();
  RemoteTier::Lease lease =
      b->AcquireLease(KeyFor(5), "tok-b", absl::Seconds(30));
  EXPECT_EQ(lease.state, State::kFailed);
  EXPECT_EQ(lease.failure, error);
  // The error lasts its time, then the key may be compiled again.
  absl::SleepFor(absl::Milliseconds(1300));
  EXPECT_EQ(b->AcquireLease(KeyFor(5), "tok-b", absl::Seconds(30)).state,
            State::kAcquired);

  // An error written by someone without the secret, or garbage, is not
  // believed: the daemon compiles for itself.
  RemoteTierOptions other = options;
  other.secret = "another-cluster-secret-0123456789";
  auto stranger = *RemoteTier::Create(other);
  ASSERT_EQ(stranger->AcquireLease(KeyFor(6), "tok-s", absl::Seconds(30)).state,
            State::kAcquired);
  stranger->ReleaseLeaseWithFailure(KeyFor(6), "tok-s", error,
                                    absl::Seconds(30));
  stranger->Flush();
  EXPECT_EQ(b->AcquireLease(KeyFor(6), "tok-b", absl::Seconds(30)).state,
            State::kUnavailable);
  ASSERT_TRUE(Raw()->Put("kiln:lease:v1:" + KeyFor(7).hex(), "F1 3 zz x").ok());
  EXPECT_EQ(b->AcquireLease(KeyFor(7), "tok-b", absl::Seconds(30)).state,
            State::kUnavailable);
  EXPECT_EQ(b->Counters()[kRemoteRejected], 2);
}

TEST_F(RedisTest, LeasesOfAStoppedRedisAreUnavailableNotErrors) {
  RemoteTierOptions options = TierOptions(server_->unix_url());
  auto a = *RemoteTier::Create(options);
  server_->Stop();
  EXPECT_EQ(a->AcquireLease(KeyFor(1), "tok", absl::Seconds(30)).state,
            RemoteTier::LeaseState::kUnavailable);
  EXPECT_FALSE(a->RenewLease(KeyFor(1), "tok", absl::Seconds(30)));
  a->ReleaseLease(KeyFor(1), "tok");
  a->Flush();
  EXPECT_GE(a->Counters()[kRemoteErrors], 1);
}

TEST(RedisClusterTest, WorksThroughAnyNode) {
  if (FindRedisServer().empty()) {
    GTEST_SKIP() << "redis-server is not installed";
  }
  TempDir tmp;
  std::vector<std::unique_ptr<RedisServer>> nodes;
  std::vector<int> ports;
  for (int i = 0; i < 3; ++i) {
    const std::string dir = tmp.Sub("node" + std::to_string(i));
    std::filesystem::create_directories(dir);
    RedisServer::Options options;
    options.tcp = true;
    options.cluster = true;
    nodes.push_back(std::make_unique<RedisServer>(dir, options));
    ASSERT_TRUE(nodes.back()->Start()) << nodes.back()->Log();
    ports.push_back(nodes.back()->port());
  }
  if (!::kiln::cache::testing::CreateCluster(ports)) {
    GTEST_SKIP() << "could not form a Redis cluster (redis-cli missing?)";
  }
  RemoteTierOptions options;
  options.secret = kSecret;
  options.url = nodes[0]->tcp_url();
  auto writer = *RemoteTier::Create(options);
  options.url = nodes[2]->tcp_url();
  auto reader = *RemoteTier::Create(options);
  for (int n = 0; n < 30; ++n) {
    EntryData data = MakeEntry(n);
    writer->Put(KeyFor(n), RemoteEntry{data.metadata, data.blobs, absl::Now()});
  }
  writer->Flush();
  for (int n = 0; n < 30; ++n) {
    std::optional<RemoteEntry> got = reader->Get(KeyFor(n));
    ASSERT_TRUE(got.has_value()) << n;
    EXPECT_EQ(got->blobs, MakeEntry(n).blobs);
  }
  EXPECT_EQ(writer->Counters()[kRemotePuts], 30);
  EXPECT_EQ(writer->Counters()[kRemoteErrors], 0);
  EXPECT_EQ(reader->Counters()[kRemoteHits], 30);
  // Leases (SET NX, and a script for the conditional replace) follow the
  // redirections too.
  using State = RemoteTier::LeaseState;
  for (int n = 0; n < 10; ++n) {
    ASSERT_EQ(writer->AcquireLease(KeyFor(n), "w", absl::Seconds(30)).state,
              State::kAcquired);
    ASSERT_EQ(reader->AcquireLease(KeyFor(n), "r", absl::Seconds(30)).state,
              State::kHeld);
    ASSERT_TRUE(writer->RenewLease(KeyFor(n), "w", absl::Seconds(30)));
    writer->ReleaseLease(KeyFor(n), "w");
  }
  writer->Flush();
  for (int n = 0; n < 10; ++n) {
    EXPECT_EQ(reader->AcquireLease(KeyFor(n), "r", absl::Seconds(30)).state,
              State::kAcquired);
  }
  EXPECT_EQ(writer->Counters()[kRemoteErrors], 0);
}

}  // namespace
}  // namespace kiln::cache
