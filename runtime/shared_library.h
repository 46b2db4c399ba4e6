// SharedLibrary: an owned handle on a shared object opened with dlopen, the
// way Kiln reaches every optional native library (the CUDA driver
// libcuda.so.1, NVRTC, HIP, and the CPU kernels it builds itself), so that one
// build runs on hosts with or without them.
#ifndef KILN_RUNTIME_SHARED_LIBRARY_H_
#define KILN_RUNTIME_SHARED_LIBRARY_H_

#include <string>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace kiln::runtime {

class SharedLibrary {
 public:
  // Opens `path_or_soname` with RTLD_NOW | RTLD_LOCAL: a path containing '/'
  // is opened as is, a bare name ("libcuda.so.1") is searched for the way the
  // dynamic linker does. Every undefined symbol is resolved now, so a library
  // that opens is usable. Returns NotFound carrying dlerror()'s text when the
  // library cannot be loaded, InvalidArgument for an empty name.
  static absl::StatusOr<SharedLibrary> Open(absl::string_view path_or_soname);

  // Opens the first of `candidates` that loads (for instance "libnvrtc.so.12",
  // then "libnvrtc.so"). Returns NotFound listing every candidate's error when
  // none loads, InvalidArgument when `candidates` is empty.
  static absl::StatusOr<SharedLibrary> OpenFirst(
      absl::Span<const std::string> candidates);

  SharedLibrary(SharedLibrary&& other) noexcept;
  SharedLibrary& operator=(SharedLibrary&& other) noexcept;
  SharedLibrary(const SharedLibrary&) = delete;
  SharedLibrary& operator=(const SharedLibrary&) = delete;
  // dlclose()s the library. Pointers obtained from FindSymbol() dangle after.
  ~SharedLibrary();

  // The address of the symbol `name`. Returns NotFound carrying dlerror()'s
  // text when the library does not define it. Thread-safe.
  absl::StatusOr<void*> FindSymbol(const std::string& name) const;

  // FindSymbol() cast to a function pointer type: FindFunction<int(int*)>(..).
  // The caller vouches for the signature; nothing can check it.
  template <typename Signature>
  absl::StatusOr<Signature*> FindFunction(const std::string& name) const {
    absl::StatusOr<void*> symbol = FindSymbol(name);
    if (!symbol.ok()) return symbol.status();
    return reinterpret_cast<Signature*>(*symbol);
  }

  // The name Open() was given.
  const std::string& name() const { return name_; }

  // The file the dynamic linker actually loaded (a soname resolved to its
  // path), or name() when the linker cannot tell.
  std::string LoadedPath() const;

 private:
  SharedLibrary(void* handle, std::string name)
      : handle_(handle), name_(std::move(name)) {}

  void* handle_ = nullptr;  // null only in a moved-from object
  std::string name_;
};

}  // namespace kiln::runtime

#endif  // KILN_RUNTIME_SHARED_LIBRARY_H_
