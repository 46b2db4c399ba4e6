// The well-known local address of kilnd: where the daemon listens unless told
// otherwise, and where clients (the C++ library, the `kiln` CLI) look for it.
// Kept here, next to the protocol, so that both sides agree.
#ifndef KILN_PROTO_DEFAULT_ADDRESS_H_
#define KILN_PROTO_DEFAULT_ADDRESS_H_

#include <sys/types.h>

#include <string>

#include "absl/strings/string_view.h"

namespace kiln::proto {

// `XDG_RUNTIME_DIR/kiln/kilnd.sock` when `xdg_runtime_dir` is an absolute
// path, else `/tmp/kiln-UID/kilnd.sock`. Pure: reads no environment.
std::string SocketPathFor(absl::string_view xdg_runtime_dir, uid_t uid);

// SocketPathFor($XDG_RUNTIME_DIR, getuid()).
std::string DefaultSocketPath();

// The gRPC target for DefaultSocketPath(): "unix:" followed by the path.
std::string DefaultAddress();

}  // namespace kiln::proto

#endif  // KILN_PROTO_DEFAULT_ADDRESS_H_
