// Factories of the compiler passes. Each pass lives in its own file; the
// whole pipeline is assembled, in order, in pipeline.cc (BuildPipeline).
//
// A pass rewrites one kernel in place. Passes after LowerTileOps see the
// *lowered form* (compiler/docs/tile-ir.md §8): only alloc, serial/unroll
// loops, if, let and element stores (into tiles and into tensor parameters),
// with every tunable and specialised symbol replaced by its value.
#ifndef KILN_COMPILER_PASSES_PASSES_H_
#define KILN_COMPILER_PASSES_PASSES_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler {

class Prover;
namespace gpu {
struct KernelPlan;
}

// What the passes know about the compile beyond the kernel itself.
struct PassContext {
  std::string target;  // "cpu", "sm_80", "sm_90a", ...
  // Values of tunables and of symbols fixed at compile time.
  std::map<std::string, int64_t> bindings;
  // The arithmetic prover shared by the passes of one compile (never null
  // inside a pass run by the pipeline).
  Prover* prover = nullptr;
  // Fragment layouts decided by layout inference, by fragment name, in a
  // printable form.
  std::map<std::string, std::string> layouts;
  // GPU targets: the kernel plan the `plan` pass made (it points into the
  // kernel, which no later pass changes); the back end renders it.
  std::shared_ptr<const gpu::KernelPlan> gpu_plan;
};

class Pass {
 public:
  virtual ~Pass() = default;
  // Short name shown by --print-ir-after-all ("specialize", ...).
  virtual std::string_view name() const = 0;
  // Rewrites `kernel`. InvalidArgument for a user error (message names the
  // op and its location), Unimplemented for what this target cannot lower.
  virtual absl::Status Run(Kernel& kernel, PassContext& ctx) = 0;
};

// Binds tunables and fixed symbols to their values, checks `where`
// constraints and candidate membership, folds constants.
std::unique_ptr<Pass> CreateSpecializePass();
// Every target: element loads of tensors and tiles read zero and element
// stores are skipped where an index is outside its dim (a select / an `if`
// around each, left out where constants or the prover decide it); a copy,
// fill or atomic_add with a run-time region extent or an unproven tile-side
// start becomes a `parallel` clipped to its tiles; an unproven tile region
// of a gemm, reduce or cumsum is an error.
std::unique_ptr<Pass> CreateStoresToCopiesPass();
// Every target: a copy of a tensor region the kernel never writes into a
// whole tile that already holds exactly that region (an earlier copy, in a
// loop that ran once or straight-line before it, the tile unwritten since)
// is dropped.
std::unique_ptr<Pass> CreateReuseLoadsPass();
std::unique_ptr<Pass> CreateGuardAccessesPass();
// Simplifies index arithmetic and drops `if` conditions the prover shows
// always true or always false (bounds checks made unnecessary by static dims
// or `assume` facts).
std::unique_ptr<Pass> CreateSimplifyPass();
// Decides how each fragment's elements map to threads (trivial on the CPU:
// one thread holds the whole tile).
std::unique_ptr<Pass> CreateLayoutInferencePass();
// Lowers every tile op (copy, fill, gemm, reduce, cumsum, atomic_add,
// parallel, rasterize) to loops over element loads and stores, with edge
// predicates on global regions.
std::unique_ptr<Pass> CreateLowerTileOpsPass();
// Software pipelining of `pipelined` loops (on the CPU: a plain serial loop).
std::unique_ptr<Pass> CreatePipelineLoopsPass();

// GPU targets (CUDA sm_*, HIP gfx*): tile ops stay in the IR for the GPU
// code generator. Layout inference plans register (matrix-instruction
// accumulator) and shared-memory fragments with the target's dialect;
// pipeline-loops checks stage counts and keeps the loops.
// GPU targets: checks the block size, then runs the planning passes
// (codegen/gpu/plan_kernel.h) into ctx.gpu_plan and ctx.layouts.
std::unique_ptr<Pass> CreateGpuPlanPass();
std::unique_ptr<Pass> CreateGpuPipelineLoopsPass();

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_PASSES_PASSES_H_
