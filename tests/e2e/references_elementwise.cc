// References of the element-wise and data-movement kernels (adam_step,
// dequant_i4, unpack_i4_bytes, dropout, elementwise_broadcast, the three
// quantisers, stencil_blur, transpose) and of topk.
//
// Where an output is an integer, a bool or a narrow float produced by a
// single rounding, the program's own f32 arithmetic decides the result, so
// those references evaluate exactly that arithmetic in f32 (and say so).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tests/e2e/dtype_codec.h"
#include "tests/e2e/references.h"

namespace kiln::e2e {

AdamState AdamStepReference(const AdamState& s, const Values& g,
                            const AdamHyper& h) {
  AdamState r = s;
  for (size_t i = 0; i < g.size(); ++i) {
    const double grad = g[i] + h.weight_decay * s.p[i];
    r.m[i] = h.beta1 * s.m[i] + (1 - h.beta1) * grad;
    r.v[i] = h.beta2 * s.v[i] + (1 - h.beta2) * grad * grad;
    r.p[i] =
        s.p[i] - h.lr * (r.m[i] * h.c1) / (std::sqrt(r.v[i] * h.c2) + h.eps);
  }
  return r;
}

Values DequantReference(const Values& q, const Values& scales, int64_t n,
                        int64_t k) {
  const int64_t groups = k / 128;
  Values w(n * k);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      w[i * k + j] = RoundToFloat(DType::kF16,
                                  q[i * k + j] * scales[i * groups + j / 128]);
    }
  }
  return w;
}

Values UnpackI4Bytes(const Values& packed, int64_t n, int64_t k) {
  Values q(n * k);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < k; ++j) {
      const int byte = static_cast<int>(packed[i * (k / 2) + j / 2]);
      const int nib = j % 2 == 0 ? byte & 0xF : byte >> 4;
      q[i * k + j] = nib >= 8 ? nib - 16 : nib;
    }
  }
  return q;
}

DropoutResult DropoutReference(const Values& x, int64_t m, int64_t n,
                               uint32_t seed, float p, bool training) {
  DropoutResult r;
  r.y.resize(m * n);
  r.keep.assign(m * n, 1.0);
  if (!training) {
    r.y = x;
    return r;
  }
  const int32_t threshold = static_cast<int32_t>(p * 16777216.0f);
  const float inv_keep = 1.0f / (1.0f - p);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const uint32_t idx = static_cast<uint32_t>(i * n + j);
      const uint32_t h0 = idx ^ seed;
      const uint32_t h1 = (h0 ^ h0 >> 16) * 0x85EBCA6Bu;
      const uint32_t h2 = (h1 ^ h1 >> 13) * 0xC2B2AE35u;
      const uint32_t h3 = h2 ^ h2 >> 16;
      const bool keep = static_cast<int32_t>(h3 >> 8 & 0xFFFFFF) >= threshold;
      r.keep[i * n + j] = keep ? 1 : 0;
      const float scaled = static_cast<float>(x[i * n + j]) * inv_keep;
      r.y[i * n + j] = keep ? RoundToFloat(DType::kF16, scaled) : 0.0;
    }
  }
  return r;
}

Values ElementwiseBroadcastReference(const Values& x, const Values& col_scale,
                                     const Values& row_bias, const Values& r,
                                     double alpha, int act, int64_t m,
                                     int64_t n) {
  Values y(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const double v = x[i * n + j] * col_scale[j] + row_bias[i];
      double a;
      if (act == 0) {
        a = std::max(v, 0.0);
      } else if (act == 1) {
        a = 0.5 * v *
            (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v)));
      } else {
        a = v / (1 + std::exp(-v));
      }
      y[i * n + j] = alpha * a + r[i * n + j];
    }
  }
  return y;
}

QuantizeResult QuantizeFp8E4M3Reference(const Values& x, int64_t m, int64_t n) {
  QuantizeResult r;
  r.q.resize(m * n);
  for (int64_t i = 0; i < m; ++i) {
    float amax = 0;
    for (int64_t j = 0; j < n; ++j) {
      amax = std::max(amax, static_cast<float>(std::fabs(x[i * n + j])));
    }
    // f32, as the program computes it: the scale and each quotient are f32
    // roundings, and the e4m3 code follows from them.
    const float scale = std::max(amax, 1e-12f) / 448.0f;
    r.scale.push_back(scale);
    for (int64_t j = 0; j < n; ++j) {
      const float q =
          std::clamp(static_cast<float>(x[i * n + j]) / scale, -448.0f, 448.0f);
      r.q[i * n + j] = RoundToFloat(DType::kF8E4M3, q);
    }
  }
  return r;
}

Values QuantizeFp8E5M2Reference(const Values& g, double inv_scale) {
  Values q(g.size());
  for (size_t i = 0; i < g.size(); ++i) {
    const float v = static_cast<float>(g[i]) * static_cast<float>(inv_scale);
    q[i] = RoundToFloat(DType::kF8E5M2, v);
  }
  return q;
}

Values QuantizeQ15Reference(const Values& x) {
  Values y(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float c = std::min(std::max(static_cast<float>(x[i]), -1.0f), 1.0f);
    const float v = c * 32767.0f + (c >= 0.0f ? 0.5f : -0.5f);
    y[i] = static_cast<int16_t>(v);  // truncation toward zero
  }
  return y;
}

Values StencilBlurReference(const Values& x, const Values& taps, int64_t m,
                            int64_t n) {
  Values y(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t u = 0; u < 5; ++u) {
        const int64_t c = j + u - 2;
        if (c >= 0 && c < n) y[i * n + j] += taps[u] * x[i * n + c];
      }
    }
  }
  return y;
}

Values TransposeReference(const Values& x, int64_t m, int64_t n) {
  Values t(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) t[j * m + i] = x[i * n + j];
  }
  return t;
}

TopKResult TopKReference(const Values& logits, int64_t t, int64_t e,
                         bool normalize) {
  constexpr int kK = 8;
  TopKResult r;
  r.selected.assign(t * e, 0.0);
  for (int64_t row = 0; row < t; ++row) {
    std::vector<int64_t> order(e);
    std::iota(order.begin(), order.end(), 0);
    // Largest first; ties: lowest index first.
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
      return logits[row * e + a] > logits[row * e + b];
    });
    double total = 0;
    for (int kk = 0; kk < kK; ++kk) {
      total +=
          std::exp(logits[row * e + order[kk]] - logits[row * e + order[0]]);
    }
    for (int kk = 0; kk < kK; ++kk) {
      const double v = logits[row * e + order[kk]];
      r.values.push_back(
          normalize ? std::exp(v - logits[row * e + order[0]]) / total : v);
      r.indices.push_back(static_cast<double>(order[kk]));
      r.selected[row * e + order[kk]] = 1;
    }
  }
  return r;
}

}  // namespace kiln::e2e
