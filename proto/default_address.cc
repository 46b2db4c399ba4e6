#include "proto/default_address.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace kiln::proto {

std::string SocketPathFor(absl::string_view xdg_runtime_dir, uid_t uid) {
  // A relative XDG_RUNTIME_DIR is invalid by the XDG spec; ignore it rather
  // than listen somewhere that depends on the working directory.
  if (!xdg_runtime_dir.empty() && xdg_runtime_dir.front() == '/') {
    return absl::StrCat(xdg_runtime_dir, "/kiln/kilnd.sock");
  }
  return absl::StrCat("/tmp/kiln-", uid, "/kilnd.sock");
}

std::string DefaultSocketPath() {
  const char* runtime_dir = std::getenv("XDG_RUNTIME_DIR");
  return SocketPathFor(runtime_dir == nullptr ? "" : runtime_dir, getuid());
}

std::string DefaultAddress() {
  return absl::StrCat("unix:", DefaultSocketPath());
}

}  // namespace kiln::proto
