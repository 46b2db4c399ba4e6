// Reference of the FlashAttention forward kernels (causal and full): plain
// softmax attention in f64, one query row at a time.
#include <algorithm>
#include <cmath>
#include <limits>

#include "tests/e2e/references.h"

namespace kiln::e2e {

AttentionResult AttentionReference(const Values& q, const Values& k,
                                   const Values& v, double sm_scale,
                                   const AttentionShape& s, bool causal) {
  const int64_t d = s.dim;
  auto at = [&](int64_t b, int64_t i, int64_t h) {  // BSHD offset
    return ((b * s.seq + i) * s.heads + h) * d;
  };
  AttentionResult r;
  r.out.assign(s.batch * s.seq * s.heads * d, 0.0);
  r.out_abs.assign(r.out.size(), 0.0);
  r.lse.assign(s.batch * s.heads * s.seq, 0.0);
  std::vector<double> scores(s.seq);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < s.seq; ++i) {
        const double* qi = &q[at(b, i, h)];
        const int64_t keys = causal ? i + 1 : s.seq;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < keys; ++j) {
          const double* kj = &k[at(b, j, h)];
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += qi[c] * kj[c];
          scores[j] = dot * sm_scale;
          mx = std::max(mx, scores[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < keys; ++j) {
          scores[j] = std::exp(scores[j] - mx);
          sum += scores[j];
        }
        double* oi = &r.out[at(b, i, h)];
        double* ai = &r.out_abs[at(b, i, h)];
        for (int64_t j = 0; j < keys; ++j) {
          const double p = scores[j] / sum;
          const double* vj = &v[at(b, j, h)];
          for (int64_t c = 0; c < d; ++c) {
            oi[c] += p * vj[c];
            ai[c] += p * std::fabs(vj[c]);
          }
        }
        // log2(sum_j exp(s_j)) = (mx + ln(sum)) / ln(2).
        r.lse[(b * s.heads + h) * s.seq + i] =
            (mx + std::log(sum)) / std::log(2.0);
      }
    }
  }
  return r;
}

AttentionGrads AttentionBwdReference(const Values& q, const Values& k,
                                     const Values& v, const Values& d_o,
                                     double sm_scale, const AttentionShape& s,
                                     int64_t groups, bool causal) {
  const int64_t d = s.dim, hk = s.heads / groups;
  auto qa = [&](int64_t b, int64_t i, int64_t h) {  // Q, dO, O, dQ
    return ((b * s.seq + i) * s.heads + h) * d;
  };
  auto ka = [&](int64_t b, int64_t j, int64_t h) {  // K, V, dK, dV
    return ((b * s.seq + j) * hk + h / groups) * d;
  };
  AttentionGrads r;
  r.out.assign(q.size(), 0.0);
  r.dq.assign(q.size(), 0.0);
  r.dq_abs.assign(q.size(), 0.0);
  r.dk.assign(k.size(), 0.0);
  r.dk_abs.assign(k.size(), 0.0);
  r.dv.assign(v.size(), 0.0);
  r.dv_abs.assign(v.size(), 0.0);
  r.lse.assign(s.batch * s.heads * s.seq, 0.0);
  r.delta.assign(r.lse.size(), 0.0);
  std::vector<double> p(s.seq), dp(s.seq);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      for (int64_t i = 0; i < s.seq; ++i) {
        const int64_t keys = causal ? i + 1 : s.seq;
        const double* qi = &q[qa(b, i, h)];
        const double* gi = &d_o[qa(b, i, h)];
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < keys; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += qi[c] * k[ka(b, j, h) + c];
          p[j] = dot * sm_scale;
          mx = std::max(mx, p[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < keys; ++j) sum += p[j] = std::exp(p[j] - mx);
        double* oi = &r.out[qa(b, i, h)];
        for (int64_t j = 0; j < keys; ++j) {
          p[j] /= sum;
          for (int64_t c = 0; c < d; ++c) oi[c] += p[j] * v[ka(b, j, h) + c];
        }
        const int64_t row = (b * s.heads + h) * s.seq + i;
        r.lse[row] = (mx + std::log(sum)) / std::log(2.0);
        double delta = 0;
        for (int64_t c = 0; c < d; ++c) delta += gi[c] * oi[c];
        r.delta[row] = delta;
        // dS, and the magnitude of its terms before dP - Delta cancels
        // (the kernel's rounding of each is relative to that).
        std::vector<double> ds_abs(keys);
        for (int64_t j = 0; j < keys; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += gi[c] * v[ka(b, j, h) + c];
          dp[j] = p[j] * (dot - delta) * sm_scale;
          ds_abs[j] = p[j] * (std::fabs(dot) + std::fabs(delta)) * sm_scale;
        }
        for (int64_t j = 0; j < keys; ++j) {
          const int64_t kj = ka(b, j, h);
          for (int64_t c = 0; c < d; ++c) {
            r.dq[qa(b, i, h) + c] += dp[j] * k[kj + c];
            r.dq_abs[qa(b, i, h) + c] += ds_abs[j] * std::fabs(k[kj + c]);
            r.dk[kj + c] += dp[j] * qi[c];
            r.dk_abs[kj + c] += ds_abs[j] * std::fabs(qi[c]);
            r.dv[kj + c] += p[j] * gi[c];
            r.dv_abs[kj + c] += std::fabs(p[j] * gi[c]);
          }
        }
      }
    }
  }
  return r;
}

AttentionResult PagedDecodeReference(const Values& q, const Values& kc,
                                     const Values& vc,
                                     const std::vector<int64_t>& block_table,
                                     const std::vector<int64_t>& lens,
                                     double sm_scale,
                                     const PagedDecodeShape& s) {
  const int64_t d = s.dim;
  auto cache_at = [&](int64_t b, int64_t t, int64_t h) {  // token t of b
    const int64_t page = block_table[b * s.max_pages + t / s.page_size];
    return ((page * s.page_size + t % s.page_size) * s.kv_heads + h) * d;
  };
  AttentionResult r;
  r.out.assign(s.batch * s.kv_heads * s.group * d, 0.0);
  r.out_abs.assign(r.out.size(), 0.0);
  for (int64_t b = 0; b < s.batch; ++b) {
    std::vector<double> scores(lens[b]);
    for (int64_t h = 0; h < s.kv_heads; ++h) {
      for (int64_t g = 0; g < s.group; ++g) {
        const int64_t row = ((b * s.kv_heads + h) * s.group + g) * d;
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t t = 0; t < lens[b]; ++t) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) {
            dot += q[row + c] * kc[cache_at(b, t, h) + c];
          }
          scores[t] = dot * sm_scale;
          mx = std::max(mx, scores[t]);
        }
        double sum = 0;
        for (double& x : scores) sum += (x = std::exp(x - mx));
        for (int64_t t = 0; t < lens[b]; ++t) {
          const double p = scores[t] / sum;
          for (int64_t c = 0; c < d; ++c) {
            const double v = vc[cache_at(b, t, h) + c];
            r.out[row + c] += p * v;
            r.out_abs[row + c] += p * std::fabs(v);
          }
        }
      }
    }
  }
  return r;
}

AttentionResult VarlenAttentionReference(const Values& q, const Values& k,
                                         const Values& v,
                                         const std::vector<int64_t>& cu_q,
                                         const std::vector<int64_t>& cu_k,
                                         double sm_scale,
                                         const VarlenShape& s) {
  const int64_t d = s.dim;
  const int64_t group = s.heads / s.kv_heads;
  AttentionResult r;
  r.out.assign(q.size(), 0.0);
  r.out_abs.assign(q.size(), 0.0);
  for (size_t b = 0; b + 1 < cu_q.size(); ++b) {
    const int64_t q_len = cu_q[b + 1] - cu_q[b];
    const int64_t kv_len = cu_k[b + 1] - cu_k[b];
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t keys =
          std::clamp<int64_t>(kv_len - q_len + i + 1, 0, kv_len);
      std::vector<double> scores(keys);
      for (int64_t h = 0; h < s.heads; ++h) {
        const int64_t row = ((cu_q[b] + i) * s.heads + h) * d;
        auto key_at = [&](int64_t j) {
          return ((cu_k[b] + j) * s.kv_heads + h / group) * d;
        };
        double mx = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < keys; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < d; ++c) dot += q[row + c] * k[key_at(j) + c];
          scores[j] = dot * sm_scale;
          mx = std::max(mx, scores[j]);
        }
        double sum = 0;
        for (double& x : scores) sum += (x = std::exp(x - mx));
        for (int64_t j = 0; j < keys; ++j) {
          const double p = scores[j] / sum;
          for (int64_t c = 0; c < d; ++c) {
            r.out[row + c] += p * v[key_at(j) + c];
            r.out_abs[row + c] += p * std::fabs(v[key_at(j) + c]);
          }
        }
      }
    }
  }
  return r;
}

}  // namespace kiln::e2e
