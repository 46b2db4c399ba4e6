// The tuning space of a kernel: every combination of tunable values that
// satisfies the kernel's `where` constraints. Used by the autotuner, the
// tests and the benchmarks to pick configurations.
#ifndef KILN_COMPILER_TUNING_SPACE_H_
#define KILN_COMPILER_TUNING_SPACE_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace kiln::compiler {

using TunableValues = std::map<std::string, int64_t>;

// Every valid combination, in candidate order (the first tunable varies
// slowest; each tunable's candidates in their written order). A kernel
// without tunables has exactly one (empty) combination. Stops after `limit`
// combinations.
std::vector<TunableValues> EnumerateTuningSpace(const Kernel& kernel,
                                                size_t limit = 1 << 20);

// True when `values` binds every tunable to one of its candidates and every
// `where` constraint holds.
bool SatisfiesConstraints(const Kernel& kernel, const TunableValues& values);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_TUNING_SPACE_H_
