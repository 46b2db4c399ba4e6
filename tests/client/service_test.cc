// The Kiln service end to end: a real kilnd, the C++ client over the unix
// socket and over TCP (TLS, mutual TLS, bearer token), CPU kernels compiled,
// fetched and launched, single-flight under 64 concurrent clients, malformed
// requests, and two daemons sharing one Redis tier.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <hiredis/hiredis.h>
#include <signal.h>

#include <cmath>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/barrier.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "tests/cache/redis_server.h"
#include "tests/support/kilnd_process.h"
#include "tests/support/subprocess.h"
#include "tests/support/test_kernels.h"

namespace kiln::client {
namespace {

using ::testing::HasSubstr;

constexpr const char* kScale = ::kiln::testing::kScaleKernel;

KernelRequest ScaleRequest(int64_t block = 64) {
  KernelRequest r;
  r.ir_text = kScale;
  r.kernel = "scale";
  r.target = "cpu";
  r.bindings = {{"B", block}};
  r.filename = "scale.tile";
  return r;
}

// Launches `kernel` (the scale kernel) on n random values and checks
// Y = X * a.
void ExpectScales(const Kernel& kernel, int64_t n) {
  std::mt19937 rng(static_cast<uint32_t>(n));
  std::uniform_real_distribution<float> dist(-4, 4);
  std::vector<float> x(n), y(n, std::nanf(""));
  for (float& v : x) v = dist(rng);
  const float a = 2.5f;
  absl::Status status = kernel.Launch(
      {runtime::ArgValue::Tensor(x.data(), runtime::DType::kF32, {n}),
       runtime::ArgValue::Tensor(y.data(), runtime::DType::kF32, {n}),
       runtime::ArgValue::F32(a)});
  ASSERT_TRUE(status.ok()) << status;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(y[i], x[i] * a) << "element " << i << " of " << n;
  }
}

std::unique_ptr<Client> MustConnect(const std::string& address,
                                    ConnectOptions options = {}) {
  auto client = Client::Connect(address, options);
  EXPECT_TRUE(client.ok()) << client.status();
  return client.ok() ? std::move(*client) : nullptr;
}

// The TCP port kilnd logged ("listening on 127.0.0.1:PORT").
std::string TcpAddressOf(testing::KilndProcess& kilnd) {
  EXPECT_TRUE(
      testing::WaitForStderr(kilnd.process(), "listening on 127.0.0.1:"));
  std::smatch match;
  std::string err = kilnd.process().Stderr();
  if (!std::regex_search(err, match,
                         std::regex("listening on (127\\.0\\.0\\.1:[0-9]+)"))) {
    ADD_FAILURE() << "no TCP address in kilnd's log:\n" << err;
    return "";
  }
  return match[1].str();
}

TEST(ServiceTest, CompileFetchLaunchAndManageOverTheUnixSocket) {
  auto kilnd = testing::KilndProcess::Start(KILN_KILND_PATH);
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  auto client = MustConnect((*kilnd)->address());
  ASSERT_NE(client, nullptr);

  absl::StatusOr<Kernel> first = client->Compile(ScaleRequest());
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->tier(), "compiled");
  EXPECT_GT(first->compile_ms(), 0);
  EXPECT_EQ(first->name(), "scale");
  EXPECT_EQ(first->target(), "cpu");
  EXPECT_THAT(first->compile_log(), HasSubstr("total_ms"));
  ExpectScales(*first, 1000);  // ragged: 1000 is not a multiple of 64
  ExpectScales(*first, 1);

  absl::StatusOr<Kernel> again = client->Compile(ScaleRequest());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->tier(), "memory");
  EXPECT_EQ(again->key(), first->key());
  EXPECT_EQ(again->compile_ms(), 0);
  ExpectScales(*again, 4096);

  absl::StatusOr<Kernel> fetched = client->GetKernel(first->key());
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->binary(), first->binary());
  ExpectScales(*fetched, 77);

  EXPECT_EQ(client->Lookup(first->key()).value_or(false), true);
  absl::StatusOr<kiln::v1::LookupResponse> by_request =
      client->Lookup(ScaleRequest());
  ASSERT_TRUE(by_request.ok()) << by_request.status();
  EXPECT_EQ(by_request->key(), first->key());
  EXPECT_TRUE(by_request->present());
  absl::StatusOr<kiln::v1::LookupResponse> other =
      client->Lookup(ScaleRequest(128));
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->key(), first->key());
  EXPECT_FALSE(other->present());

  absl::StatusOr<kiln::v1::StatsResponse> stats = client->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->compiles(), 1);
  EXPECT_EQ(stats->hits(), 1);
  EXPECT_EQ(stats->misses(), 1);
  EXPECT_EQ(stats->cache_entries(), 1);
  EXPECT_GT(stats->cache_disk_bytes(), 0u);

  absl::StatusOr<kiln::v1::ListKernelsResponse> listed = client->ListKernels();
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->kernels_size(), 1);
  EXPECT_EQ(listed->kernels(0).key(), first->key());
  EXPECT_EQ(listed->kernels(0).kernel_name(), "scale");
  EXPECT_EQ(listed->kernels(0).target(), "cpu");

  absl::StatusOr<kiln::v1::EvictResponse> evicted =
      client->Evict({first->key(), other->key()});
  ASSERT_TRUE(evicted.ok()) << evicted.status();
  EXPECT_THAT(evicted->evicted(), ::testing::ElementsAre(first->key()));
  EXPECT_THAT(evicted->not_found(), ::testing::ElementsAre(other->key()));
  EXPECT_EQ(client->Lookup(first->key()).value_or(true), false);
  EXPECT_EQ(client->GetKernel(first->key()).status().code(),
            absl::StatusCode::kNotFound);
  // The handle loaded earlier does not need the daemon or the cache.
  ExpectScales(*first, 300);
}

TEST(ServiceTest, AutoTargetPicksTheHostsBestTarget) {
  auto kilnd = testing::KilndProcess::Start(KILN_KILND_PATH);
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  auto client = MustConnect((*kilnd)->address());
  ASSERT_NE(client, nullptr);
  auto caps = client->Capabilities();
  ASSERT_TRUE(caps.ok()) << caps.status();
  KernelRequest request = ScaleRequest();
  request.target = "auto";
  absl::StatusOr<kiln::v1::CompileResponse> response =
      client->CompileRaw(request, /*omit_binary=*/true);
  ASSERT_TRUE(response.ok()) << response.status();
  const std::string expected =
      caps->gpus_size() > 0 ? caps->gpus(0).target() : "cpu";
  EXPECT_EQ(response->kernel().target(), expected);
  EXPECT_TRUE(response->kernel().binary().empty());  // omitted on request
  EXPECT_FALSE(response->kernel().metadata().empty());
}

TEST(ServiceTest, MalformedRequestsGetTheirCodeAndTheDaemonKeepsServing) {
  auto kilnd = testing::KilndProcess::Start(KILN_KILND_PATH,
                                            {"--max-request-bytes", "65536"});
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  auto client = MustConnect((*kilnd)->address());
  ASSERT_NE(client, nullptr);

  KernelRequest bad_ir = ScaleRequest();
  bad_ir.ir_text =
      "kernel k(X: f32[N]) grid(1) threads(32) (bx) {\n  bogus\n}\n";
  bad_ir.kernel = "";
  absl::Status status = client->Compile(bad_ir).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("scale.tile:2:"));

  KernelRequest unknown_target = ScaleRequest();
  unknown_target.target = "tpu_v9";
  status = client->Compile(unknown_target).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("tpu_v9"));

  KernelRequest missing_tunable = ScaleRequest();
  missing_tunable.bindings.clear();
  status = client->Compile(missing_tunable).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_THAT(status.message(), HasSubstr("B"));

  KernelRequest bad_tunable = ScaleRequest(96);  // not in [64, 128]
  status = client->Compile(bad_tunable).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;

  KernelRequest unknown_kernel = ScaleRequest();
  unknown_kernel.kernel = "nope";
  status = client->Compile(unknown_kernel).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;

  KernelRequest oversized = ScaleRequest();
  oversized.ir_text += "// " + std::string(100000, 'x') + "\n";
  status = client->Compile(oversized).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted) << status;

  KernelRequest empty = ScaleRequest();
  empty.ir_text.clear();
  EXPECT_EQ(client->Compile(empty).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->GetKernel("xyz").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(client->GetKernel(std::string(64, 'a')).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(client->Evict({std::string(64, 'a'), "bad"}).status().code(),
            absl::StatusCode::kInvalidArgument);

  // Still serving, and still compiling.
  EXPECT_TRUE(client->Health().ok());
  absl::StatusOr<Kernel> good = client->Compile(ScaleRequest());
  ASSERT_TRUE(good.ok()) << good.status();
  ExpectScales(*good, 129);
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  // The five compile errors above; the oversized and empty requests were
  // refused before reaching the compile engine.
  EXPECT_EQ(stats->errors(), 5);
}

TEST(ServiceTest, SixtyFourConcurrentClientsMissingOneKernelCompileOnce) {
  auto kilnd = testing::KilndProcess::Start(KILN_KILND_PATH);
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  constexpr int kClients = 64;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i) {
    clients.push_back(MustConnect((*kilnd)->address()));
    ASSERT_NE(clients.back(), nullptr);
  }
  absl::Barrier start(kClients);
  std::vector<absl::StatusOr<Kernel>> results(kClients,
                                              absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      start.Block();
      results[i] = clients[i]->Compile(ScaleRequest(128));
    });
  }
  for (std::thread& t : threads) t.join();
  int compiled = 0;
  for (int i = 0; i < kClients; ++i) {
    ASSERT_TRUE(results[i].ok())
        << "client " << i << ": " << results[i].status();
    EXPECT_EQ(results[i]->key(), results[0]->key());
    if (results[i]->tier() == "compiled") ++compiled;
  }
  ExpectScales(*results[kClients - 1], 1000);
  auto stats = clients[0]->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  EXPECT_EQ(stats->compiles(), 1);
  EXPECT_EQ(stats->hits() + stats->misses(), kClients);
  EXPECT_EQ(stats->single_flight_joins(), stats->misses() - 1);
  EXPECT_EQ(compiled, stats->misses());
  std::cout << "64 clients: " << stats->misses() << " misses ("
            << stats->single_flight_joins() << " joined the one compile), "
            << stats->hits() << " hits\n";
}

TEST(ServiceTest, PrewarmStreamsOneMessagePerRequest) {
  auto kilnd = testing::KilndProcess::Start(KILN_KILND_PATH);
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  auto client = MustConnect((*kilnd)->address());
  ASSERT_NE(client, nullptr);
  KernelRequest broken = ScaleRequest();
  broken.ir_text = "kernel (";
  std::vector<KernelRequest> batch = {ScaleRequest(64), ScaleRequest(128),
                                      broken, ScaleRequest(64)};
  std::vector<kiln::v1::PrewarmProgress> messages;
  absl::Status status = client->Prewarm(
      batch,
      [&](const kiln::v1::PrewarmProgress& m) { messages.push_back(m); });
  ASSERT_TRUE(status.ok()) << status;
  ASSERT_EQ(messages.size(), batch.size());
  std::vector<int> seen(batch.size(), 0);
  for (size_t i = 0; i < messages.size(); ++i) {
    EXPECT_EQ(messages[i].done(), static_cast<int>(i) + 1);
    EXPECT_EQ(messages[i].total(), static_cast<int>(batch.size()));
    ++seen[messages[i].index()];
    if (messages[i].index() == 2) {
      EXPECT_EQ(messages[i].error_code(),
                static_cast<int>(absl::StatusCode::kInvalidArgument));
      EXPECT_THAT(messages[i].error_message(), HasSubstr("scale.tile:1:"));
    } else {
      EXPECT_EQ(messages[i].error_code(), 0) << messages[i].error_message();
      EXPECT_EQ(client->Lookup(messages[i].key()).value_or(false), true);
    }
  }
  EXPECT_EQ(seen, std::vector<int>(batch.size(), 1));
  auto stats = client->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->compiles(), 2);  // B=64 once, B=128 once
  EXPECT_EQ(client->Prewarm({}).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ServiceTest, TcpWithMutualTls) {
  testing::TempDir certs;
  absl::StatusOr<testing::RunResult> made =
      testing::Run({"/bin/bash", KILN_MAKE_CERTS, certs.path()});
  ASSERT_TRUE(made.ok() && made->exit_code == 0)
      << (made.ok() ? made->err : made.status().ToString());
  auto kilnd = testing::KilndProcess::Start(
      KILN_KILND_PATH,
      {"--listen-tcp", "127.0.0.1:0", "--tls-cert", certs.File("server.pem"),
       "--tls-key", certs.File("server.key"), "--tls-client-ca",
       certs.File("ca.pem")});
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  const std::string address = TcpAddressOf(**kilnd);

  ConnectOptions options;
  options.tls_root_certs = testing::ReadFile(certs.File("ca.pem"));
  options.tls_client_cert = testing::ReadFile(certs.File("client.pem"));
  options.tls_client_key = testing::ReadFile(certs.File("client.key"));
  options.tls_server_name = "localhost";
  auto client = MustConnect(address, options);
  ASSERT_NE(client, nullptr);
  absl::StatusOr<Kernel> kernel = client->Compile(ScaleRequest());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  ExpectScales(*kernel, 555);

  ConnectOptions quick;
  quick.timeout = absl::Milliseconds(1500);
  // No client certificate: the handshake fails.
  ConnectOptions no_cert = options;
  no_cert.timeout = quick.timeout;
  no_cert.tls_client_cert.clear();
  no_cert.tls_client_key.clear();
  EXPECT_EQ(Client::Connect(address, no_cert).status().code(),
            absl::StatusCode::kUnavailable);
  // A server certificate from a CA the client does not trust.
  ConnectOptions wrong_ca = options;
  wrong_ca.timeout = quick.timeout;
  wrong_ca.tls_root_certs = testing::ReadFile(certs.File("other-ca.pem"));
  EXPECT_EQ(Client::Connect(address, wrong_ca).status().code(),
            absl::StatusCode::kUnavailable);
  // Plaintext to a TLS port.
  EXPECT_EQ(Client::Connect(address, quick).status().code(),
            absl::StatusCode::kUnavailable);
  // The unix socket needs no certificate.
  auto local = MustConnect((*kilnd)->address());
  ASSERT_NE(local, nullptr);
  EXPECT_TRUE(local->Health().ok());
}

TEST(ServiceTest, TcpWithABearerToken) {
  testing::TempDir dir;
  const std::string token = "s3cret-token-for-kiln-tests";
  testing::WriteFile(dir.File("token"), token + "\n");
  auto kilnd = testing::KilndProcess::Start(
      KILN_KILND_PATH,
      {"--listen-tcp", "127.0.0.1:0", "--auth-token-file", dir.File("token")});
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  const std::string address = TcpAddressOf(**kilnd);

  auto anonymous = MustConnect(address);
  ASSERT_NE(anonymous, nullptr);
  EXPECT_EQ(anonymous->Compile(ScaleRequest()).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(anonymous->Stats().status().code(),
            absl::StatusCode::kUnauthenticated);
  auto wrong = MustConnect(address, {.bearer_token = token + "x"});
  ASSERT_NE(wrong, nullptr);
  EXPECT_EQ(wrong->Capabilities().status().code(),
            absl::StatusCode::kUnauthenticated);

  auto good = MustConnect(address, {.bearer_token = token});
  ASSERT_NE(good, nullptr);
  absl::StatusOr<Kernel> kernel = good->Compile(ScaleRequest());
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  ExpectScales(*kernel, 64);
  // Health checks stay open for probes; the unix socket needs no token.
  EXPECT_TRUE(anonymous->Health().ok());
  auto local = MustConnect((*kilnd)->address());
  ASSERT_NE(local, nullptr);
  EXPECT_TRUE(local->Stats().ok());
}

TEST(ServiceTest, TwoDaemonsShareOneRedisTier) {
  if (cache::testing::FindRedisServer().empty()) {
    GTEST_SKIP() << "redis-server is not installed (deploy/install-deps.sh "
                    "installs it)";
  }
  testing::TempDir dir;
  testing::TempDir redis_dir;
  cache::testing::RedisServer redis(redis_dir.path());
  ASSERT_TRUE(redis.Start()) << redis.Log();
  testing::WriteFile(dir.File("secret"), "cluster-secret-0123456789abcdef\n");
  const std::vector<std::string> shared = {"--redis-url", redis.unix_url(),
                                           "--redis-secret-file",
                                           dir.File("secret")};
  auto a = testing::KilndProcess::Start(KILN_KILND_PATH, shared);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = testing::KilndProcess::Start(KILN_KILND_PATH, shared);
  ASSERT_TRUE(b.ok()) << b.status();
  auto client_a = MustConnect((*a)->address());
  auto client_b = MustConnect((*b)->address());
  ASSERT_NE(client_a, nullptr);
  ASSERT_NE(client_b, nullptr);

  absl::StatusOr<Kernel> compiled = client_a->Compile(ScaleRequest());
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  EXPECT_EQ(compiled->tier(), "compiled");
  // Remote puts are sent in the background: wait until A has sent it.
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  int64_t puts = 0;
  while (puts == 0 && absl::Now() < give_up) {
    auto stats = client_a->Stats();
    ASSERT_TRUE(stats.ok()) << stats.status();
    auto it = stats->cache_counters().find("remote_puts");
    if (it != stats->cache_counters().end()) puts = it->second;
    if (puts == 0) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_GT(puts, 0) << "daemon A never stored the kernel in Redis";

  absl::StatusOr<Kernel> shared_hit = client_b->Compile(ScaleRequest());
  ASSERT_TRUE(shared_hit.ok()) << shared_hit.status();
  EXPECT_EQ(shared_hit->tier(), "remote");
  EXPECT_EQ(shared_hit->key(), compiled->key());
  ExpectScales(*shared_hit, 1000);
  auto stats_b = client_b->Stats();
  ASSERT_TRUE(stats_b.ok());
  EXPECT_EQ(stats_b->compiles(), 0);
  // Backfilled into B's local store.
  EXPECT_EQ(client_b->Lookup(compiled->key()).value_or(false), true);
}

// How many compile leases the Redis at unix socket `socket` holds.
int LeasesIn(const std::string& socket) {
  redisContext* c = redisConnectUnix(socket.c_str());
  if (c == nullptr || c->err != 0) {
    if (c != nullptr) redisFree(c);
    return -1;
  }
  auto* reply =
      static_cast<redisReply*>(redisCommand(c, "KEYS kiln:lease:v1:*"));
  int n = reply != nullptr && reply->type == REDIS_REPLY_ARRAY
              ? static_cast<int>(reply->elements)
              : -1;
  if (reply != nullptr) freeReplyObject(reply);
  redisFree(c);
  return n;
}

// Leases end in the background after their holder's put: wait for it.
int LeasesLeftAfterAWhile(const std::string& socket) {
  const absl::Time give_up = absl::Now() + absl::Seconds(10);
  int n = LeasesIn(socket);
  while (n != 0 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(20));
    n = LeasesIn(socket);
  }
  return n;
}

class ClusterServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cache::testing::FindRedisServer().empty()) {
      GTEST_SKIP() << "redis-server is not installed (deploy/install-deps.sh "
                      "installs it)";
    }
    redis_ = std::make_unique<cache::testing::RedisServer>(redis_dir_.path());
    ASSERT_TRUE(redis_->Start()) << redis_->Log();
    testing::WriteFile(dir_.File("secret"),
                       "cluster-secret-0123456789abcdef\n");
  }
  std::unique_ptr<testing::KilndProcess> Daemon(double lease_s) {
    auto d = testing::KilndProcess::Start(
        KILN_KILND_PATH, {"--redis-url", redis_->unix_url(),
                          "--redis-secret-file", dir_.File("secret"),
                          "--redis-compile-lease", std::to_string(lease_s)});
    EXPECT_TRUE(d.ok()) << d.status();
    return d.ok() ? std::move(*d) : nullptr;
  }
  testing::TempDir dir_;
  testing::TempDir redis_dir_;
  std::unique_ptr<cache::testing::RedisServer> redis_;
};

TEST_F(ClusterServiceTest, ThreeDaemonsMissingTheSameKernelCompileItOnce) {
  std::vector<std::unique_ptr<testing::KilndProcess>> daemons;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 3; ++i) {
    daemons.push_back(Daemon(10));
    ASSERT_NE(daemons.back(), nullptr);
    clients.push_back(MustConnect(daemons.back()->address()));
    ASSERT_NE(clients.back(), nullptr);
  }
  // Eight callers on each daemon, all at once.
  absl::Barrier start(24);
  std::vector<std::thread> threads;
  std::vector<std::string> keys(24);
  for (int t = 0; t < 24; ++t) {
    threads.emplace_back([&, t] {
      start.Block();
      absl::StatusOr<Kernel> k = clients[t % 3]->Compile(ScaleRequest(128));
      ASSERT_TRUE(k.ok()) << k.status();
      ExpectScales(*k, 100);
      keys[t] = k->key();
    });
  }
  for (std::thread& t : threads) t.join();
  int64_t compiles = 0;
  for (auto& c : clients) {
    auto stats = c->Stats();
    ASSERT_TRUE(stats.ok()) << stats.status();
    compiles += stats->compiles();
    EXPECT_EQ(stats->cluster_takeovers(), 0);
  }
  EXPECT_EQ(compiles, 1) << "the cluster compiled one kernel more than once";
  for (const std::string& k : keys) EXPECT_EQ(k, keys[0]);
  EXPECT_EQ(LeasesLeftAfterAWhile(redis_->socket_path()), 0)
      << "a lease was left behind";
}

TEST_F(ClusterServiceTest, ADaemonKilledMidCompileIsTakenOver) {
  auto a = Daemon(2);
  auto b = Daemon(2);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  auto client_a = MustConnect(a->address());
  auto client_b = MustConnect(b->address());
  ASSERT_NE(client_a, nullptr);
  ASSERT_NE(client_b, nullptr);
  // A compile long enough to kill its daemon in the middle: FlashAttention
  // for sm_90a through NVRTC (a second or more here).
  auto caps = client_b->Capabilities();
  ASSERT_TRUE(caps.ok()) << caps.status();
  bool sm90a = false;
  for (const auto& t : caps->targets()) sm90a = sm90a || t.name() == "sm_90a";
  if (!sm90a) {
    GTEST_SKIP() << "kilnd cannot compile for sm_90a here (no NVRTC); the "
                    "lease takeover is covered in process by engine_test";
  }
  std::ifstream in(std::string(KILN_CORPUS_DIR) + "/flash_attention_fwd.tile");
  std::stringstream text;
  text << in.rdbuf();
  KernelRequest attention;
  attention.ir_text = text.str();
  attention.kernel = "flash_attention_fwd";
  attention.target = "sm_90a";
  attention.filename = "flash_attention_fwd.tile";
  attention.bindings = {{"BM", 128}, {"BN", 64}, {"STAGES", 2}};
  ASSERT_FALSE(attention.ir_text.empty());

  // Prewarm compiles without loading the kernel (there is no GPU here).
  std::thread doomed([&] { (void)client_a->Prewarm({attention}); });
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (LeasesIn(redis_->socket_path()) < 1 && absl::Now() < give_up) {
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_EQ(LeasesIn(redis_->socket_path()), 1) << "A never took the lease";
  // Still compiling: no entry, no error marker yet.
  auto a_stats = client_a->Stats();
  ASSERT_TRUE(a_stats.ok());
  ASSERT_EQ(a_stats->active_compiles(), 1);
  a->process().Signal(SIGKILL);
  doomed.join();

  const absl::Time start = absl::Now();
  kiln::v1::PrewarmProgress done;
  absl::Status status = client_b->Prewarm(
      {attention}, [&](const kiln::v1::PrewarmProgress& p) { done = p; });
  const absl::Duration took = absl::Now() - start;
  ASSERT_TRUE(status.ok()) << status;
  EXPECT_EQ(done.error_message(), "");
  EXPECT_EQ(done.tier(), kiln::v1::TIER_COMPILED);
  EXPECT_EQ(done.key().size(), 64u);
  EXPECT_LT(took, absl::Seconds(30));
  auto stats = client_b->Stats();
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->compiles(), 1);
  EXPECT_EQ(stats->cluster_waits(), 1);
  EXPECT_EQ(stats->cluster_takeovers(), 1);
  EXPECT_EQ(LeasesLeftAfterAWhile(redis_->socket_path()), 0);
}

}  // namespace
}  // namespace kiln::client
