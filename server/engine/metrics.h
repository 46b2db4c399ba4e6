// The daemon's counters in the Prometheus text exposition format (version
// 0.0.4), for the metrics endpoint (server/metrics_http.h). Transport-free:
// a pure function of the engine's and the cache's counters.
#ifndef KILN_SERVER_ENGINE_METRICS_H_
#define KILN_SERVER_ENGINE_METRICS_H_

#include <string>

#include "cache/local_store.h"
#include "server/engine/compile_engine.h"

namespace kiln::server {

// Every metric is named kiln_*, with # HELP and # TYPE lines:
//   kiln_requests_total{result="hit"|"miss"}   compile requests
//   kiln_cache_hits_total{tier="memory"|"local"|"remote"},
//   kiln_cache_misses_total{tier="local"|"remote"}
//   kiln_compiles_total, kiln_compile_errors_total{kind=...},
//   kiln_single_flight_joins_total, kiln_cluster_waits_total{outcome=...}
//   kiln_compile_duration_seconds (histogram of the compiles run)
//   kiln_compile_queue_depth, kiln_compile_peak_running (gauges)
//   kiln_cache_entries, kiln_cache_entry_bytes, kiln_cache_disk_bytes,
//   kiln_cache_evictions_total, kiln_cache_puts_total, ...
//   kiln_uptime_seconds
// Request counters count since the daemon started; the kiln_cache_*_total
// counters persist in the cache directory across restarts (they never go
// down while the directory lives).
std::string RenderMetrics(const EngineStats& engine,
                          const cache::StoreStats& cache,
                          double uptime_seconds);

}  // namespace kiln::server

#endif  // KILN_SERVER_ENGINE_METRICS_H_
