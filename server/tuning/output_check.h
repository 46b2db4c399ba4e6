// Checking a candidate's outputs against the reference (the first valid
// candidate's): every tensor, element by element, within a tolerance that
// depends on the dtype, since candidates may sum in different orders.
//
//   |got - expected| <= atol + rtol * |expected|
//   f64 1e-9/1e-9, f32 1e-3/1e-3, f16 and bf16 2e-2/2e-2, f8 1.5e-1/1.5e-1;
//   integers and bools exactly; NaN only where the reference has NaN.
// A tensor the worker marks unchanged (an input the kernel left alone)
// matches only one the reference also left alone.
#ifndef KILN_SERVER_TUNING_OUTPUT_CHECK_H_
#define KILN_SERVER_TUNING_OUTPUT_CHECK_H_

#include <string>

#include "google/protobuf/repeated_ptr_field.h"
#include "server/bench_worker/bench.pb.h"

namespace kiln::server::tuning {

using Tensors = google::protobuf::RepeatedPtrField<kiln::bench::v1::Tensor>;

// "" when `got` matches `expected`; else why not, e.g. "C[17] is 3.5,
// expected 1.25 (tolerance 0.0263)" (the first mismatch of the first
// tensor that differs, and how many elements differ).
std::string CompareOutputs(const Tensors& got, const Tensors& expected);

}  // namespace kiln::server::tuning

#endif  // KILN_SERVER_TUNING_OUTPUT_CHECK_H_
