// The metrics page (server/engine/metrics.h) and the HTTP endpoint that
// serves it (server/metrics_http.h).
#include "server/engine/metrics.h"

#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/metrics_http.h"
#include "tests/support/http_get.h"

namespace kiln::server {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// Checks the exposition format: every sample line is NAME{LABELS} VALUE,
// every sample's family has # HELP and # TYPE before it. Returns the
// samples as "NAME{LABELS}" -> value text.
std::map<std::string, std::string> Samples(const std::string& page) {
  const std::regex sample(
      R"(^(kiln_[a-z_]+)((\{[a-z_]+="[^"]*"\})?) (-?[0-9][0-9.e+-]*|\+Inf)$)");
  std::set<std::string> typed, helped;
  std::map<std::string, std::string> out;
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (line.empty()) continue;
    const std::string l(line);
    if (l.rfind("# HELP ", 0) == 0) {
      helped.insert(l.substr(7, l.find(' ', 7) - 7));
      continue;
    }
    if (l.rfind("# TYPE ", 0) == 0) {
      typed.insert(l.substr(7, l.find(' ', 7) - 7));
      continue;
    }
    std::smatch m;
    EXPECT_TRUE(std::regex_match(l, m, sample)) << "bad sample line: " << l;
    if (m.empty()) continue;
    std::string family = m[1];
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s = suffix;
      if (!typed.count(family) && family.size() > s.size() &&
          family.compare(family.size() - s.size(), s.size(), s) == 0) {
        family.resize(family.size() - s.size());
      }
    }
    EXPECT_TRUE(typed.count(family) && helped.count(family))
        << "no # TYPE / # HELP before " << l;
    out[m[1].str() + m[2].str()] = m[4];
  }
  return out;
}

TEST(MetricsTest, RendersCountersGaugesAndTheCompileHistogram) {
  EngineStats e;
  e.hits = 7;
  e.memory_hits = 3;
  e.misses = 4;
  e.compiles = 3;
  e.single_flight_joins = 1;
  e.errors = 2;
  e.deadline_exceeded = 1;
  e.active_compiles = 5;
  e.cluster_waits = 2;
  e.cluster_takeovers = 1;
  e.compile_seconds[0] = 1;      // <= 0.05 s
  e.compile_seconds[4] = 1;      // (0.5, 1] s
  e.compile_seconds.back() = 1;  // > 600 s
  e.compile_seconds_sum = 700.75;
  cache::StoreStats c;
  c.entries = 12;
  c.entry_bytes = 3000;
  c.disk_bytes = 2000;
  c.counters = {{"hits", 40},
                {"misses", 9},
                {"remote_hits", 6},
                {"evictions", 2},
                {"puts", 11}};
  const std::map<std::string, std::string> s =
      Samples(RenderMetrics(e, c, 12.5));
  EXPECT_EQ(s.at("kiln_requests_total{result=\"hit\"}"), "7");
  EXPECT_EQ(s.at("kiln_requests_total{result=\"miss\"}"), "4");
  EXPECT_EQ(s.at("kiln_cache_hits_total{tier=\"memory\"}"), "3");
  EXPECT_EQ(s.at("kiln_cache_hits_total{tier=\"local\"}"), "40");
  EXPECT_EQ(s.at("kiln_cache_hits_total{tier=\"remote\"}"), "6");
  EXPECT_EQ(s.at("kiln_cache_misses_total{tier=\"local\"}"), "9");
  EXPECT_EQ(s.at("kiln_cache_misses_total{tier=\"remote\"}"), "0");
  EXPECT_EQ(s.at("kiln_compiles_total"), "3");
  EXPECT_EQ(s.at("kiln_compile_errors_total{kind=\"any\"}"), "2");
  EXPECT_EQ(s.at("kiln_compile_errors_total{kind=\"deadline_exceeded\"}"), "1");
  EXPECT_EQ(s.at("kiln_single_flight_joins_total"), "1");
  EXPECT_EQ(s.at("kiln_cluster_waits_total{outcome=\"takeover\"}"), "1");
  EXPECT_EQ(s.at("kiln_compile_queue_depth"), "5");
  EXPECT_EQ(s.at("kiln_cache_entries"), "12");
  EXPECT_EQ(s.at("kiln_cache_disk_bytes"), "2000");
  EXPECT_EQ(s.at("kiln_cache_evictions_total"), "2");
  EXPECT_EQ(s.at("kiln_cache_puts_total{tier=\"local\"}"), "11");
  EXPECT_EQ(s.at("kiln_uptime_seconds"), "12.5");
  // Cumulative buckets, +Inf equal to the count.
  EXPECT_EQ(s.at("kiln_compile_duration_seconds_bucket{le=\"0.05\"}"), "1");
  EXPECT_EQ(s.at("kiln_compile_duration_seconds_bucket{le=\"0.5\"}"), "1");
  EXPECT_EQ(s.at("kiln_compile_duration_seconds_bucket{le=\"1\"}"), "2");
  EXPECT_EQ(s.at("kiln_compile_duration_seconds_bucket{le=\"600\"}"), "2");
  EXPECT_EQ(s.at("kiln_compile_duration_seconds_bucket{le=\"+Inf\"}"), "3");
  EXPECT_EQ(s.at("kiln_compile_duration_seconds_count"), "3");
  EXPECT_EQ(s.at("kiln_compile_duration_seconds_sum"), "700.75");
}

TEST(MetricsServerTest, ServesTheRenderedPageAtSlashMetricsOnly) {
  int renders = 0;
  bool fail = false;
  auto server = MetricsServer::Start(
      TcpAddress{"127.0.0.1", 0}, [&]() -> absl::StatusOr<std::string> {
        ++renders;
        if (fail) return absl::InternalError("cache index unreadable");
        return std::string("kiln_up 1\n");
      });
  ASSERT_TRUE(server.ok()) << server.status();
  const int port = (*server)->port();
  ASSERT_GT(port, 0);
  absl::StatusOr<std::string> r = testing::HttpRequest(port, "GET", "/metrics");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(*r, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(*r, HasSubstr("Content-Length: 10\r\n"));
  EXPECT_EQ(testing::HttpBody(*r), "kiln_up 1\n");
  r = testing::HttpRequest(port, "GET", "/metrics?x=1");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(testing::HttpBody(*r), "kiln_up 1\n");
  r = testing::HttpRequest(port, "GET", "/");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, StartsWith("HTTP/1.1 404 "));
  r = testing::HttpRequest(port, "POST", "/metrics");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, StartsWith("HTTP/1.1 405 "));
  EXPECT_EQ(renders, 2);
  fail = true;
  r = testing::HttpRequest(port, "GET", "/metrics");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(*r, StartsWith("HTTP/1.1 500 "));
  EXPECT_THAT(testing::HttpBody(*r), HasSubstr("cache index unreadable"));
  server->reset();  // stops: the port is closed
  EXPECT_FALSE(testing::HttpRequest(port, "GET", "/metrics").ok());
}

TEST(MetricsServerTest, AnAddressInUseIsUnavailable) {
  auto first = MetricsServer::Start(TcpAddress{"127.0.0.1", 0},
                                    [] { return std::string(); });
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = MetricsServer::Start(TcpAddress{"127.0.0.1", (*first)->port()},
                                     [] { return std::string(); });
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(second.status().message(), HasSubstr("cannot listen"));
}

}  // namespace
}  // namespace kiln::server
