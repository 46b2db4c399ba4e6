// Helpers of the CPU back-end tests: compile lowered-form tile-IR text with
// GenerateCpu and load the result with the CPU runtime.
#ifndef KILN_TESTS_CODEGEN_CPU_TEST_UTIL_H_
#define KILN_TESTS_CODEGEN_CPU_TEST_UTIL_H_

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/codegen/cpu/cpu_codegen.h"
#include "compiler/ir/ir.h"
#include "runtime/cpu/cpu_kernel.h"

namespace kiln::testing {

// The one kernel of `text` (a parse error fails with its diagnostics).
absl::StatusOr<compiler::Kernel> ParseKernel(std::string_view text);

// Parses `text`, compiles its kernel with `options` and loads it. When
// `artifact` is not null it receives the compile's output.
absl::StatusOr<std::unique_ptr<runtime::CpuKernel>> CompileAndLoad(
    std::string_view text, const compiler::CpuCodegenOptions& options = {},
    compiler::CpuArtifact* artifact = nullptr);

// Is this an x86-64 host (where "x86-64-v3" and "-f16c" mean something)?
bool IsX86Host();

// A CPU without F16C (f16 conversions then use the integer sequences); the
// host's CPU on other architectures.
compiler::CpuCodegenOptions NoF16cOptions();

}  // namespace kiln::testing

#endif  // KILN_TESTS_CODEGEN_CPU_TEST_UTIL_H_
