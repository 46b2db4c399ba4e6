// The CPU target's back end: a kernel in the lowered form (tile-ir.md §8) to
// a shared object implementing the CPU ABI of compiler/docs/kernel-handle.md,
// plus its launch metadata. LLVM does the work (IR builder, the O3 pipeline
// for the host CPU, object emission) and lld links in process; LLVM headers
// stay inside the .cc files.
#ifndef KILN_COMPILER_CODEGEN_CPU_CPU_CODEGEN_H_
#define KILN_COMPILER_CODEGEN_CPU_CPU_CODEGEN_H_

#include <string>

#include "absl/status/statusor.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler {

struct CpuCodegenOptions {
  // The entry symbol; empty: "kiln_" + the kernel's name.
  std::string entry;
  // The CPU to generate code for (LLVM names: "znver3", "skylake-avx512",
  // "x86-64-v3", ...) and its feature list ("+avx2,-avx512f"). Both empty:
  // the host's CPU and features (DetectCpuTarget()). A CPU with empty
  // features: that CPU's default features.
  std::string cpu;
  std::string features;
  int opt_level = 3;  // 0..3
  // Keep the optimised module's text in CpuArtifact::llvm_ir.
  bool keep_llvm_ir = true;
  // Instrument the kernel with AddressSanitizer (LLVM's ASan passes after
  // the optimisation pipeline): every load and store is checked against
  // ASan's shadow memory, and tiles on the stack get red zones. The process
  // that loads the kernel must carry ASan's runtime (a -fsanitize=address
  // build, or LD_PRELOAD of libclang_rt.asan); CpuKernel::Load says so
  // when it does not. For testing that accepted programs stay inside their
  // tiles and tensors (tile-ir.md §6).
  bool address_sanitizer = false;
};

// The options compiles use by default: the host target, O3, and
// address_sanitizer when the environment has KILN_CPU_SANITIZE=address
// (InvalidArgument for any other non-empty value).
absl::StatusOr<CpuCodegenOptions> DefaultCpuCodegenOptions();

// Wall-clock milliseconds of each step of GenerateCpu.
struct CpuCodegenTimings {
  double emit_ms = 0;      // IR emission and verification
  double optimize_ms = 0;  // the optimisation pipeline
  double object_ms = 0;    // machine code and the object file
  double link_ms = 0;      // lld, object -> shared object
};

struct CpuArtifact {
  std::string shared_object;  // ELF shared object bytes (needs libc/libm only)
  std::string llvm_ir;   // optimised LLVM IR text (`kiln compile --emit llvm`)
  std::string entry;     // the entry symbol
  std::string metadata;  // launch metadata (compiler/codegen/metadata_writer.h)
  CpuCodegenTimings timings;
};

// Compiles `lowered` for the CPU. Thread-safe (each call has its own LLVM
// context; the in-process link is serialised). Errors:
//  - InvalidArgument: the kernel is not in the lowered form, has a type error,
//    a launch expression the metadata cannot carry (metadata_writer.h), tiles
//    larger than the 48 MiB the runtime's thread stacks allow, or an unknown
//    cpu;
//  - Internal: LLVM or lld failed (a bug; the message carries their output).
absl::StatusOr<CpuArtifact> GenerateCpu(const Kernel& lowered,
                                        const CpuCodegenOptions& options);

// The target GenerateCpu compiles for when no cpu is given.
struct CpuTarget {
  std::string triple;    // "x86_64-pc-linux-gnu"
  std::string cpu;       // "znver4"
  std::string features;  // sorted "+a,+b,-c" (stable for a given host)
};
CpuTarget DetectCpuTarget();

// One line naming everything that makes CPU binaries differ: "llvm-14.0.6
// x86_64-pc-linux-gnu znver4 +a,+b,-c" for the host target (or for
// `options`'s cpu/features when given), then " asan" for instrumented
// kernels. For the binary key.
std::string CpuToolchainIdentity(const CpuCodegenOptions& options = {});

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_CODEGEN_CPU_CPU_CODEGEN_H_
