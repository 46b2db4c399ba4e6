// RedisUrl: where the shared Redis tier lives, parsed from a URL.
//
//   redis://[[USER]:PASSWORD@]HOST[:PORT][/DB]          (PORT 6379, DB 0)
//   redis+unix://[[USER]:PASSWORD@]/PATH/TO/SOCKET[?db=DB]
//   redis+unix:/PATH/TO/SOCKET
//
// USER and PASSWORD may be percent-encoded. The password never appears in
// Redacted(), in error messages or in logs; use Redacted() wherever the URL
// is shown.
#ifndef KILN_CACHE_REDIS_URL_H_
#define KILN_CACHE_REDIS_URL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace kiln::cache {

struct RedisUrl {
  std::string host;  // empty for a unix socket
  int port = 6379;
  std::string socket_path;  // set for redis+unix
  std::string username;     // empty: AUTH with the password alone
  std::string password;     // empty: no AUTH
  int db = 0;

  // InvalidArgument for an unknown scheme (rediss:// is refused: this build
  // has no TLS), a bad port or db, or a malformed URL. Messages quote the
  // URL with its password redacted.
  static absl::StatusOr<RedisUrl> Parse(absl::string_view url);

  // The URL with "***" in place of the password, e.g.
  // "redis://:***@cache.internal:6379/2".
  std::string Redacted() const;
};

// Replaces a password in any redis URL-looking string with "***", for text
// that did not come through RedisUrl (logs of raw configuration values).
std::string RedactRedisUrl(absl::string_view url);

}  // namespace kiln::cache

#endif  // KILN_CACHE_REDIS_URL_H_
