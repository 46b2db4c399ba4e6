// The compiler pipeline: the passes in order, for one target, in one place.
#ifndef KILN_COMPILER_PASSES_PIPELINE_H_
#define KILN_COMPILER_PASSES_PIPELINE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "compiler/passes/passes.h"

namespace kiln::compiler {

// The passes for `target`, in the order they run.
std::vector<std::unique_ptr<Pass>> BuildPipeline(const std::string& target);

// Runs the pipeline on `kernel` (a verified kernel). When `ir_dump` is not
// null, appends the kernel's text after every pass, each under a
// `// ----- after PASS -----` line. Stops at the first failing pass; its
// status message is prefixed with the pass name.
absl::Status RunPipeline(Kernel& kernel, PassContext& ctx,
                         std::string* ir_dump = nullptr);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_PIPELINE_H_
