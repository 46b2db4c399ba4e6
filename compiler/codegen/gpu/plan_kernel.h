// The GPU planning pipeline: a specialised kernel to its KernelPlan
// (kernel_plan.h), the planning passes (planners.h) run in order.
#ifndef KILN_COMPILER_CODEGEN_GPU_PLAN_KERNEL_H_
#define KILN_COMPILER_CODEGEN_GPU_PLAN_KERNEL_H_

#include "absl/status/statusor.h"
#include "compiler/codegen/gpu/gpu_dialect.h"
#include "compiler/codegen/gpu/kernel_plan.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler::gpu {

// InvalidArgument (with the kernel's location) when threads(...) is not a
// constant in 1..1024 after specialisation.
absl::StatusOr<KernelPlan> PlanKernel(const Kernel& k,
                                      const GpuDialect& dialect);

}  // namespace kiln::compiler::gpu

#endif  // KILN_COMPILER_CODEGEN_GPU_PLAN_KERNEL_H_
