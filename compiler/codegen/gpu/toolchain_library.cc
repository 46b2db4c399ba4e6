#include "compiler/codegen/gpu/toolchain_library.h"

namespace kiln::compiler::gpu {

void* OpenFirstLibrary(const std::vector<std::string>& candidates,
                       std::string* tried) {
  for (const std::string& c : candidates) {
    if (void* h = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) return h;
    const char* why = dlerror();
    *tried += "\n  " + c + ": " + (why ? why : "not found");
  }
  return nullptr;
}

}  // namespace kiln::compiler::gpu
