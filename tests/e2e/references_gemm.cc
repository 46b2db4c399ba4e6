// References of the GEMM-like corpus kernels (gemm, batched_gemm,
// gemm_bias_gelu, gemm_fp8, gemm_int8, gemm_splitk, gemm_w4a16).
#include <cmath>

#include "tests/e2e/dtype_codec.h"
#include "tests/e2e/references.h"

namespace kiln::e2e {
namespace {

// [rows, cols] -> [cols, rows].
Values Transposed(const Values& x, int64_t rows, int64_t cols) {
  Values t(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t c = 0; c < cols; ++c) t[c * rows + r] = x[r * cols + c];
  }
  return t;
}

// A [M, K] @ B [K, N] in the i-k-j order (unit-stride inner loop).
Values MatMul(const Values& a, const Values& b, int64_t m, int64_t n,
              int64_t k) {
  Values c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    double* row = &c[i * n];
    for (int64_t kk = 0; kk < k; ++kk) {
      const double av = a[i * k + kk];
      const double* brow = &b[kk * n];
      for (int64_t j = 0; j < n; ++j) row[j] += av * brow[j];
    }
  }
  return c;
}

}  // namespace

Values GemmReference(const Values& a, const Values& b, int64_t m, int64_t n,
                     int64_t k, bool transpose_a, bool transpose_b) {
  return MatMul(transpose_a ? Transposed(a, k, m) : a,
                transpose_b ? Transposed(b, n, k) : b, m, n, k);
}

Values BatchedGemmReference(const Values& a, const Values& b, int64_t batch,
                            int64_t m, int64_t n, int64_t k) {
  Values c;
  c.reserve(batch * m * n);
  for (int64_t i = 0; i < batch; ++i) {
    Values ai(a.begin() + i * m * k, a.begin() + (i + 1) * m * k);
    Values bi(b.begin() + i * k * n, b.begin() + (i + 1) * k * n);
    Values ci = MatMul(ai, bi, m, n, k);
    c.insert(c.end(), ci.begin(), ci.end());
  }
  return c;
}

Values GemmBiasGeluReference(const Values& a, const Values& w,
                             const Values& bias, int64_t m, int64_t n,
                             int64_t k) {
  Values c = GemmReference(a, w, m, n, k, false, true);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const double x = c[i * n + j] + bias[j];
      c[i * n + j] = 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
    }
  }
  return c;
}

Values GemmFp8Reference(const Values& a, const Values& b, double scale_a,
                        double scale_b, int64_t m, int64_t n, int64_t k) {
  Values c = GemmReference(a, b, m, n, k, false, true);
  for (double& x : c) x *= scale_a * scale_b;
  return c;
}

Values GemmInt8Reference(const Values& at, const Values& b,
                         const Values& scale_a, const Values& scale_b,
                         int64_t m, int64_t n, int64_t k) {
  Values c = GemmReference(at, b, m, n, k, true, false);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) c[i * n + j] *= scale_a[i] * scale_b[j];
  }
  return c;
}

Values GemmSplitKReference(const Values& a, const Values& b, const Values& c0,
                           int64_t m, int64_t n, int64_t k) {
  Values c = MatMul(a, b, m, n, k);
  for (size_t i = 0; i < c.size(); ++i) c[i] += c0[i];
  return c;
}

Values GemmW4A16Reference(const Values& a, const Values& wq,
                          const Values& scales, int64_t m, int64_t n,
                          int64_t k) {
  const int64_t groups = k / 128;
  Values w(n * k);
  for (int64_t j = 0; j < n; ++j) {
    for (int64_t kk = 0; kk < k; ++kk) {
      w[j * k + kk] = RoundToFloat(
          DType::kF16, (wq[j * k + kk] - 8) * scales[j * groups + kk / 128]);
    }
  }
  return GemmReference(a, w, m, n, k, false, true);
}

}  // namespace kiln::e2e
