#include "compiler/codegen/cuda/nvrtc.h"

#include <mutex>
#include <regex>
#include <sstream>

#include "compiler/codegen/cuda/device_headers.h"
#include "compiler/codegen/gpu/generated_line.h"
#include "compiler/codegen/gpu/toolchain_library.h"
#include "compiler/ir/format.h"

namespace kiln::compiler::cuda {
namespace {

// The NVRTC C API, declared here (same ABI as nvrtc.h) so no CUDA header is
// needed at build time.
using Program = struct OpaqueProgram*;
struct Api {
  int (*version)(int*, int*) = nullptr;
  int (*create)(Program*, const char*, const char*, int, const char* const*,
                const char* const*) = nullptr;
  int (*compile)(Program, int, const char* const*) = nullptr;
  int (*log_size)(Program, size_t*) = nullptr;
  int (*log)(Program, char*) = nullptr;
  int (*cubin_size)(Program, size_t*) = nullptr;
  int (*cubin)(Program, char*) = nullptr;
  int (*ptx_size)(Program, size_t*) = nullptr;
  int (*ptx)(Program, char*) = nullptr;
  int (*destroy)(Program*) = nullptr;
  const char* (*error_string)(int) = nullptr;
  std::string error;  // why loading failed
};

const Api& LoadApi() {
  static Api* api = [] {
    Api* a = new Api;
    std::string tried;
    void* h = gpu::OpenFirstLibrary(
        {"libnvrtc.so.13", "libnvrtc.so.12",
         "/usr/local/cuda/lib64/libnvrtc.so.13",
         "/usr/local/cuda/lib64/libnvrtc.so.12", "libnvrtc.so"},
        &tried);
    if (!h) {
      a->error = "NVRTC is not installed (tried:" + tried + ")";
      return a;
    }
    auto sym = [&](auto& fn, const char* name) {
      gpu::BindSymbol(h, name, "NVRTC", fn, &a->error);
    };
    sym(a->version, "nvrtcVersion");
    sym(a->create, "nvrtcCreateProgram");
    sym(a->compile, "nvrtcCompileProgram");
    sym(a->log_size, "nvrtcGetProgramLogSize");
    sym(a->log, "nvrtcGetProgramLog");
    sym(a->cubin_size, "nvrtcGetCUBINSize");
    sym(a->cubin, "nvrtcGetCUBIN");
    sym(a->ptx_size, "nvrtcGetPTXSize");
    sym(a->ptx, "nvrtcGetPTX");
    sym(a->destroy, "nvrtcDestroyProgram");
    sym(a->error_string, "nvrtcGetErrorString");
    return a;
  }();
  return *api;
}

int64_t Num(const std::smatch& m, int i) { return std::stoll(m[i].str()); }

}  // namespace

absl::StatusOr<std::string> NvrtcVersion() {
  const Api& api = LoadApi();
  if (!api.error.empty()) return absl::NotFoundError(api.error);
  int major = 0, minor = 0;
  if (api.version(&major, &minor) != 0) {
    return absl::InternalError("nvrtcVersion failed");
  }
  return StrCat(major, ".", minor);
}

PtxasInfo ParsePtxasLog(const std::string& log) {
  PtxasInfo info;
  static const std::regex kRegs(R"(Used (\d+) registers)");
  static const std::regex kSmem(R"((\d+) bytes smem)");
  static const std::regex kFrame(
      R"((\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads)");
  std::smatch m;
  if (std::regex_search(log, m, kRegs)) info.registers = Num(m, 1);
  if (std::regex_search(log, m, kSmem)) info.static_shared_bytes = Num(m, 1);
  if (std::regex_search(log, m, kFrame)) {
    info.stack_bytes = Num(m, 1);
    info.spill_stores = Num(m, 2);
    info.spill_loads = Num(m, 3);
  }
  return info;
}

std::string AnnotateLog(const std::string& log, const std::string& source) {
  static const std::regex kErr(R"(^(.*)\((\d+)\): (error|warning).*$)");
  return gpu::AnnotateLog(log, source, kErr, 2);
}

absl::StatusOr<NvrtcOutput> CompileToCubin(const std::string& source,
                                           const std::string& file_name,
                                           const std::string& arch,
                                           bool want_ptx) {
  const Api& api = LoadApi();
  if (!api.error.empty()) return absl::FailedPreconditionError(api.error);
  std::vector<const char*> names, texts;
  for (const DeviceHeader& h : DeviceHeaders()) {
    names.push_back(h.name);
    texts.push_back(h.text);
  }
  Program prog = nullptr;
  int rc =
      api.create(&prog, source.c_str(), file_name.c_str(),
                 static_cast<int>(names.size()), texts.data(), names.data());
  if (rc != 0) {
    return absl::InternalError(
        StrCat("nvrtcCreateProgram: ", api.error_string(rc)));
  }
  const std::string arch_opt = "--gpu-architecture=" + arch;
  const char* opts[] = {arch_opt.c_str(), "-std=c++17", "--ptxas-options=-v",
                        "-DNDEBUG"};
  rc = api.compile(prog, static_cast<int>(std::size(opts)), opts);
  NvrtcOutput out;
  size_t n = 0;
  api.log_size(prog, &n);
  out.log.resize(n);
  if (n) api.log(prog, out.log.data());
  while (!out.log.empty() && out.log.back() == '\0') out.log.pop_back();
  if (rc != 0) {
    api.destroy(&prog);
    return absl::InvalidArgumentError(
        StrCat("NVRTC could not compile the generated CUDA source (",
               api.error_string(rc), "):\n", AnnotateLog(out.log, source)));
  }
  n = 0;
  api.cubin_size(prog, &n);
  out.cubin.resize(n);
  if (n) api.cubin(prog, out.cubin.data());
  if (want_ptx) {
    n = 0;
    if (api.ptx_size(prog, &n) == 0 && n > 0) {
      out.ptx.resize(n);
      api.ptx(prog, out.ptx.data());
      while (!out.ptx.empty() && out.ptx.back() == '\0') out.ptx.pop_back();
    }
  }
  api.destroy(&prog);
  if (out.cubin.empty()) {
    return absl::InternalError("NVRTC produced no cubin for " + arch);
  }
  out.ptxas = ParsePtxasLog(out.log);
  return out;
}

}  // namespace kiln::compiler::cuda
