// Embedded mode: a kiln::Client whose compiler and cache run in the caller's
// process, with no daemon. Same API and answers as a Client connected to
// kilnd (both call the same service code, server/service_core.h); for
// single-process users, notebooks and tests. Links the compiler (LLVM) and
// the cache: link kiln::client_embedded for it.
#ifndef KILN_CLIENT_EMBEDDED_H_
#define KILN_CLIENT_EMBEDDED_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "client/client.h"

namespace kiln::client {

struct EmbeddedOptions {
  // The cache directory; empty: $XDG_CACHE_HOME/kiln or ~/.cache/kiln (the
  // daemon's default, so both share kernels).
  std::string cache_dir;
  // Compile worker threads; 0: one per core.
  int worker_threads = 0;
};

// Opens (creating if needed) the cache and starts the compile workers.
// Errors: those of opening the cache directory.
absl::StatusOr<std::unique_ptr<Client>> Embedded(EmbeddedOptions options = {});

}  // namespace kiln::client

namespace kiln {
using client::Embedded;
using client::EmbeddedOptions;
}  // namespace kiln

#endif  // KILN_CLIENT_EMBEDDED_H_
