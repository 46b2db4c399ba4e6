// GenerateCpu, top to bottom:
// 1. metadata (fails early on a launch expression the runtime cannot carry);
// 2. the target machine for the host (or the requested cpu);
// 3. emit the entry function into a fresh module and verify it;
// 4. optimise (O3, vectorising for the target);
// 5. emit the object file in memory;
// 6. link it into a shared object with lld, in process.
#include "compiler/codegen/cpu/cpu_codegen.h"

#include <chrono>
#include <cstdlib>
#include <string_view>

#include "compiler/codegen/cpu/elf_link.h"
#include "compiler/codegen/cpu/kernel_emitter.h"
#include "compiler/codegen/cpu/llvm_target.h"
#include "compiler/codegen/metadata_writer.h"
#include "compiler/ir/format.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/Verifier.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"

namespace kiln::compiler {
namespace {

using Clock = std::chrono::steady_clock;

double MsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start)
      .count();
}

cpu::HostTarget ResolveTarget(const CpuCodegenOptions& options) {
  cpu::HostTarget target = cpu::DetectHostTarget();
  if (!options.cpu.empty() || !options.features.empty()) {
    target.cpu = options.cpu.empty() ? "generic" : options.cpu;
    target.features = options.features;
  }
  return target;
}

}  // namespace

CpuTarget DetectCpuTarget() {
  cpu::HostTarget t = cpu::DetectHostTarget();
  return {t.triple, t.cpu, t.features};
}

std::string CpuToolchainIdentity(const CpuCodegenOptions& options) {
  cpu::HostTarget t = ResolveTarget(options);
  return StrCat("llvm-", LLVM_VERSION_STRING, " ", t.triple, " ", t.cpu, " ",
                t.features.empty() ? "-" : t.features,
                options.address_sanitizer ? " asan" : "");
}

absl::StatusOr<CpuCodegenOptions> DefaultCpuCodegenOptions() {
  CpuCodegenOptions options;
  const char* sanitize = std::getenv("KILN_CPU_SANITIZE");
  const std::string_view value = sanitize != nullptr ? sanitize : "";
  if (value == "address") {
    options.address_sanitizer = true;
  } else if (!value.empty()) {
    return absl::InvalidArgumentError(
        StrCat("KILN_CPU_SANITIZE='", value.substr(0, 32),
               "': the CPU target knows one sanitizer, 'address'"));
  }
  return options;
}

absl::StatusOr<CpuArtifact> GenerateCpu(const Kernel& lowered,
                                        const CpuCodegenOptions& options) {
  CpuArtifact artifact;
  artifact.entry =
      options.entry.empty() ? StrCat("kiln_", lowered.name) : options.entry;
  absl::StatusOr<std::string> metadata =
      WriteKernelMetadata(lowered, {"cpu", artifact.entry, 0});
  if (!metadata.ok()) return metadata.status();
  artifact.metadata = std::move(*metadata);

  const cpu::HostTarget target = ResolveTarget(options);
  absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> tm =
      cpu::CreateTargetMachine(target);
  if (!tm.ok()) return tm.status();

  Clock::time_point start = Clock::now();
  llvm::LLVMContext context;
  auto module = std::make_unique<llvm::Module>("kiln_" + lowered.name, context);
  module->setTargetTriple(target.triple);
  module->setDataLayout((*tm)->createDataLayout());
  cpu::EmitOptions emit;
  emit.entry = artifact.entry;
  emit.cpu = target.cpu;
  emit.features = target.features;
  emit.use_f16c = cpu::HasFeature(**tm, "+f16c");
  absl::Status st = cpu::EmitKernel(lowered, emit, module.get());
  if (!st.ok()) return st;
  std::string verify_errors;
  llvm::raw_string_ostream verify_os(verify_errors);
  if (llvm::verifyModule(*module, &verify_os)) {
    verify_os.flush();
    return absl::InternalError(
        StrCat("cpu codegen produced invalid LLVM IR for kernel '",
               lowered.name, "': ", verify_errors));
  }
  artifact.timings.emit_ms = MsSince(start);

  start = Clock::now();
  cpu::Optimize(module.get(), tm->get(), options.opt_level);
  if (options.address_sanitizer) cpu::InstrumentAddresses(module.get());
  artifact.timings.optimize_ms = MsSince(start);
  if (options.keep_llvm_ir) {
    llvm::raw_string_ostream ir_os(artifact.llvm_ir);
    module->print(ir_os, nullptr);
    ir_os.flush();
  }

  start = Clock::now();
  absl::StatusOr<std::string> object = cpu::EmitObject(module.get(), tm->get());
  if (!object.ok()) return object.status();
  artifact.timings.object_ms = MsSince(start);

  start = Clock::now();
  absl::StatusOr<std::string> so =
      cpu::LinkSharedObject(*object, options.address_sanitizer);
  if (!so.ok()) return so.status();
  artifact.shared_object = std::move(*so);
  artifact.timings.link_ms = MsSince(start);
  return artifact;
}

}  // namespace kiln::compiler
