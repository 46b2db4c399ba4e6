// Host-side encoding and decoding of every element type of the tile IR, for
// the end-to-end tests: inputs are generated as valid values of their dtype
// and outputs are decoded to f64 before they are compared with a reference.
//
// Narrow floats follow the CPU back end's documented semantics
// (compiler/codegen/cpu/narrow_float.h): round to nearest, ties to even;
// overflow gives infinity for f16, bf16 and f8e5m2 and saturates to 448 for
// f8e4m3 (OCP "FN": no infinities, S.1111.111 is NaN).
#ifndef KILN_TESTS_E2E_DTYPE_CODEC_H_
#define KILN_TESTS_E2E_DTYPE_CODEC_H_

#include <cstdint>

#include "runtime/kernel_metadata.h"

namespace kiln::e2e {

using runtime::DType;

// Bytes of one element (i4/u4: 1, they are addressed per nibble).
int ElementBytes(DType t);

// True for f16, bf16, f32, f64, f8e4m3 and f8e5m2.
bool IsFloat(DType t);

// Explicit mantissa bits of a float dtype (f16: 10, bf16: 7, f32: 23, ...).
int MantissaBits(DType t);

// The spacing of float dtype `t`'s subnormals (its smallest positive value):
// the absolute precision of results below the normal range.
double SubnormalSpacing(DType t);

// `x` rounded to the nearest value of float dtype `t` (ties to even), with
// the overflow rule above. NaN stays NaN.
double RoundToFloat(DType t, double x);

// The bit pattern of `x` in dtype `t` (low bits of the result). Floats are
// rounded as RoundToFloat does; integers must already be in range and are
// truncated toward zero; bool is x != 0.
uint64_t Encode(DType t, double x);

// The value of bit pattern `bits` of dtype `t` (NaN for NaN codes; i4 is
// sign-extended from its low nibble).
double Decode(DType t, uint64_t bits);

// A bit pattern no correct kernel writes for an output of dtype `t`: a NaN
// for floats, 0xA5... for integers, 0xA5 for bool (not 0 or 1).
uint64_t PoisonBits(DType t);

// Range of an integer dtype.
int64_t IntMin(DType t);
int64_t IntMax(DType t);

}  // namespace kiln::e2e

#endif  // KILN_TESTS_E2E_DTYPE_CODEC_H_
