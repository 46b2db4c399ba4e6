// kiln_service_bench: what the daemon costs a client, in one run against one
// kilnd on its unix socket:
//
//  1. cache-hit Compile latency (p50/p99) and throughput with 1, 8 and 64
//     concurrent clients, against the bare Echo RPC on the same server
//     (the transport's own cost) — goal: hit p50 within 1.5x of Echo;
//  2. a simulated inference-server start-up: connect, then fetch and load
//     (dlopen) N distinct cached kernels — goal: 200 kernels under 100 ms.
//
// Usage: kiln_service_bench [--seconds S] [--kernels N] [--kilnd PATH]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "tests/support/kilnd_process.h"
#include "tests/support/test_kernels.h"

namespace {

using kiln::client::Client;
using kiln::client::KernelRequest;

KernelRequest Scale(int i) {
  KernelRequest r;
  r.ir_text = absl::StrReplaceAll(
      kiln::testing::kScaleKernel,
      {{"kernel scale(", absl::StrCat("kernel scale", i, "(")}});
  r.target = "cpu";
  r.bindings = {{"B", 64}};
  return r;
}

struct Sample {
  std::vector<double> us;
  double seconds = 0;
  double Percentile(double p) const {
    if (us.empty()) return 0;
    std::vector<double> s = us;
    size_t k = std::min(s.size() - 1, static_cast<size_t>(p * s.size()));
    std::nth_element(s.begin(), s.begin() + k, s.end());
    return s[k];
  }
  double PerSecond() const { return us.size() / seconds; }
};

// Runs `call` from `threads` clients for `seconds`, recording each call.
template <typename Call>
Sample Measure(const std::vector<std::unique_ptr<Client>>& clients, int threads,
               double seconds, Call call) {
  std::vector<std::vector<double>> per(threads);
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::vector<std::thread> pool;
  const absl::Time start = absl::Now();
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const Client& client = *clients[t % clients.size()];
      while (!stop.load(std::memory_order_relaxed)) {
        absl::Time a = absl::Now();
        if (!call(client)) ++failures;
        per[t].push_back(absl::ToDoubleMicroseconds(absl::Now() - a));
      }
    });
  }
  absl::SleepFor(absl::Seconds(seconds));
  stop = true;
  for (std::thread& t : pool) t.join();
  Sample s;
  s.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  for (auto& v : per) s.us.insert(s.us.end(), v.begin(), v.end());
  if (failures > 0) {
    std::fprintf(stderr, "service_bench: %d calls failed\n", failures.load());
    std::exit(1);
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 2;
  int kernels = 200;
  std::string kilnd = KILN_KILND_PATH;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds"))
      seconds = std::atof(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--kernels"))
      kernels = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--kilnd"))
      kilnd = argv[i + 1];
    else {
      std::fprintf(stderr,
                   "usage: %s [--seconds S] [--kernels N] [--kilnd PATH]\n",
                   argv[0]);
      return 2;
    }
  }
  kiln::testing::TempDir cache_dir;
  const std::vector<std::string> args = {"--cache-dir",
                                         cache_dir.File("cache")};
  auto daemon = kiln::testing::KilndProcess::Start(kilnd, args);
  if (!daemon.ok()) {
    std::fprintf(stderr, "%s\n", daemon.status().ToString().c_str());
    return 1;
  }
  const std::string address = (*daemon)->address();
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 64; ++i) {
    auto c = Client::Connect(address);
    if (!c.ok()) {
      std::fprintf(stderr, "%s\n", c.status().ToString().c_str());
      return 1;
    }
    clients.push_back(*std::move(c));
  }

  // Warm the cache: the hot kernel and the start-up set.
  std::vector<KernelRequest> startup;
  for (int i = 0; i < kernels; ++i) startup.push_back(Scale(i));
  absl::Status prewarmed = clients[0]->Prewarm(startup);
  if (!prewarmed.ok()) {
    std::fprintf(stderr, "prewarm: %s\n", prewarmed.ToString().c_str());
    return 1;
  }
  const KernelRequest hot = Scale(0);
  auto first = clients[0]->CompileRaw(hot);
  if (!first.ok()) return 1;
  const size_t binary_bytes = first->kernel().binary().size();

  std::printf("kilnd on %s; hot kernel binary %zu bytes; %u cores\n\n",
              address.c_str(), binary_bytes,
              std::thread::hardware_concurrency());
  std::printf("%-8s %-22s %10s %10s %12s   %s\n", "clients", "call", "p50 us",
              "p99 us", "calls/s", "p50 vs echo");
  for (int threads : {1, 8, 64}) {
    Sample echo = Measure(clients, threads, seconds,
                          [](const Client& c) { return c.Echo("").ok(); });
    Sample hit = Measure(clients, threads, seconds, [&](const Client& c) {
      auto r = c.CompileRaw(hot);
      return r.ok() && r->tier() == kiln::v1::TIER_MEMORY;
    });
    std::printf("%-8d %-22s %10.1f %10.1f %12.0f\n", threads, "Echo (empty)",
                echo.Percentile(0.5), echo.Percentile(0.99), echo.PerSecond());
    std::printf("%-8d %-22s %10.1f %10.1f %12.0f   %.2fx\n", threads,
                "Compile (cache hit)", hit.Percentile(0.5),
                hit.Percentile(0.99), hit.PerSecond(),
                hit.Percentile(0.5) / echo.Percentile(0.5));
  }

  // Start-up: a new client fetches and loads every kernel of the set, from
  // a daemon that served them recently (memory) and from one just
  // restarted on the same cache (local store).
  std::printf(
      "\nstart-up: connect, then fetch and load (dlopen) %d cached "
      "kernels\n",
      kernels);
  std::printf("%-10s %-26s %10s %14s\n", "daemon", "fetching", "total ms",
              "per kernel us");
  for (const char* state : {"warm", "restarted"}) {
    if (std::strcmp(state, "restarted") == 0) {
      clients.clear();
      daemon->reset();
      daemon = kiln::testing::KilndProcess::Start(kilnd, args);
      if (!daemon.ok()) return 1;
    }
    for (int threads : {1, 8}) {
      std::vector<double> totals;
      for (int round = 0; round < 5; ++round) {
        if (std::strcmp(state, "restarted") == 0) {
          // Every round from a fresh daemon: its memory is empty.
          daemon->reset();
          daemon = kiln::testing::KilndProcess::Start(kilnd, args);
          if (!daemon.ok()) return 1;
        }
        const absl::Time start = absl::Now();
        auto client = Client::Connect((*daemon)->address());
        if (!client.ok()) return 1;
        std::atomic<int> next{0};
        std::atomic<int> failures{0};
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; ++t) {
          pool.emplace_back([&] {
            for (int i = next++; i < kernels; i = next++) {
              auto k = (*client)->Compile(startup[i]);
              if (!k.ok() || (k->tier() != "memory" && k->tier() != "local")) {
                ++failures;
              }
            }
          });
        }
        for (std::thread& t : pool) t.join();
        if (failures > 0) {
          std::fprintf(stderr, "start-up: %d kernels failed\n",
                       failures.load());
          return 1;
        }
        totals.push_back(absl::ToDoubleMilliseconds(absl::Now() - start));
      }
      std::sort(totals.begin(), totals.end());
      const double median = totals[totals.size() / 2];
      std::printf("%-10s %-26s %10.1f %14.1f\n", state,
                  absl::StrCat(threads, " thread(s), median of 5").c_str(),
                  median, 1000 * median / kernels);
    }
  }
  return 0;
}
