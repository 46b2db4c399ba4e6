// Kernel emitter: one lowered kernel (tile-ir.md §8) as the LLVM IR of the
// CPU entry function (ABI: compiler/docs/kernel-handle.md, "CPU target ABI").
// Internal to the CPU back end.
#ifndef KILN_COMPILER_CODEGEN_CPU_KERNEL_EMITTER_H_
#define KILN_COMPILER_CODEGEN_CPU_KERNEL_EMITTER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "compiler/ir/ir.h"

namespace llvm {
class Module;
}  // namespace llvm

namespace kiln::compiler::cpu {

struct EmitOptions {
  std::string entry;     // the entry symbol
  std::string cpu;       // "target-cpu" of the function
  std::string features;  // "target-features" of the function
  bool use_f16c = false;
  // Largest total size of the tiles of one block (they live on the stack of
  // a runtime thread, which has 64 MiB).
  int64_t max_tile_bytes = int64_t{48} << 20;
};

// Adds the entry function of `kernel` to `module`:
//   void ENTRY(void* const* args, const int64_t* symbols,
//              int64_t bx, int64_t by, int64_t bz)
// Returns InvalidArgument (with the statement's LINE:COL) for a kernel not in
// the lowered form (a tile op, a tile dim that is not an integer constant, a
// store into an unknown buffer, a type error, tiles over max_tile_bytes).
absl::Status EmitKernel(const Kernel& kernel, const EmitOptions& options,
                        llvm::Module* module);

}  // namespace kiln::compiler::cpu

#endif  // KILN_COMPILER_CODEGEN_CPU_KERNEL_EMITTER_H_
