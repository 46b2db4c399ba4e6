// References of the normalisation, reduction, scan and loss kernels (rmsnorm,
// layernorm, softmax, row_stats, col_sum_f64, inclusive_scan,
// segment_suffix_sum, cross_entropy, huber_loss).
#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/e2e/references.h"

namespace kiln::e2e {

Values RmsNormReference(const Values& x, const Values& w, double eps, int64_t m,
                        int64_t n) {
  Values y(m * n);
  for (int64_t i = 0; i < m; ++i) {
    double ss = 0;
    for (int64_t j = 0; j < n; ++j) ss += x[i * n + j] * x[i * n + j];
    const double inv = 1.0 / std::sqrt(ss / n + eps);
    for (int64_t j = 0; j < n; ++j) y[i * n + j] = x[i * n + j] * inv * w[j];
  }
  return y;
}

Values LayerNormReference(const Values& x, const Values& gamma,
                          const Values& beta, double eps, int64_t m,
                          int64_t n) {
  Values y(m * n);
  for (int64_t i = 0; i < m; ++i) {
    double mean = 0;
    for (int64_t j = 0; j < n; ++j) mean += x[i * n + j];
    mean /= n;
    double var = 0;
    for (int64_t j = 0; j < n; ++j) {
      var += (x[i * n + j] - mean) * (x[i * n + j] - mean);
    }
    const double rstd = 1.0 / std::sqrt(var / n + eps);
    for (int64_t j = 0; j < n; ++j) {
      y[i * n + j] = (x[i * n + j] - mean) * rstd * gamma[j] + beta[j];
    }
  }
  return y;
}

Values SoftmaxReference(const Values& x, int64_t m, int64_t n) {
  Values y(m * n);
  for (int64_t i = 0; i < m; ++i) {
    const double mx = *std::max_element(&x[i * n], &x[i * n] + n);
    double sum = 0;
    for (int64_t j = 0; j < n; ++j) sum += std::exp(x[i * n + j] - mx);
    for (int64_t j = 0; j < n; ++j)
      y[i * n + j] = std::exp(x[i * n + j] - mx) / sum;
  }
  return y;
}

RowStats RowStatsReference(const Values& x, int64_t m, int64_t n) {
  RowStats r;
  for (int64_t i = 0; i < m; ++i) {
    double sum = 0, mx = -INFINITY, mn = INFINITY, amax = 0;
    for (int64_t j = 0; j < n; ++j) {
      const double v = x[i * n + j];
      sum += v;
      mx = std::max(mx, v);
      mn = std::min(mn, v);
      amax = std::max(amax, std::fabs(v));
    }
    r.sum.push_back(sum);
    r.max.push_back(mx);
    r.min.push_back(mn);
    r.absmax.push_back(amax);
  }
  return r;
}

Values ColSumReference(const Values& x, const Values& c0, int64_t m,
                       int64_t n) {
  Values c = c0;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) c[j] += x[i * n + j];
  }
  return c;
}

Values ScanReference(const Values& x, int64_t m, int64_t n, bool reverse) {
  Values y(m * n);
  for (int64_t i = 0; i < m; ++i) {
    double acc = 0;
    for (int64_t t = 0; t < n; ++t) {
      const int64_t j = reverse ? n - 1 - t : t;
      acc += x[i * n + j];
      y[i * n + j] = acc;
    }
  }
  return y;
}

Values CrossEntropyReference(const Values& logits, const Values& labels,
                             int64_t ignore_index, int64_t m, int64_t v) {
  Values loss(m, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    const int64_t label = static_cast<int64_t>(labels[i]);
    if (label == ignore_index || label < 0) continue;
    const double* row = &logits[i * v];
    const double mx = *std::max_element(row, row + v);
    double sum = 0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(row[j] - mx);
    loss[i] = mx + std::log(sum) - row[label];
  }
  return loss;
}

double HuberLossReference(const Values& pred, const Values& target,
                          double delta, double total0) {
  double total = total0;
  for (size_t i = 0; i < pred.size(); ++i) {
    const double e = std::fabs(pred[i] - target[i]);
    total += e < delta ? 0.5 * e * e : delta * (e - 0.5 * delta);
  }
  return total;
}

}  // namespace kiln::e2e
