// The baseline of bench_cpu's GEMM: a textbook triple loop, compiled with -O3
// (bench/cpu/CMakeLists.txt) and nothing else: no blocking, no threads.
#ifndef KILN_BENCH_CPU_NAIVE_GEMM_H_
#define KILN_BENCH_CPU_NAIVE_GEMM_H_

#include <cstdint>

namespace kiln::bench {

// C[m, n] = sum_k A[m, k] * B[k, n], all row-major f32; i-j-k order with
// an f32 accumulator per element of C.
void NaiveGemm(const float* a, const float* b, float* c, int64_t m, int64_t n,
               int64_t k);

// The same product in i-k-j order: the inner loop walks rows of B and C with
// unit stride, which the compiler vectorises. Still no blocking or threads;
// a second, stronger baseline for context.
void NaiveGemmIkj(const float* a, const float* b, float* c, int64_t m,
                  int64_t n, int64_t k);

}  // namespace kiln::bench

#endif  // KILN_BENCH_CPU_NAIVE_GEMM_H_
