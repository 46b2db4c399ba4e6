// The one place where the end-to-end tests' tolerances are defined, and the
// comparison of a kernel's output with its f64 reference.
//
// An output element `got` matches its reference `ref` when
//     |got - ref| <= rtol * |ref| + atol_rms * rms(ref) + atol
//                    + rscale * scale[i]   (when a per-element scale is given)
// (NaN matches only NaN, an infinity only the same infinity). rms(ref) is the
// root mean square of the whole reference tensor: it scales the absolute part
// so that elements near zero after cancellation are judged against the
// magnitude of the terms that produced them.
//
// The budget of an output of dtype D whose elements each combine T terms
// (T = K for a dot product of length K, 1 for element-wise kernels):
//  - rounding of the output to D: one ulp of D relative (2^-mantissa bits;
//    twice the half-ulp of correct rounding, because the kernel's f32 value
//    and the f64 reference can fall on either side of a rounding boundary):
//      f16 9.8e-4, bf16 7.8e-3, f8e4m3 0.125, f8e5m2 0.25;
//    f32 outputs 2e-6 (~17 ulps: the back end's exp/erf/tanh/rsqrt and
//    divisions in f32); f64 1e-12; plus, as atol, one subnormal spacing of
//    the dtype (below the normal range precision is absolute: f16 6e-8);
//  - f32 arithmetic inside the kernel: rounding errors grow like sqrt(T) for
//    sums of T terms, so kF32Accumulation * sqrt(T) (~8 f32 ulps per
//    sqrt(term)) is added both to rtol and to atol_rms;
//  - integer and bool outputs are exact, and so are narrow-float outputs of
//    a single rounding that the reference models exactly in f32 (the
//    quantisers, dropout, the int4 dequantisers): Exact().
// Kernels that round an intermediate to a narrow dtype the reference does not
// model add that dtype's ulp times the magnitude the rounding is relative to:
// rms(ref) by default, or a per-element magnitude computed by the reference
// (attention: sum_j p_j |v_j|, the bound of rounding every P element).
#ifndef KILN_TESTS_E2E_TOLERANCE_H_
#define KILN_TESTS_E2E_TOLERANCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/e2e/host_tensor.h"

namespace kiln::e2e {

inline constexpr double kF32Accumulation = 1e-6;
inline constexpr double kF32Rounding = 2e-6;
inline constexpr double kF64Rounding = 1e-12;

struct Tolerance {
  double rtol = 0;
  double atol_rms = 0;
  double atol = 0;
  double rscale = 0;
  const std::vector<double>* scale = nullptr;  // one per element; not owned
};

// Exact equality (integers, bool, copies and single correctly rounded ops).
Tolerance Exact();

// One ulp of float dtype `t`, relative (2^-MantissaBits(t)); f32 and f64:
// kF32Rounding and kF64Rounding.
double OutputRounding(DType t);

// The tolerance of an output of dtype `t` whose elements each combine
// `terms` terms computed in f32 (see the header comment). Integer dtypes are
// exact.
Tolerance OutputTolerance(DType t, int64_t terms = 1);

// `tol` plus one rounding to `intermediate` relative to rms(ref).
Tolerance WithIntermediate(Tolerance tol, DType intermediate);
// `tol` plus one rounding to `intermediate` relative to `magnitude[i]` for
// element i (`magnitude` must outlive the tolerance).
Tolerance WithIntermediate(Tolerance tol, DType intermediate,
                           const std::vector<double>& magnitude);

// Compares every element of `got` with `ref` (row-major, same count).
// Failure lists the mismatch count, the worst error and the first mismatches
// with their multi-dimensional index.
::testing::AssertionResult AllClose(const HostTensor& got,
                                    const std::vector<double>& ref,
                                    const Tolerance& tol);

}  // namespace kiln::e2e

#endif  // KILN_TESTS_E2E_TOLERANCE_H_
