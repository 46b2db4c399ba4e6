#include "server/engine/metrics.h"

#include <cstdint>
#include <initializer_list>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cache/cache.h"
#include "cache/remote_tier.h"

namespace kiln::server {
namespace {

class Exposition {
 public:
  // One metric family: its HELP and TYPE lines, then `samples` (label set,
  // value), the label set written as `{k="v"}` or empty.
  void Family(const std::string& name, const char* type, const char* help,
              std::initializer_list<std::pair<std::string, double>> samples) {
    Head(name, type, help);
    for (const auto& [labels, value] : samples) Sample(name, labels, value);
  }
  void Head(const std::string& name, const char* type, const char* help) {
    absl::StrAppend(&out_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ",
                    type, "\n");
  }
  void Sample(const std::string& name, const std::string& labels,
              double value) {
    absl::StrAppend(&out_, name, labels, " ", Number(value), "\n");
  }
  std::string Take() { return std::move(out_); }

 private:
  static std::string Number(double v) {
    // Counts are integers: print them exactly; the rest in shortest form.
    if (v == static_cast<double>(static_cast<int64_t>(v)) && v < 9e15 &&
        v > -9e15) {
      return absl::StrCat(static_cast<int64_t>(v));
    }
    return absl::StrFormat("%.17g", v);
  }
  std::string out_;
};

double Counter(const cache::StoreStats& c, const char* name) {
  auto it = c.counters.find(name);
  return it == c.counters.end() ? 0 : static_cast<double>(it->second);
}

}  // namespace

std::string RenderMetrics(const EngineStats& e, const cache::StoreStats& c,
                          double uptime_seconds) {
  Exposition x;
  x.Family("kiln_requests_total", "counter",
           "Compile requests since the daemon started, by whether the cache "
           "had the kernel.",
           {{"{result=\"hit\"}", e.hits}, {"{result=\"miss\"}", e.misses}});
  x.Family("kiln_cache_hits_total", "counter",
           "Kernels found, by cache tier (memory: since the daemon started; "
           "local and remote: the cache directory's lifetime).",
           {{"{tier=\"memory\"}", e.memory_hits},
            {"{tier=\"local\"}", Counter(c, cache::kHits)},
            {"{tier=\"remote\"}", Counter(c, cache::kRemoteHits)}});
  x.Family("kiln_cache_misses_total", "counter",
           "Lookups that did not find the kernel, by cache tier.",
           {{"{tier=\"local\"}", Counter(c, cache::kMisses)},
            {"{tier=\"remote\"}", Counter(c, cache::kRemoteMisses)}});
  x.Family("kiln_compiles_total", "counter", "Compiles run by the daemon.",
           {{"", e.compiles}});
  x.Family("kiln_compile_errors_total", "counter",
           "Compile requests answered with an error, by kind (all of them; "
           "of which: past their deadline, cancelled by the caller, answered "
           "from a remembered failure).",
           {{"{kind=\"any\"}", e.errors},
            {"{kind=\"deadline_exceeded\"}", e.deadline_exceeded},
            {"{kind=\"cancelled\"}", e.cancelled},
            {"{kind=\"remembered\"}", e.remembered_failures}});
  x.Family("kiln_single_flight_joins_total", "counter",
           "Misses that joined a compile of the same kernel already running.",
           {{"", e.single_flight_joins}});
  x.Family("kiln_cluster_waits_total", "counter",
           "Compiles that waited for another daemon compiling the same kernel "
           "(all; served by it; given its error; compiled here after all).",
           {{"{outcome=\"any\"}", e.cluster_waits},
            {"{outcome=\"served\"}", e.cluster_served},
            {"{outcome=\"failed\"}", e.cluster_failures},
            {"{outcome=\"takeover\"}", e.cluster_takeovers}});

  const std::string h = "kiln_compile_duration_seconds";
  x.Head(h, "histogram", "Wall time of the compiles the daemon ran.");
  int64_t cumulative = 0;
  for (size_t b = 0; b < kCompileSecondsBuckets.size(); ++b) {
    cumulative += e.compile_seconds[b];
    x.Sample(h + "_bucket",
             absl::StrFormat("{le=\"%g\"}", kCompileSecondsBuckets[b]),
             static_cast<double>(cumulative));
  }
  cumulative += e.compile_seconds.back();
  x.Sample(h + "_bucket", "{le=\"+Inf\"}", static_cast<double>(cumulative));
  x.Sample(h + "_sum", "", e.compile_seconds_sum);
  x.Sample(h + "_count", "", static_cast<double>(cumulative));

  x.Family("kiln_compile_queue_depth", "gauge",
           "Compiles queued or running now.", {{"", e.active_compiles}});
  x.Family("kiln_compile_peak_running", "gauge",
           "Most compiles running at once since the daemon started.",
           {{"", e.peak_running_compiles}});
  x.Family("kiln_cache_entries", "gauge", "Kernels in the local cache.",
           {{"", static_cast<double>(c.entries)}});
  x.Family("kiln_cache_entry_bytes", "gauge",
           "Logical size of the local cache's entries.",
           {{"", static_cast<double>(c.entry_bytes)}});
  x.Family("kiln_cache_disk_bytes", "gauge",
           "Bytes of the local cache's blob files on disk.",
           {{"", static_cast<double>(c.disk_bytes)}});
  x.Family("kiln_cache_evictions_total", "counter",
           "Entries evicted from the local cache.",
           {{"", Counter(c, cache::kEvictions)}});
  x.Family("kiln_cache_puts_total", "counter", "Entries stored, by tier.",
           {{"{tier=\"local\"}", Counter(c, cache::kPuts)},
            {"{tier=\"remote\"}", Counter(c, cache::kRemotePuts)}});
  x.Family("kiln_cache_backfills_total", "counter",
           "Remote hits copied into the local cache.",
           {{"", Counter(c, cache::kBackfills)}});
  x.Family("kiln_cache_quarantined_total", "counter",
           "Damaged blobs moved aside.", {{"", Counter(c, cache::kCorrupt)}});
  x.Family("kiln_remote_errors_total", "counter",
           "Shared-tier calls that failed, by kind.",
           {{"{kind=\"error\"}", Counter(c, cache::kRemoteErrors)},
            {"{kind=\"timeout\"}", Counter(c, cache::kRemoteTimeouts)},
            {"{kind=\"rejected\"}", Counter(c, cache::kRemoteRejected)}});
  x.Family("kiln_uptime_seconds", "gauge", "Seconds since the daemon started.",
           {{"", uptime_seconds}});
  return x.Take();
}

}  // namespace kiln::server
