// bench_cpu's compile-time measurement: the stage times Compile() reports
// (parse + verify, passes, code generation) for every kernel of every
// corpus program, with the first valid combination of its tunables.
#ifndef KILN_BENCH_CPU_COMPILE_STAGES_H_
#define KILN_BENCH_CPU_COMPILE_STAGES_H_

#include <string>
#include <vector>

namespace kiln::bench {

struct CompileStageRow {
  std::string file;
  std::string kernel;
  std::string bindings;
  std::string error;  // empty when every compile succeeded
  // Medians over the repetitions, in milliseconds.
  double parse_verify_ms = 0;
  double passes_ms = 0;
  double codegen_ms = 0;
  double total_ms = 0;
};

// Compiles each kernel of each *.tile in `corpus_dir` whose "file:kernel"
// contains `filter` (empty: all) `reps` times. A program that does not
// parse, or a kernel that fails to compile, gets a row with `error` set.
std::vector<CompileStageRow> MeasureCompileStages(const std::string& corpus_dir,
                                                  int reps,
                                                  const std::string& filter);

}  // namespace kiln::bench

#endif  // KILN_BENCH_CPU_COMPILE_STAGES_H_
