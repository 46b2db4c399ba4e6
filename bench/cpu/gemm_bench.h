// bench_cpu's GEMM measurement: C = A @ B in f32 through Kiln (compile
// bench/cpu/gemm_f32.tile, load, launch on the CPU runtime's thread pool)
// against NaiveGemm, on the same random inputs in the same run.
#ifndef KILN_BENCH_CPU_GEMM_BENCH_H_
#define KILN_BENCH_CPU_GEMM_BENCH_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "bench/cpu/tunables.h"

namespace kiln::bench {

struct GemmBenchOptions {
  int64_t size = 1024;    // M = N = K
  int reps = 5;           // timed runs per variant; the median is reported
  std::string tile_path;  // gemm_f32.tile
  std::vector<Bindings> configs;  // tunables of the Kiln variants
};

struct GemmBenchRow {
  std::string variant;  // "kiln BM=128 BN=128 BK=32, 2 threads", "naive"
  int threads = 1;
  double compile_ms = 0;  // Kiln only
  double median_ms = 0;
  double gflops = 0;
  double cpu_per_wall = 0;      // process CPU time / wall time while timed
  double gflops_per_cpu_s = 0;  // 2MNK / process CPU time of one run
  double max_rel_diff = 0;      // against the naive result, / max |C|
};

// Runs the naive loops (NaiveGemm first: the reference of every ratio and
// result check; then NaiveGemmIkj), then every Kiln configuration with the
// default pool (one thread per hardware thread) and with a one-thread pool.
// Errors: the tile file cannot be read, a compile, load or launch fails, or a
// Kiln result differs from the naive one by more than 1e-4 of max |C|.
absl::StatusOr<std::vector<GemmBenchRow>> RunGemmBench(
    const GemmBenchOptions& options);

}  // namespace kiln::bench

#endif  // KILN_BENCH_CPU_GEMM_BENCH_H_
