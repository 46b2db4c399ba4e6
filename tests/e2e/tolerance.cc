#include "tests/e2e/tolerance.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::e2e {
namespace {

std::string IndexText(int64_t index, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    idx[d] = index % shape[d];
    index /= shape[d];
  }
  return absl::StrCat("[", absl::StrJoin(idx, ", "), "]");
}

}  // namespace

Tolerance Exact() { return {}; }

double OutputRounding(DType t) {
  if (t == DType::kF32) return kF32Rounding;
  if (t == DType::kF64) return kF64Rounding;
  if (!IsFloat(t)) return 0;
  return std::ldexp(1.0, -MantissaBits(t));
}

Tolerance OutputTolerance(DType t, int64_t terms) {
  if (!IsFloat(t)) return Exact();
  const double accumulation =
      (t == DType::kF64 ? kF64Rounding : kF32Accumulation) *
      std::sqrt(static_cast<double>(std::max<int64_t>(terms, 1)));
  Tolerance tol;
  tol.rtol = OutputRounding(t) + accumulation;
  tol.atol_rms = accumulation;
  tol.atol = SubnormalSpacing(t);
  return tol;
}

Tolerance WithIntermediate(Tolerance tol, DType intermediate) {
  tol.atol_rms += OutputRounding(intermediate);
  return tol;
}

Tolerance WithIntermediate(Tolerance tol, DType intermediate,
                           const std::vector<double>& magnitude) {
  tol.rscale += OutputRounding(intermediate);
  tol.scale = &magnitude;
  return tol;
}

::testing::AssertionResult AllClose(const HostTensor& got,
                                    const std::vector<double>& ref,
                                    const Tolerance& tol) {
  const int64_t n = got.num_elements();
  if (static_cast<int64_t>(ref.size()) != n) {
    return ::testing::AssertionFailure() << "the reference has " << ref.size()
                                         << " elements, the output " << n;
  }
  if (tol.scale != nullptr && static_cast<int64_t>(tol.scale->size()) != n) {
    return ::testing::AssertionFailure()
           << "the tolerance scale has " << tol.scale->size()
           << " elements, the output " << n;
  }
  double sum_sq = 0;
  int64_t finite = 0;
  for (double r : ref) {
    if (std::isfinite(r)) {
      sum_sq += r * r;
      ++finite;
    }
  }
  const double rms = finite > 0 ? std::sqrt(sum_sq / finite) : 0;
  int64_t bad = 0;
  double worst = 0;
  int64_t worst_index = -1;
  std::string first;
  for (int64_t i = 0; i < n; ++i) {
    const double g = got.Get(i);
    const double r = ref[i];
    bool ok;
    double excess = 0;
    if (std::isnan(r) || std::isinf(r)) {
      ok = std::isnan(r) ? std::isnan(g) : g == r;
      excess = ok ? 0 : INFINITY;
    } else {
      double allowed = tol.rtol * std::fabs(r) + tol.atol_rms * rms + tol.atol;
      if (tol.scale != nullptr) allowed += tol.rscale * (*tol.scale)[i];
      const double err = std::fabs(g - r);
      ok = err <= allowed;  // false for NaN
      excess = std::isnan(err) ? INFINITY : err - allowed;
    }
    if (ok) continue;
    if (bad < 8) {
      absl::StrAppend(&first, "\n  ", IndexText(i, got.shape()), ": got ", g,
                      ", want ", r);
    }
    if (bad == 0 || excess > worst) {
      worst = excess;
      worst_index = i;
    }
    ++bad;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << n << " elements differ (rtol " << tol.rtol
         << ", atol_rms " << tol.atol_rms << " x rms " << rms << ", atol "
         << tol.atol << "); worst at " << IndexText(worst_index, got.shape())
         << ": got " << got.Get(worst_index) << ", want " << ref[worst_index]
         << first;
}

}  // namespace kiln::e2e
