// hiprtc, loaded with dlopen on first use (libamdhip64.so.5, .so.6, .so:
// Debian's libamdhip64-dev, or ROCm's): HIP C++ source plus the in-memory
// device library to an AMDGPU code object (ELF) for one gfx architecture.
// No HIP header or library is needed to build Kiln, and no AMD GPU to run
// it. KILN_HIPRTC_LIBRARY names another library to load instead (tests use
// it to check the error for an absent hiprtc).
#ifndef KILN_COMPILER_CODEGEN_HIP_HIPRTC_H_
#define KILN_COMPILER_CODEGEN_HIP_HIPRTC_H_

#include <string>

#include "absl/status/statusor.h"

namespace kiln::compiler::hip {

struct HiprtcOutput {
  std::string code_object;  // ELF for amdgcn-amd-amdhsa--<arch>
  std::string log;          // warnings (empty when hiprtc wrote none)
};

// The ROCm release of the loaded library, "5.2.21153" (major.minor.patch);
// FailedPrecondition (saying which libraries were tried) without hiprtc.
// Thread-safe.
absl::StatusOr<std::string> HiprtcVersion();

// Compiles `source` (named `file_name` in diagnostics) for `arch`
// ("gfx90a") with the HIP device library headers. FailedPrecondition
// without hiprtc; InvalidArgument with the log, each error followed by the
// generated source line it names and the tile-IR location of the statement
// that produced it, when the source does not compile. The caller checks
// that hiprtc knows `arch` (hiprtc 5.2 crashes on architectures it does
// not know). Thread-safe.
absl::StatusOr<HiprtcOutput> CompileToCodeObject(const std::string& source,
                                                 const std::string& file_name,
                                                 const std::string& arch);

// The clang-style log with every `FILE:LINE:COL: error` followed by that
// line of `source` and, when a `// tile L:C` marker precedes it, the
// tile-IR location (exposed for tests).
std::string AnnotateHipLog(const std::string& log, const std::string& source);

}  // namespace kiln::compiler::hip

#endif  // KILN_COMPILER_CODEGEN_HIP_HIPRTC_H_
