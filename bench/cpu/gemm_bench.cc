// Each Kiln configuration is compiled, loaded, launched once to warm up (the
// thread pool starts, pages are touched) and checked against the naive
// result, then timed `reps` times; the kernel is released before the next
// one is loaded. The naive loops are timed the same way. GFLOP/s counts
// 2 * M * N * K floating-point operations; CPU/wall (process CPU time over
// wall time while timed) shows how many threads were actually running, and
// GFLOP per CPU-second is the throughput while running: on a shared machine
// it is the figure that does not depend on how long the process waited.
#include "bench/cpu/gemm_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "bench/cpu/naive_gemm.h"
#include "compiler/compile.h"
#include "runtime/cpu/cpu_kernel.h"
#include "runtime/cpu/thread_pool.h"

namespace kiln::bench {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// CPU time of the whole process (every thread), in milliseconds.
double ProcessCpuMs() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 +
         (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

struct Timing {
  double median_ms = 0;
  double cpu_per_wall = 0;
  double mean_cpu_ms = 0;  // process CPU time per run
};

template <typename Fn>
absl::StatusOr<Timing> Time(int reps, Fn&& fn) {
  std::vector<double> ms;
  const double cpu_start = ProcessCpuMs();
  double wall = 0;
  for (int r = 0; r < reps; ++r) {
    const auto start = Clock::now();
    absl::Status s = fn();
    if (!s.ok()) return s;
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start)
                     .count());
    wall += ms.back();
  }
  const double cpu = ProcessCpuMs() - cpu_start;
  return Timing{Median(ms), cpu / wall, cpu / reps};
}

double MaxRelDiff(const std::vector<float>& got,
                  const std::vector<float>& want) {
  double max_abs = 0, max_diff = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    max_abs = std::max(max_abs, std::fabs(static_cast<double>(want[i])));
    max_diff =
        std::max(max_diff, std::fabs(static_cast<double>(got[i]) - want[i]));
  }
  return max_abs > 0 ? max_diff / max_abs : max_diff;
}

GemmBenchRow Row(std::string variant, int threads, double compile_ms,
                 const Timing& t, double flops, double diff) {
  GemmBenchRow row;
  row.variant = std::move(variant);
  row.threads = threads;
  row.compile_ms = compile_ms;
  row.median_ms = t.median_ms;
  row.gflops = flops / t.median_ms / 1e6;
  row.cpu_per_wall = t.cpu_per_wall;
  row.gflops_per_cpu_s = flops / t.mean_cpu_ms / 1e6;
  row.max_rel_diff = diff;
  return row;
}

}  // namespace

absl::StatusOr<std::vector<GemmBenchRow>> RunGemmBench(
    const GemmBenchOptions& options) {
  std::ifstream in(options.tile_path);
  if (!in) return absl::NotFoundError("cannot read " + options.tile_path);
  std::stringstream source;
  source << in.rdbuf();

  const int64_t n = options.size;
  const double flops = 2.0 * n * n * n;
  std::mt19937 gen(42);
  std::uniform_real_distribution<float> dist(-1, 1);
  std::vector<float> a(n * n), b(n * n), want(n * n), c(n * n);
  for (float& x : a) x = dist(gen);
  for (float& x : b) x = dist(gen);

  std::vector<GemmBenchRow> rows;
  NaiveGemm(a.data(), b.data(), want.data(), n, n, n);  // warm-up, reference
  absl::StatusOr<Timing> t = Time(options.reps, [&] {
    NaiveGemm(a.data(), b.data(), c.data(), n, n, n);
    return absl::OkStatus();
  });
  if (!t.ok()) return t.status();
  rows.push_back(
      Row("naive i-j-k loop, -O3", 1, 0, *t, flops, MaxRelDiff(c, want)));
  t = Time(options.reps, [&] {
    NaiveGemmIkj(a.data(), b.data(), c.data(), n, n, n);
    return absl::OkStatus();
  });
  if (!t.ok()) return t.status();
  rows.push_back(Row("naive i-k-j loop (vectorised inner), -O3", 1, 0, *t,
                     flops, MaxRelDiff(c, want)));

  absl::StatusOr<runtime::ThreadPool*> wide = runtime::ThreadPool::Default();
  if (!wide.ok()) return wide.status();
  absl::StatusOr<std::unique_ptr<runtime::ThreadPool>> single =
      runtime::ThreadPool::Create(1);
  if (!single.ok()) return single.status();

  for (const Bindings& config : options.configs) {
    compiler::CompileOptions copts;
    copts.kernel = "gemm_f32";
    copts.bindings = config;
    copts.filename = options.tile_path;
    absl::StatusOr<compiler::CompiledKernel> compiled =
        compiler::Compile(source.str(), copts);
    if (!compiled.ok()) return compiled.status();
    absl::StatusOr<std::unique_ptr<runtime::CpuKernel>> kernel =
        runtime::CpuKernel::Load(compiled->binary, compiled->metadata);
    if (!kernel.ok()) return kernel.status();
    const std::vector<runtime::ArgValue> args = {
        runtime::ArgValue::Tensor(a.data(), runtime::DType::kF32, {n, n}),
        runtime::ArgValue::Tensor(b.data(), runtime::DType::kF32, {n, n}),
        runtime::ArgValue::Tensor(c.data(), runtime::DType::kF32, {n, n})};
    for (runtime::ThreadPool* pool : {*wide, single->get()}) {
      std::fill(c.begin(), c.end(), std::nanf(""));
      absl::Status warm = (*kernel)->Launch(args, *pool);
      if (!warm.ok()) return warm;
      const double diff = MaxRelDiff(c, want);
      if (!(diff <= 1e-4)) {
        return absl::InternalError(
            absl::StrCat("gemm_f32 ", BindingsText(config),
                         " differs from the naive loop: max |diff| / max |C| "
                         "= ",
                         diff));
      }
      t = Time(options.reps, [&] { return (*kernel)->Launch(args, *pool); });
      if (!t.ok()) return t.status();
      rows.push_back(Row(absl::StrCat("kiln gemm_f32 ", BindingsText(config)),
                         pool->num_threads(), compiled->timings.total_ms, *t,
                         flops, diff));
    }
  }
  return rows;
}

}  // namespace kiln::bench
