// The compiler's front door: tile-IR text in, a kernel handle (binary plus
// launch metadata) out. Used by the CLI, the tests and the daemon's engine.
#ifndef KILN_COMPILER_COMPILE_H_
#define KILN_COMPILER_COMPILE_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "compiler/ir/ir.h"

namespace kiln::compiler {

struct CompileOptions {
  // "cpu", a CUDA target: "sm_80", "sm_86", "sm_89", "sm_90", "sm_90a"
  // (sm_90a is compiled as sm_90 for now), or a HIP target: "gfx908",
  // "gfx90a", "gfx942" (gfx942 needs hiprtc from ROCm 6.0 or newer:
  // FailedPrecondition "toolchain too old" with an older one).
  std::string target = "cpu";
  // Which kernel of the program; may be empty when the program has one.
  std::string kernel;
  // Values of every tunable, and of symbols fixed at compile time.
  std::map<std::string, int64_t> bindings;
  // Keep the IR after every pass in CompiledKernel::ir_dump.
  bool print_ir_after_all = false;
  // Name used in diagnostics ("FILE:LINE:COL").
  std::string filename = "<input>";
  // CUDA: keep the PTX in CompiledKernel::ptx (`kiln compile --emit ptx`).
  bool keep_ptx = false;
  // GPU targets: stop once the kernel is planned (CompiledKernel::plan set,
  // no source rendered, no toolchain needed, no binary); `kiln compile
  // --print-plan`. InvalidArgument on the CPU target, which has no plan.
  bool plan_only = false;
};

// Wall-clock milliseconds per stage.
struct CompileTimings {
  double parse_verify_ms = 0;
  double passes_ms = 0;
  double codegen_ms = 0;  // IR emission, optimisation, object, link
  double total_ms = 0;
};

struct CompiledKernel {
  std::string name;
  std::string target;
  // Binary key: SHA-256 over the kernel's canonical hash, the bindings, the
  // target, the toolchain identity and the compiler version (hex).
  std::string key;
  std::string key_text;    // what the key hashes (BinaryKeyText)
  std::string binary;      // CPU: an ELF shared object; CUDA: a cubin;
                           // HIP: an AMDGPU code object (ELF)
  std::string metadata;    // launch metadata (compiler/docs/kernel-handle.md)
  std::string lowered_ir;  // the kernel after the last pass
  std::string llvm_ir;     // CPU: optimised LLVM IR
  std::string ir_dump;     // with print_ir_after_all: IR after each pass
  std::string toolchain;   // the toolchain identity hashed into the key
  std::string device_source;  // CUDA / HIP: the generated CUDA / HIP C++
  std::string ptx;            // CUDA with keep_ptx: the PTX NVRTC produced
  std::string layouts;        // GPU: where each tile lives, one per line
  std::string plan;           // GPU: the KernelPlan, printed
  std::string build_log;      // CUDA: NVRTC's log (ptxas -v report); HIP:
                              // hiprtc's warnings
  CompileTimings timings;
  int prover_queries = 0;
  int prover_z3_queries = 0;
};

// One kernel of a program, loaded: parsed, verified and chosen once, with
// the binary key computed from it. The daemon looks the key up and, on a
// miss, compiles the loaded kernel without parsing the text again.
struct LoadedKernel {
  Kernel kernel;
  CompileOptions options;
  std::string toolchain;  // the toolchain identity the key hashes
  std::string key_text;   // BinaryKeyText
  std::string key;        // its SHA-256 (hex)
  double load_ms = 0;     // parse + verify
};

// Loads one kernel of `source` for `options` (its target, kernel and
// bindings). InvalidArgument (every diagnostic, as FILE:LINE:COL lines) for
// invalid programs, unknown targets and kernels; NotFound for a named
// kernel the program lacks; FailedPrecondition when the target's toolchain
// is not installed.
absl::StatusOr<LoadedKernel> Load(std::string_view source,
                                  const CompileOptions& options);

// Compiles a loaded kernel. InvalidArgument (located) for missing or bad
// tunable values and kernels the target cannot hold; Unimplemented (naming
// the op) for what the target cannot lower; FailedPrecondition when the
// toolchain is too old for the target; Internal for back-end failures.
absl::StatusOr<CompiledKernel> Compile(const LoadedKernel& loaded);

// Load, then Compile: every error of either.
absl::StatusOr<CompiledKernel> Compile(std::string_view source,
                                       const CompileOptions& options);

// The binary key Compile would give, without compiling (parse and verify
// only): for cache lookups before compiling.
absl::StatusOr<std::string> BinaryKey(std::string_view source,
                                      const CompileOptions& options);

// The text the binary key is the SHA-256 (hex) of, one component per line:
//   kiln-binary-key-v1
//   kernel <canonical hash of the kernel>
//   target <target>
//   toolchain <toolchain identity>
//   compiler <compiler version>
//   bind NAME=VALUE   (each binding, sorted by name)
// Stored beside each binary (the "key.txt" blob) so that `kiln cache explain`
// can say which component made a lookup miss.
absl::StatusOr<std::string> BinaryKeyText(std::string_view source,
                                          const CompileOptions& options);

// The compiler's version and build, part of every key:
// "kiln-VERSION+FINGERPRINT" with the first 16 hex digits of
// CompilerFingerprint().
std::string_view CompilerVersion();

// The SHA-256 (hex) of every source file under compiler/ (front end, passes,
// planners, code generators, device libraries), made at build time by
// compiler/fingerprint.cmake: a change to any of them changes every binary
// key, so no cache tier serves a binary of an older compiler build.
std::string_view CompilerFingerprint();

}  // namespace kiln::compiler

#endif  // KILN_COMPILER_COMPILE_H_
