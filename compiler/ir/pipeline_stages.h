// The stage count of a `pipelined` loop, the one rule every target reads:
// after specialisation it must be a constant integer in 1..8. The
// pipeline-loops pass of each target refuses any other (located); the
// planners and back ends read the count through PipelineStages and treat
// nullopt as a loop that was never checked.
#ifndef KILN_COMPILER_IR_PIPELINE_STAGES_H_
#define KILN_COMPILER_IR_PIPELINE_STAGES_H_

#include <cstdint>
#include <optional>

#include "absl/status/status.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler {

inline constexpr int64_t kMaxPipelineStages = 8;

// `f`'s stage count when it is a constant in 1..kMaxPipelineStages.
std::optional<int64_t> PipelineStages(const ForStmt& f);

// Every `pipelined` loop in `block` (nested ones too) has a valid stage
// count; else an error located at the first that has not.
absl::Status CheckPipelineStages(const Block& block);

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_IR_PIPELINE_STAGES_H_
