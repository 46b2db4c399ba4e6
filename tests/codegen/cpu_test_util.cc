#include "tests/codegen/cpu_test_util.h"

#include <cstdio>
#include <cstdlib>

#include "compiler/ir/diagnostic.h"
#include "compiler/ir/parser.h"

namespace kiln::testing {

absl::StatusOr<compiler::Kernel> ParseKernel(std::string_view text) {
  compiler::ParseResult parsed = compiler::Parse(text);
  if (!parsed.ok()) {
    return compiler::DiagnosticsToStatus(parsed.errors, "test.tile");
  }
  if (parsed.program.kernels.size() != 1) {
    return absl::InvalidArgumentError("expected exactly one kernel");
  }
  return parsed.program.kernels[0];
}

absl::StatusOr<std::unique_ptr<runtime::CpuKernel>> CompileAndLoad(
    std::string_view text, const compiler::CpuCodegenOptions& options,
    compiler::CpuArtifact* artifact) {
  absl::StatusOr<compiler::Kernel> kernel = ParseKernel(text);
  if (!kernel.ok()) return kernel.status();
  absl::StatusOr<compiler::CpuArtifact> out =
      compiler::GenerateCpu(*kernel, options);
  if (!out.ok()) return out.status();
  // KILN_TEST_DUMP_IR=1 prints the optimised LLVM IR of every kernel.
  if (std::getenv("KILN_TEST_DUMP_IR") != nullptr) {
    std::fprintf(stderr, "%s\n", out->llvm_ir.c_str());
  }
  absl::StatusOr<std::unique_ptr<runtime::CpuKernel>> loaded =
      runtime::CpuKernel::Load(out->shared_object,
                               std::string_view(out->metadata));
  if (artifact != nullptr) *artifact = std::move(*out);
  return loaded;
}

bool IsX86Host() {
  return compiler::DetectCpuTarget().triple.rfind("x86_64", 0) == 0;
}

compiler::CpuCodegenOptions NoF16cOptions() {
  compiler::CpuCodegenOptions options;
  if (!IsX86Host()) return options;  // no F16C there anyway
  options.cpu = "x86-64";
  options.features = "-f16c";
  return options;
}

}  // namespace kiln::testing
