#include "compiler/codegen/hip/hiprtc.h"

#include <cstdlib>
#include <mutex>
#include <regex>
#include <sstream>
#include <vector>

#include "compiler/codegen/gpu/generated_line.h"
#include "compiler/codegen/gpu/toolchain_library.h"
#include "compiler/codegen/hip/device_headers.h"
#include "compiler/ir/format.h"

namespace kiln::compiler::hip {
namespace {

// The hiprtc C API (hip/hiprtc.h, ROCm 5.x and 6.x), declared here so that
// no HIP header is needed at build time. Results are hiprtcResult (0 is
// success).
using Program = struct OpaqueHiprtcProgram*;
struct HiprtcApi {
  // hiprtcVersion answers 9.0 on ROCm 5.2: the HIP runtime's version
  // (HIP_VERSION: major * 10^7 + minor * 10^5 + patch) names the release,
  // and needs no GPU.
  int (*runtime_version)(int*) = nullptr;
  int (*create)(Program*, const char*, const char*, int, const char**,
                const char**) = nullptr;
  int (*compile)(Program, int, const char**) = nullptr;
  int (*log_size)(Program, size_t*) = nullptr;
  int (*log)(Program, char*) = nullptr;
  int (*code_size)(Program, size_t*) = nullptr;
  int (*code)(Program, char*) = nullptr;
  int (*destroy)(Program*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  std::string error;  // why loading failed
};

const HiprtcApi& Hiprtc() {
  static HiprtcApi* api = [] {
    auto* a = new HiprtcApi;
    std::vector<std::string> candidates = {
        "libamdhip64.so.5", "libamdhip64.so.6", "/opt/rocm/lib/libamdhip64.so",
        "libamdhip64.so"};
    if (const char* env = std::getenv("KILN_HIPRTC_LIBRARY")) {
      candidates = {env};
    }
    std::string tried;
    void* lib = gpu::OpenFirstLibrary(candidates, &tried);
    if (!lib) {
      a->error = StrCat(
          "hiprtc is not installed (install libamdhip64-dev and "
          "libhiprtc-builtins5, or ROCm; tried:",
          tried, ")");
      return a;
    }
    auto bind = [&](auto& fn, const char* name) {
      gpu::BindSymbol(lib, name, "hiprtc", fn, &a->error);
    };
    bind(a->runtime_version, "hipRuntimeGetVersion");
    bind(a->create, "hiprtcCreateProgram");
    bind(a->compile, "hiprtcCompileProgram");
    bind(a->log_size, "hiprtcGetProgramLogSize");
    bind(a->log, "hiprtcGetProgramLog");
    bind(a->code_size, "hiprtcGetCodeSize");
    bind(a->code, "hiprtcGetCode");
    bind(a->destroy, "hiprtcDestroyProgram");
    bind(a->error_string, "hiprtcGetErrorString");
    return a;
  }();
  return *api;
}

std::string ErrorName(const HiprtcApi& api, int rc) {
  const char* s = api.error_string ? api.error_string(rc) : nullptr;
  return s ? std::string(s) : StrCat("hiprtc error ", rc);
}

// hiprtc's log: its size may be 0 or 1 for an empty log, and the text is
// not always terminated.
std::string ProgramLog(const HiprtcApi& api, Program prog) {
  size_t n = 0;
  if (api.log_size(prog, &n) != 0 || n <= 1) return "";
  std::string log(n + 1, '\0');
  if (api.log(prog, log.data()) != 0) return "";
  log.resize(n);
  while (!log.empty() && log.back() == '\0') log.pop_back();
  return log;
}

}  // namespace

absl::StatusOr<std::string> HiprtcVersion() {
  const HiprtcApi& api = Hiprtc();
  if (!api.error.empty()) return absl::FailedPreconditionError(api.error);
  int v = 0;
  if (api.runtime_version(&v) != 0 || v <= 0) {
    return absl::InternalError("hipRuntimeGetVersion failed");
  }
  return StrCat(v / 10000000, ".", v / 100000 % 100, ".", v % 100000);
}

std::string AnnotateHipLog(const std::string& log, const std::string& source) {
  static const std::regex kDiag(R"(^[^:]*:(\d+):\d+: (error|warning):.*$)");
  return gpu::AnnotateLog(log, source, kDiag, 1);
}

absl::StatusOr<HiprtcOutput> CompileToCodeObject(const std::string& source,
                                                 const std::string& file_name,
                                                 const std::string& arch) {
  const HiprtcApi& api = Hiprtc();
  if (!api.error.empty()) return absl::FailedPreconditionError(api.error);
  std::vector<const char*> names, texts;
  for (const DeviceHeader& h : DeviceHeaders()) {
    names.push_back(h.name);
    texts.push_back(h.text);
  }
  // hiprtc 5.2 shares compiler state between programs: one at a time.
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  Program prog = nullptr;
  int rc =
      api.create(&prog, source.c_str(), file_name.c_str(),
                 static_cast<int>(names.size()), texts.data(), names.data());
  if (rc != 0) {
    return absl::InternalError(
        StrCat("hiprtcCreateProgram: ", ErrorName(api, rc)));
  }
  const std::string arch_opt = "--offload-arch=" + arch;
  const char* opts[] = {arch_opt.c_str(), "-O3", "-std=c++17", "-DNDEBUG"};
  rc = api.compile(prog, static_cast<int>(std::size(opts)), opts);
  HiprtcOutput out;
  out.log = ProgramLog(api, prog);
  if (rc != 0) {
    api.destroy(&prog);
    return absl::InvalidArgumentError(
        StrCat("hiprtc could not compile the generated HIP source (",
               ErrorName(api, rc), "):\n", AnnotateHipLog(out.log, source)));
  }
  size_t n = 0;
  if (api.code_size(prog, &n) == 0 && n > 0) {
    out.code_object.resize(n);
    if (api.code(prog, out.code_object.data()) != 0) out.code_object.clear();
  }
  api.destroy(&prog);
  if (out.code_object.empty()) {
    return absl::InternalError("hiprtc produced no code object for " + arch);
  }
  return out;
}

}  // namespace kiln::compiler::hip
