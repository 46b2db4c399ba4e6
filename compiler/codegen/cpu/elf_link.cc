// 1. Find the libc and libm this process runs with (dlinfo on the loaded
//    libraries): linking against them records DT_NEEDED libc.so.6 /
//    libm.so.6 and lets --no-undefined check every symbol.
// 2. Write the object into a private temporary directory (lld reads files).
// 3. Run lld::elf::link under a CrashRecoveryContext (lld's fatal errors
//    unwind to it instead of exiting the process), then destroy lld's global
//    context so that the next link starts clean.
// 4. Read the output back and remove the directory.
#include "compiler/codegen/cpu/elf_link.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <vector>

#include "lld/Common/CommonLinkerContext.h"
#include "lld/Common/Driver.h"
#include "llvm/Support/CrashRecoveryContext.h"
#include "llvm/Support/raw_ostream.h"

namespace kiln::compiler::cpu {
namespace {

// The path of the already loaded library `soname`, or "" if unknown.
std::string LoadedLibraryPath(const char* soname) {
  void* handle = dlopen(soname, RTLD_LAZY | RTLD_NOLOAD);
  if (handle == nullptr) handle = dlopen(soname, RTLD_LAZY);
  if (handle == nullptr) return "";
  std::string path;
  struct link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr &&
      map->l_name != nullptr) {
    path = map->l_name;
  }
  dlclose(handle);
  return path;
}

const std::vector<std::string>& SystemLibraries() {
  static const std::vector<std::string>* libs = [] {
    auto* out = new std::vector<std::string>;
    for (const char* name : {"libm.so.6", "libc.so.6"}) {
      std::string path = LoadedLibraryPath(name);
      if (!path.empty()) out->push_back(path);
    }
    return out;
  }();
  return *libs;
}

// A directory removed (with its contents) when this goes out of scope.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string pattern =
        std::string(base != nullptr && *base != '\0' ? base : "/tmp") +
        "/kiln-link-XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) path_ = pattern;
  }
  ~TempDir() {
    if (path_.empty()) return;
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

std::mutex& LinkMutex() {
  static std::mutex* mu = new std::mutex;
  return *mu;
}

}  // namespace

absl::StatusOr<std::string> LinkSharedObject(std::string_view object,
                                             bool sanitized) {
  TempDir dir;
  if (dir.path().empty()) {
    return absl::InternalError("cpu link: cannot create a temporary directory");
  }
  const std::string obj_path = dir.path() + "/kernel.o";
  const std::string so_path = dir.path() + "/kernel.so";
  {
    std::ofstream out(obj_path, std::ios::binary);
    out.write(object.data(), static_cast<std::streamsize>(object.size()));
    if (!out.good()) {
      return absl::InternalError("cpu link: cannot write " + obj_path);
    }
  }
  const std::vector<std::string>& libs = SystemLibraries();
  std::vector<const char*> args = {"ld.lld",
                                   "-shared",
                                   "--as-needed",
                                   "-z",
                                   "noexecstack",
                                   "-z",
                                   "relro",
                                   "-z",
                                   "now",
                                   "--hash-style=gnu",
                                   "--threads=1",
                                   "--build-id=none",
                                   "-o",
                                   so_path.c_str(),
                                   obj_path.c_str()};
  for (const std::string& lib : libs) args.push_back(lib.c_str());
  // Without both libraries (not glibc?) undefined symbols cannot be checked
  // here; dlopen then resolves them from the process.
  if (libs.size() == 2 && !sanitized) args.push_back("--no-undefined");

  std::string out_text, err_text;
  bool ok = false;
  {
    std::lock_guard<std::mutex> lock(LinkMutex());
    llvm::raw_string_ostream out_os(out_text), err_os(err_text);
    llvm::CrashRecoveryContext crc;
    const bool ran = crc.RunSafely([&] {
      ok = lld::elf::link(args, out_os, err_os, /*exitEarly=*/false,
                          /*disableOutput=*/false);
    });
    if (ran) {
      llvm::CrashRecoveryContext destroy_crc;
      destroy_crc.RunSafely([] { lld::CommonLinkerContext::destroy(); });
    } else {
      ok = false;
    }
    out_os.flush();
    err_os.flush();
  }
  if (!ok) {
    return absl::InternalError("cpu link: lld failed: " + err_text + out_text);
  }
  std::ifstream in(so_path, std::ios::binary);
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (!in.good() && !in.eof()) {
    return absl::InternalError("cpu link: cannot read " + so_path);
  }
  std::string result = bytes.str();
  if (result.empty()) {
    return absl::InternalError("cpu link: lld produced no output");
  }
  return result;
}

}  // namespace kiln::compiler::cpu
