// NVRTC, loaded with dlopen on first use (libnvrtc.so.13, .so.12, then
// /usr/local/cuda/lib64): CUDA C++ source plus in-memory headers to a cubin
// for one sm_XX architecture, with ptxas's resource report. No NVRTC header
// or library is needed to build Kiln.
#ifndef KILN_COMPILER_CODEGEN_CUDA_NVRTC_H_
#define KILN_COMPILER_CODEGEN_CUDA_NVRTC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace kiln::compiler::cuda {

// Registers, spills and memory of one kernel, parsed from ptxas -v.
struct PtxasInfo {
  int64_t registers = -1;  // -1: not reported
  int64_t spill_stores = 0;
  int64_t spill_loads = 0;
  int64_t stack_bytes = 0;
  int64_t static_shared_bytes = 0;
};

struct NvrtcOutput {
  std::string cubin;
  std::string ptx;  // only when asked for
  std::string log;  // NVRTC's log (ptxas -v lines included)
  PtxasInfo ptxas;
};

// "13.0"; NotFound (saying which libraries were tried) without NVRTC.
absl::StatusOr<std::string> NvrtcVersion();

// Compiles `source` (named `file_name` in diagnostics) for `arch`
// ("sm_90") with the device library headers. FailedPrecondition without
// NVRTC; InvalidArgument with the log, each error followed by the generated
// source line it names (and the tile-IR location of the statement that
// produced it), when the source does not compile.
absl::StatusOr<NvrtcOutput> CompileToCubin(const std::string& source,
                                           const std::string& file_name,
                                           const std::string& arch,
                                           bool want_ptx);

// Parses the ptxas -v lines of `log` (exposed for tests).
PtxasInfo ParsePtxasLog(const std::string& log);

// The log with every `FILE(LINE): error` followed by that line of `source`
// and, when a `// tile L:C` marker precedes it, the tile-IR location.
std::string AnnotateLog(const std::string& log, const std::string& source);

}  // namespace kiln::compiler::cuda

#endif  // KILN_COMPILER_CODEGEN_CUDA_NVRTC_H_
