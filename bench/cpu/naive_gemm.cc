#include "bench/cpu/naive_gemm.h"

namespace kiln::bench {

void NaiveGemm(const float* a, const float* b, float* c, int64_t m, int64_t n,
               int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0;
      for (int64_t kk = 0; kk < k; ++kk) acc += a[i * k + kk] * b[kk * n + j];
      c[i * n + j] = acc;
    }
  }
}

void NaiveGemmIkj(const float* a, const float* b, float* c, int64_t m,
                  int64_t n, int64_t k) {
  for (int64_t i = 0; i < m * n; ++i) c[i] = 0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t kk = 0; kk < k; ++kk) {
      const float av = a[i * k + kk];
      for (int64_t j = 0; j < n; ++j) c[i * n + j] += av * b[kk * n + j];
    }
  }
}

}  // namespace kiln::bench
