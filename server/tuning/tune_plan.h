// Checking an autotune request against its kernel and working out what to
// tune: the kernel (parsed, verified, picked), the shape and fixed bindings
// (each naming a symbol or tunable of it; every symbol given a size), the
// options, and the space: every combination of tunable values satisfying
// the kernel's constraints (compiler/tuning_space.h), narrowed to fixed
// tunables or to the requested configs, at most max_candidates (default
// 256, limit 4096).
#ifndef KILN_SERVER_TUNING_TUNE_PLAN_H_
#define KILN_SERVER_TUNING_TUNE_PLAN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/ir.h"
#include "compiler/tuning_space.h"
#include "proto/kiln.pb.h"
#include "server/tuning/tuning_key.h"

namespace kiln::server::tuning {

struct TunePlan {
  compiler::Kernel kernel;
  std::string filename;  // for diagnostics; "<input>" when not given
  std::string target;    // "cpu" when not given
  Bindings shape;
  Bindings fixed;                              // symbols and tunables
  Bindings fixed_symbols;                      // of which: symbols
  std::vector<compiler::TunableValues> space;  // in candidate order
  // Requested configs left out, with the reason (AutotuneRequest.configs).
  std::vector<std::string> excluded_configs;
};

// The plan for `request`. InvalidArgument (saying what is wrong) for an
// empty IR text, an invalid program (FILE:LINE:COL lines), a shape that
// names no symbol or integer scalar or is not positive, a symbol without a
// shape, a fixed binding naming neither a symbol nor a tunable, a shape
// contradicting a fixed symbol, negative or oversized options, an unknown
// fault, an empty space; NotFound for an unknown kernel; FailedPrecondition
// for faults when `allow_faults` is false.
absl::StatusOr<TunePlan> PlanTuning(const kiln::v1::AutotuneRequest& request,
                                    bool allow_faults);

// A candidate's label: "BM=64,BN=128" (names sorted).
std::string Label(const compiler::TunableValues& values);

}  // namespace kiln::server::tuning

#endif  // KILN_SERVER_TUNING_TUNE_PLAN_H_
