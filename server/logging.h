// Logging set-up for kilnd: spdlog's default logger writing to stderr, as
// human-readable text or as one JSON object per line (for log collectors).
#ifndef KILN_SERVER_LOGGING_H_
#define KILN_SERVER_LOGGING_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln::server {

// Replaces spdlog's default logger. `format` is "text" or "json"; `level` one
// of "trace", "debug", "info", "warn", "error", "critical", "off".
// InvalidArgument for anything else (the logger is then left unchanged).
// A JSON line looks like
//   {"time":"2024-05-01T12:00:00.123+00:00","level":"info","msg":"..."}
absl::Status SetUpLogging(absl::string_view format, absl::string_view level);

// `text` escaped for use inside a JSON string (quotes, backslashes, control
// characters; bytes >= 0x80 are passed through).
std::string JsonEscape(absl::string_view text);

}  // namespace kiln::server

#endif  // KILN_SERVER_LOGGING_H_
