// A plain HTTP/1.1 request to 127.0.0.1:PORT, for tests of the metrics
// endpoint: the whole response (status line, headers and body) as text.
#ifndef KILN_TESTS_SUPPORT_HTTP_GET_H_
#define KILN_TESTS_SUPPORT_HTTP_GET_H_

#include <string>

#include "absl/status/statusor.h"

namespace kiln::testing {

// Sends `method path` and reads until the server closes the connection
// (5 s at most). Unavailable when nothing listens.
absl::StatusOr<std::string> HttpRequest(int port, const std::string& method,
                                        const std::string& path);

// The body of a response: what follows the first blank line.
std::string HttpBody(const std::string& response);

}  // namespace kiln::testing

#endif  // KILN_TESTS_SUPPORT_HTTP_GET_H_
