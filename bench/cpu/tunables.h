// Tunable combinations of a tile-IR kernel: every combination of candidates
// that satisfies the kernel's `where` constraints, in candidate order.
#ifndef KILN_BENCH_CPU_TUNABLES_H_
#define KILN_BENCH_CPU_TUNABLES_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/ir/ir.h"

namespace kiln::bench {

using Bindings = std::map<std::string, int64_t>;

// The valid combinations of `kernel`'s tunables (the first tunable varies
// slowest); one empty combination for a kernel without tunables.
std::vector<Bindings> ValidBindings(const compiler::Kernel& kernel);

// "BM=64 BN=64", or "-" for no tunables.
std::string BindingsText(const Bindings& b);

}  // namespace kiln::bench

#endif  // KILN_BENCH_CPU_TUNABLES_H_
