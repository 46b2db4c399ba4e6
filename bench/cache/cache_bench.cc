// kiln_cache_bench: what the cache costs over the bytes it serves.
//
// Local tier: get latency (p50/p99) of a local hit against one plain read()
// (open, read, close) of the same blob file, interleaved in the same run;
// put throughput with and without fsync. Redis tier: RemoteTier::Get (GET,
// HMAC check, digest check, decode) against a bare hiredis GET of the same
// value; put throughput (encode, sign, SET) against bare SETs of the same
// bytes. Blobs of 4 KiB, 64 KiB and 1 MiB of random (incompressible) bytes.
//
//   kiln_cache_bench [--iterations N] [--redis URL | --no-redis] [--dir DIR]
//
// Without --redis it starts redis-server on a unix socket in a temp folder.
#include <fcntl.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cache/blob_directory.h"
#include "cache/local_store.h"
#include "cache/redis_url.h"
#include "cache/remote_tier.h"

extern char** environ;

namespace kiln::cache {
namespace {

using Clock = std::chrono::steady_clock;

double Micros(Clock::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

struct Latency {
  double p50 = 0, p99 = 0;
};

Latency Percentiles(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) {
    return samples[std::min(samples.size() - 1,
                            static_cast<size_t>(q * samples.size()))];
  };
  return {at(0.50), at(0.99)};
}

std::string RandomBytes(std::mt19937_64& rng, size_t n) {
  std::string out(n, '\0');
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng();
    std::memcpy(out.data() + i, &v, std::min<size_t>(8, n - i));
  }
  return out;
}

// One read() of a whole file: the floor any file cache pays.
bool PlainRead(const std::string& path, std::string* buf) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  struct stat st;
  fstat(fd, &st);
  buf->resize(static_cast<size_t>(st.st_size));
  ssize_t n = read(fd, buf->data(), buf->size());
  close(fd);
  return n == st.st_size;
}

struct Row {
  std::string tier, size, op;
  Latency ours, base;
  std::string base_name;
};

void PrintRows(const std::vector<Row>& rows) {
  std::printf("%-6s %-8s %-22s %10s %10s   %-12s %10s %10s %12s\n", "tier",
              "size", "operation", "p50 us", "p99 us", "baseline", "p50 us",
              "p99 us", "overhead p50");
  for (const Row& r : rows) {
    std::printf(
        "%-6s %-8s %-22s %10.1f %10.1f   %-12s %10.1f %10.1f %+9.1f us\n",
        r.tier.c_str(), r.size.c_str(), r.op.c_str(), r.ours.p50, r.ours.p99,
        r.base_name.c_str(), r.base.p50, r.base.p99, r.ours.p50 - r.base.p50);
  }
}

struct Throughput {
  std::string tier, size, op;
  double per_second = 0, mib_per_second = 0;
};

void PrintThroughput(const std::vector<Throughput>& rows) {
  std::printf("\n%-6s %-8s %-34s %12s %10s\n", "tier", "size", "operation",
              "ops/s", "MiB/s");
  for (const Throughput& t : rows) {
    std::printf("%-6s %-8s %-34s %12.0f %10.1f\n", t.tier.c_str(),
                t.size.c_str(), t.op.c_str(), t.per_second, t.mib_per_second);
  }
}

Throughput Rate(std::string tier, std::string size, std::string op, int n,
                size_t bytes, Clock::duration elapsed) {
  const double seconds = std::chrono::duration<double>(elapsed).count();
  return {std::move(tier), std::move(size), std::move(op), n / seconds,
          n * static_cast<double>(bytes) / seconds / (1 << 20)};
}

// Starts redis-server on a unix socket under `dir`; returns its pid or -1.
pid_t StartRedis(const std::string& dir, std::string* url) {
  const std::string socket = dir + "/redis.sock";
  std::vector<std::string> args = {"redis-server",
                                   "--port",
                                   "0",
                                   "--unixsocket",
                                   socket,
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--dir",
                                   dir,
                                   "--logfile",
                                   dir + "/redis.log"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid;
  if (posix_spawnp(&pid, "redis-server", nullptr, nullptr, argv.data(),
                   environ) != 0) {
    return -1;
  }
  for (int i = 0; i < 300; ++i) {
    redisContext* c = redisConnectUnix(socket.c_str());
    bool ok = c != nullptr && !c->err;
    if (c != nullptr) redisFree(c);
    if (ok) {
      *url = "redis+unix://" + socket;
      return pid;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(pid, SIGTERM);
  return -1;
}

constexpr size_t kSizes[] = {4 << 10, 64 << 10, 1 << 20};

std::string SizeName(size_t size) {
  return size >= (1 << 20) ? absl::StrCat(size >> 20, " MiB")
                           : absl::StrCat(size >> 10, " KiB");
}

// Enough distinct entries to avoid measuring one hot file, bounded in bytes.
int EntriesFor(size_t size, int iterations) {
  return std::max(8,
                  std::min(iterations, static_cast<int>((128 << 20) / size)));
}

void BenchLocal(const std::string& dir, int iterations, std::vector<Row>* rows,
                std::vector<Throughput>* rates) {
  std::mt19937_64 rng(7);
  for (bool sync : {true, false}) {
    const std::string store_dir = absl::StrCat(dir, "/local-", sync);
    LocalStoreOptions options;
    options.fsync = sync;
    auto store = *LocalStore::Open(store_dir, options);
    BlobDirectory files(store_dir);
    for (size_t size : kSizes) {
      const int n = EntriesFor(size, iterations);
      std::vector<EntryData> entries(n);
      std::vector<Digest> keys(n);
      for (int i = 0; i < n; ++i) {
        entries[i].metadata.kernel_name = "bench";
        entries[i].blobs.push_back(Blob{"binary", RandomBytes(rng, size)});
        keys[i] = Digest::Of(absl::StrCat(size, ":", i, ":", sync));
      }
      const auto start = Clock::now();
      for (int i = 0; i < n; ++i) {
        if (!store->Put(keys[i], entries[i]).ok()) std::abort();
      }
      rates->push_back(
          Rate("local", SizeName(size),
               sync ? "put (fsync, the default)" : "put (fsync off)", n, size,
               Clock::now() - start));
      if (!sync) continue;  // latency rows from the default configuration
      std::vector<double> ours, base;
      std::string buf;
      for (int i = 0; i < iterations; ++i) {
        const int k = static_cast<int>(rng() % n);
        const std::string path =
            files.PathOf(Digest::Of(entries[k].blobs[0].data));
        // Alternate which goes first, so neither always runs on a cache
        // (CPU, page cache, allocator) warmed by the other.
        for (int turn = 0; turn < 2; ++turn) {
          if ((turn == 0) == (i % 2 == 0)) {
            auto t0 = Clock::now();
            if (!PlainRead(path, &buf)) std::abort();
            base.push_back(Micros(Clock::now() - t0));
          } else {
            auto t0 = Clock::now();
            if (!store->Get(keys[k]).ok()) std::abort();
            ours.push_back(Micros(Clock::now() - t0));
          }
        }
      }
      rows->push_back(Row{"local", SizeName(size), "get (hit, verified)",
                          Percentiles(ours), Percentiles(base), "read()"});
    }
  }
}

void BenchRedis(const std::string& url, int iterations, std::vector<Row>* rows,
                std::vector<Throughput>* rates) {
  RemoteTierOptions options;
  options.url = url;
  options.secret = "benchmark-cluster-secret";
  options.max_pending_puts = 1 << 20;
  options.max_pending_bytes = 4ull << 30;
  auto tier = *RemoteTier::Create(options);
  RedisUrl parsed = *RedisUrl::Parse(url);
  redisContext* bare = parsed.socket_path.empty()
                           ? redisConnect(parsed.host.c_str(), parsed.port)
                           : redisConnectUnix(parsed.socket_path.c_str());
  if (bare == nullptr || bare->err) std::abort();
  std::mt19937_64 rng(11);
  for (size_t size : kSizes) {
    const int n = EntriesFor(size, iterations);
    std::vector<Digest> keys(n);
    std::vector<RemoteEntry> entries(n);
    for (int i = 0; i < n; ++i) {
      keys[i] = Digest::Of(absl::StrCat("redis:", size, ":", i));
      entries[i].metadata.kernel_name = "bench";
      entries[i].blobs.push_back(Blob{"binary", RandomBytes(rng, size)});
      entries[i].created = absl::Now();
    }
    auto start = Clock::now();
    for (int i = 0; i < n; ++i) tier->Put(keys[i], entries[i]);
    tier->Flush();
    rates->push_back(Rate("redis", SizeName(size), "put (encode, sign, SET)", n,
                          size, Clock::now() - start));
    // The same bytes with bare SETs.
    std::vector<std::string> values(n);
    for (int i = 0; i < n; ++i) {
      auto* r = static_cast<redisReply*>(
          redisCommand(bare, "GET %s", RemoteKey("kiln", keys[i]).c_str()));
      values[i].assign(r->str, r->len);
      freeReplyObject(r);
    }
    start = Clock::now();
    for (int i = 0; i < n; ++i) {
      const std::string k = absl::StrCat("bare:", i);
      auto* r = static_cast<redisReply*>(
          redisCommand(bare, "SET %b %b", k.data(), k.size(), values[i].data(),
                       values[i].size()));
      freeReplyObject(r);
    }
    rates->push_back(Rate("redis", SizeName(size), "bare SET (baseline)", n,
                          size, Clock::now() - start));
    std::vector<double> ours, base;
    for (int i = 0; i < iterations; ++i) {
      const int k = static_cast<int>(rng() % n);
      const std::string rk = RemoteKey("kiln", keys[k]);
      for (int turn = 0; turn < 2; ++turn) {
        if ((turn == 0) == (i % 2 == 0)) {
          auto t0 = Clock::now();
          auto* r = static_cast<redisReply*>(
              redisCommand(bare, "GET %b", rk.data(), rk.size()));
          if (r == nullptr || r->type != REDIS_REPLY_STRING) std::abort();
          freeReplyObject(r);  // a reply is freed either way: part of a GET
          base.push_back(Micros(Clock::now() - t0));
        } else {
          auto t0 = Clock::now();
          if (!tier->Get(keys[k]).has_value()) std::abort();
          ours.push_back(Micros(Clock::now() - t0));
        }
      }
    }
    rows->push_back(Row{"redis", SizeName(size), "get (verified, decoded)",
                        Percentiles(ours), Percentiles(base), "bare GET"});
  }
  redisFree(bare);
}

}  // namespace
}  // namespace kiln::cache

int main(int argc, char** argv) {
  CLI::App app("kiln_cache_bench: cache overhead against plain reads and GETs");
  int iterations = 1000;
  std::string redis_url, dir;
  bool no_redis = false;
  app.add_option("--iterations", iterations, "Gets per size (default 1000)");
  app.add_option("--redis", redis_url,
                 "Use this Redis instead of starting one");
  app.add_flag("--no-redis", no_redis, "Skip the Redis tier");
  app.add_option("--dir", dir, "Work directory (default: a fresh temp folder)");
  CLI11_PARSE(app, argc, argv);
  signal(SIGPIPE, SIG_IGN);

  bool own_dir = dir.empty();
  if (own_dir) {
    const char* tmp = getenv("TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr && *tmp ? tmp : "/tmp",
                                       "/kiln-bench-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) return 1;
    dir = pattern;
  }
  std::vector<kiln::cache::Row> rows;
  std::vector<kiln::cache::Throughput> rates;
  kiln::cache::BenchLocal(dir, iterations, &rows, &rates);
  pid_t redis = -1;
  if (!no_redis) {
    if (redis_url.empty()) redis = kiln::cache::StartRedis(dir, &redis_url);
    if (redis_url.empty()) {
      std::fprintf(stderr, "redis-server not found; Redis tier skipped\n");
    } else {
      kiln::cache::BenchRedis(redis_url, iterations, &rows, &rates);
    }
  }
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf(
      "kiln cache benchmark: %d gets per size, random blobs, %u CPUs, load "
      "average %.1f at the end\n\n",
      iterations, std::thread::hardware_concurrency(), load[0]);
  kiln::cache::PrintRows(rows);
  kiln::cache::PrintThroughput(rates);
  if (redis > 0) {
    kill(redis, SIGTERM);
    waitpid(redis, nullptr, 0);
  }
  if (own_dir) std::filesystem::remove_all(dir);
  return 0;
}
