#include "runtime/shared_library.h"

#include <dlfcn.h>
#include <link.h>

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace kiln::runtime {
namespace {

// dlerror() text, or `fallback` when dlerror() has nothing to say.
std::string DlErrorOr(absl::string_view fallback) {
  const char* error = dlerror();
  return error != nullptr ? std::string(error) : std::string(fallback);
}

}  // namespace

absl::StatusOr<SharedLibrary> SharedLibrary::Open(
    absl::string_view path_or_soname) {
  if (path_or_soname.empty()) {
    return absl::InvalidArgumentError("dlopen: empty library name");
  }
  std::string name(path_or_soname);
  void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::NotFoundError(
        absl::StrCat("dlopen ", name, ": ", DlErrorOr("unknown error")));
  }
  return SharedLibrary(handle, std::move(name));
}

absl::StatusOr<SharedLibrary> SharedLibrary::OpenFirst(
    absl::Span<const std::string> candidates) {
  if (candidates.empty()) {
    return absl::InvalidArgumentError("dlopen: no candidate library names");
  }
  std::vector<std::string> errors;
  for (const std::string& candidate : candidates) {
    absl::StatusOr<SharedLibrary> library = Open(candidate);
    if (library.ok()) return library;
    errors.emplace_back(library.status().message());
  }
  return absl::NotFoundError(absl::StrJoin(errors, "; "));
}

SharedLibrary::SharedLibrary(SharedLibrary&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      name_(std::move(other.name_)) {}

SharedLibrary& SharedLibrary::operator=(SharedLibrary&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) dlclose(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    name_ = std::move(other.name_);
  }
  return *this;
}

SharedLibrary::~SharedLibrary() {
  if (handle_ != nullptr) dlclose(handle_);
}

absl::StatusOr<void*> SharedLibrary::FindSymbol(const std::string& name) const {
  if (handle_ == nullptr) {
    return absl::FailedPreconditionError("dlsym on a moved-from SharedLibrary");
  }
  // A symbol's value may legitimately be null, so success is judged by
  // dlerror(), cleared first, not by the returned pointer.
  dlerror();
  void* symbol = dlsym(handle_, name.c_str());
  if (const char* error = dlerror(); error != nullptr) {
    return absl::NotFoundError(absl::StrCat("dlsym ", name, ": ", error));
  }
  return symbol;
}

std::string SharedLibrary::LoadedPath() const {
  link_map* map = nullptr;
  if (handle_ == nullptr || dlinfo(handle_, RTLD_DI_LINKMAP, &map) != 0 ||
      map == nullptr || map->l_name == nullptr || map->l_name[0] == '\0') {
    return name_;
  }
  return map->l_name;
}

}  // namespace kiln::runtime
