// What the prover says of every access a kernel makes (`kiln ir check
// --prove`, issue 22): each element load and store, and each region of a
// tile op, is proven in range, tested at run time (the access is guarded:
// a load out of range reads zero, a store there is skipped, a tile-side
// region is clipped), or out of range whatever the values; a tested one
// comes with a counterexample, values of the names in scope under which
// it is out of range. Writes to one element of a shared tile by two
// iterations of a `parallel` body (a race) are reported with both index
// tuples; a `+=`, `max=` or `min=` there is reported as atomic (GPU targets
// update the element with a shared-memory atomic). The guard-accesses pass
// makes the findings as it places guards.
#ifndef KILN_COMPILER_PASSES_ACCESS_REPORT_H_
#define KILN_COMPILER_PASSES_ACCESS_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler {

struct AccessFinding {
  enum class Verdict { kProven, kChecked, kOutOfRange, kRace, kAtomic };
  Loc loc;
  Verdict verdict = Verdict::kProven;
  std::string access;  // "load X[i, j]", "copy tile region t[0:+n]", ...
  std::string detail;  // the tests left and a counterexample; the race
};

struct AccessReport {
  std::string kernel;
  std::map<std::string, int64_t> bindings;  // the tuning point proven at
  std::vector<AccessFinding> findings;      // in body order
};

// Runs `specialize` and `guard-accesses` over a copy of `kernel` with
// `bindings` (every tunable bound) and collects the findings; the passes'
// errors as they are.
absl::StatusOr<AccessReport> ProveAccesses(
    const Kernel& kernel, const std::map<std::string, int64_t>& bindings);

// One line per finding, `FILE:LINE:COL: VERDICT: ACCESS[: DETAIL]`, under a
// `kernel K (bindings)` header, and a count of each verdict.
std::string FormatAccessReport(const AccessReport& report,
                               std::string_view file);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_ACCESS_REPORT_H_
