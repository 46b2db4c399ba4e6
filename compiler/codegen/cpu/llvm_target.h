// The LLVM side of the CPU back end that does not depend on the kernel: the
// host target, the O3 optimisation pipeline and object emission. Internal to
// the CPU back end; LLVM types are only forward-declared here.
#ifndef KILN_COMPILER_CODEGEN_CPU_LLVM_TARGET_H_
#define KILN_COMPILER_CODEGEN_CPU_LLVM_TARGET_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace llvm {
class Module;
class TargetMachine;
}  // namespace llvm

namespace kiln::compiler::cpu {

// The process's target triple, the host CPU name and its features as a
// sorted "+a,-b,..." list (stable, so it can enter a cache key).
struct HostTarget {
  std::string triple;
  std::string cpu;
  std::string features;
};
HostTarget DetectHostTarget();  // cached after the first call
HostTarget DetectHostTargetUncached();

// A target machine for `triple`/`cpu`/`features` (PIC, aggressive codegen).
// Initialises LLVM's native target once per process. InvalidArgument for an
// unknown triple or CPU.
absl::StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateTargetMachine(
    const HostTarget& target);

// Does `tm` generate code with `feature` (e.g. "+f16c")?
bool HasFeature(const llvm::TargetMachine& tm, const std::string& feature);

// Runs the new pass manager's default pipeline at `opt_level` (0..3) with
// loop and SLP vectorisation on.
void Optimize(llvm::Module* module, llvm::TargetMachine* tm, int opt_level);

// Instruments every function defined in `module` with AddressSanitizer (as
// clang -fsanitize=address does after its optimisation pipeline): checked
// loads and stores, red zones around stack allocations and globals, and a
// module constructor that registers them with the ASan runtime.
void InstrumentAddresses(llvm::Module* module);

// The module as an ELF relocatable object, in memory.
absl::StatusOr<std::string> EmitObject(llvm::Module* module,
                                       llvm::TargetMachine* tm);

}  // namespace kiln::compiler::cpu

#endif  // KILN_COMPILER_CODEGEN_CPU_LLVM_TARGET_H_
