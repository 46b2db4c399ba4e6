// Reading tile-IR source files for the CLI's offline commands, with the
// language's size limit (compiler::kMaxSourceBytes) enforced before parsing.
#ifndef KILN_CLIENT_CLI_SOURCE_FILE_H_
#define KILN_CLIENT_CLI_SOURCE_FILE_H_

#include <string>

#include "absl/status/statusor.h"

namespace kiln::cli {

// The whole content of `path`. Errors (their messages do not repeat the
// path, so callers print `PATH: error: MESSAGE`): NotFound for a missing
// file, PermissionDenied, FailedPrecondition for a directory,
// ResourceExhausted for a file over `max_bytes`, Internal for a failed read.
absl::StatusOr<std::string> ReadSourceFile(const std::string& path,
                                           size_t max_bytes);

}  // namespace kiln::cli

#endif  // KILN_CLIENT_CLI_SOURCE_FILE_H_
