// Loading a GPU toolchain library (NVRTC, hiprtc) with dlopen, so that
// Kiln builds without the vendor SDK and runs on hosts without it: the
// first of several candidate names that loads, and its C entry points.
#ifndef KILN_COMPILER_CODEGEN_GPU_TOOLCHAIN_LIBRARY_H_
#define KILN_COMPILER_CODEGEN_GPU_TOOLCHAIN_LIBRARY_H_

#include <dlfcn.h>

#include <string>
#include <type_traits>
#include <vector>

namespace kiln::compiler::gpu {

// dlopen of each candidate in order (RTLD_NOW | RTLD_LOCAL); the first
// handle that loads, or null with `tried` listing every candidate and
// dlerror's reason ("\n  NAME: REASON" each).
void* OpenFirstLibrary(const std::vector<std::string>& candidates,
                       std::string* tried);

// Looks up `name` in `lib` into `fn`; on a missing symbol sets `error` (when
// still empty) to "<what> lacks <name>".
template <typename Fn>
void BindSymbol(void* lib, const char* name, const char* what, Fn& fn,
                std::string* error) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn && error->empty()) *error = std::string(what) + " lacks " + name;
}

}  // namespace kiln::compiler::gpu

#endif  // KILN_COMPILER_CODEGEN_GPU_TOOLCHAIN_LIBRARY_H_
