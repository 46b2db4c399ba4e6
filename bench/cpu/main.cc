// bench_cpu: (a) f32 GEMM through Kiln on the CPU against a naive -O3 triple
// loop; (b) Compile()'s stage times for every corpus kernel. Prints Markdown
// tables for bench/NOTES.md ("CPU").
#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>

#include "CLI/CLI.hpp"
#include "absl/strings/str_format.h"
#include "bench/cpu/compile_stages.h"
#include "bench/cpu/gemm_bench.h"
#include "compiler/codegen/cpu/cpu_codegen.h"

namespace {

std::string CpuModel() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("model name", 0) == 0) {
      return line.substr(line.find(':') + 2);
    }
  }
  return "unknown CPU";
}

void PrintGemm(const std::vector<kiln::bench::GemmBenchRow>& rows, int64_t size,
               int reps) {
  std::printf("\n### GEMM f32 %lldx%lldx%lld (median of %d runs)\n\n",
              static_cast<long long>(size), static_cast<long long>(size),
              static_cast<long long>(size), reps);
  std::printf(
      "| variant | threads | compile ms | median ms | GFLOP/s | x naive | "
      "CPU/wall | GFLOP/CPU-s | max rel diff |\n"
      "|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  const double naive = rows.front().gflops;
  for (const auto& r : rows) {
    const std::string compile =
        r.compile_ms > 0 ? absl::StrFormat("%.0f", r.compile_ms) : "-";
    std::printf("| %s | %d | %s | %.1f | %.2f | %.1f | %.2f | %.2f | %.1e |\n",
                r.variant.c_str(), r.threads, compile.c_str(), r.median_ms,
                r.gflops, r.gflops / naive, r.cpu_per_wall, r.gflops_per_cpu_s,
                r.max_rel_diff);
  }
}

void PrintCompileStages(const std::vector<kiln::bench::CompileStageRow>& rows,
                        int reps) {
  std::printf(
      "\n### Compile stages, first valid tunables (median of %d compiles, "
      "ms)\n\n",
      reps);
  std::printf(
      "| program | kernel | tunables | parse+verify | passes | codegen | "
      "total |\n|---|---|---|---:|---:|---:|---:|\n");
  for (const auto& r : rows) {
    if (!r.error.empty()) {
      std::printf("| %s | %s | %s | compile fails: %s | | | |\n",
                  r.file.c_str(), r.kernel.c_str(), r.bindings.c_str(),
                  r.error.c_str());
      continue;
    }
    std::printf("| %s | %s | %s | %.2f | %.1f | %.1f | %.1f |\n",
                r.file.c_str(), r.kernel.c_str(), r.bindings.c_str(),
                r.parse_verify_ms, r.passes_ms, r.codegen_ms, r.total_ms);
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Kiln CPU benchmarks: f32 GEMM and compile stage times"};
  int64_t size = 1024;
  int reps = 5;
  int compile_reps = 3;
  std::string tile = KILN_BENCH_GEMM_TILE;
  std::string corpus = KILN_BENCH_CORPUS_DIR;
  std::string filter;
  bool skip_gemm = false, skip_compile = false;
  app.add_option("--size", size, "M = N = K of the GEMM")
      ->check(CLI::Range(1, 8192));
  app.add_option("--reps", reps, "timed GEMM runs per variant")
      ->check(CLI::Range(1, 100));
  app.add_option("--compile-reps", compile_reps, "compiles per corpus kernel")
      ->check(CLI::Range(1, 100));
  app.add_option("--tile", tile, "the f32 GEMM program");
  app.add_option("--corpus", corpus, "folder of *.tile programs");
  app.add_option("--filter", filter,
                 "only corpus kernels whose FILE:KERNEL contains this");
  app.add_flag("--skip-gemm", skip_gemm, "no GEMM measurement");
  app.add_flag("--skip-compile", skip_compile, "no compile-stage table");
  CLI11_PARSE(app, argc, argv);

  std::printf("CPU: %s, %u hardware threads\ntoolchain: %s\n",
              CpuModel().c_str(), std::thread::hardware_concurrency(),
              kiln::compiler::CpuToolchainIdentity().c_str());
  int status = 0;
  if (!skip_gemm) {
    kiln::bench::GemmBenchOptions options;
    options.size = size;
    options.reps = reps;
    options.tile_path = tile;
    options.configs = {{{"BM", 64}, {"BN", 64}, {"BK", 32}},
                       {{"BM", 128}, {"BN", 128}, {"BK", 32}},
                       {{"BM", 64}, {"BN", 128}, {"BK", 64}}};
    auto rows = kiln::bench::RunGemmBench(options);
    if (rows.ok()) {
      PrintGemm(*rows, size, reps);
    } else {
      std::fprintf(stderr, "GEMM benchmark failed: %s\n",
                   rows.status().ToString().c_str());
      status = 1;
    }
  }
  if (!skip_compile) {
    PrintCompileStages(
        kiln::bench::MeasureCompileStages(corpus, compile_reps, filter),
        compile_reps);
  }
  return status;
}
