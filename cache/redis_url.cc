#include "cache/redis_url.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace kiln::cache {
namespace {

constexpr absl::string_view kTcp = "redis://";
constexpr absl::string_view kUnix = "redis+unix://";
constexpr absl::string_view kUnixShort = "redis+unix:";

absl::Status Bad(absl::string_view url, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "invalid remote cache URL \"", RedactRedisUrl(url), "\": ", why));
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool PercentDecode(absl::string_view in, std::string* out) {
  out->clear();
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out->push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = HexDigit(in[i + 1]), lo = HexDigit(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out->push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

bool ParseDb(absl::string_view text, int* db) {
  return absl::SimpleAtoi(text, db) && *db >= 0 && *db <= 100000;
}

}  // namespace

std::string RedactRedisUrl(absl::string_view url) {
  // The userinfo is everything between "://" and the last '@' before the
  // path; the password is what follows its first ':'.
  size_t scheme = url.find("://");
  if (scheme == absl::string_view::npos) return std::string(url);
  size_t start = scheme + 3;
  size_t path = url.find('/', start);
  absl::string_view authority = url.substr(
      start, path == absl::string_view::npos ? url.npos : path - start);
  size_t at = authority.rfind('@');
  if (at == absl::string_view::npos) {
    // redis+unix://:pw@/path has the '@' right before the path's '/'.
    at = url.find('@', start);
    if (at == absl::string_view::npos) return std::string(url);
    authority = url.substr(start, at - start);
  } else {
    authority = authority.substr(0, at);
  }
  // Without a ':' the whole userinfo is the password (redis://secret@host).
  size_t colon = authority.find(':');
  std::string user(colon == absl::string_view::npos
                       ? absl::string_view()
                       : authority.substr(0, colon));
  return absl::StrCat(url.substr(0, start), user, ":***@",
                      url.substr(start + authority.size() + 1));
}

absl::StatusOr<RedisUrl> RedisUrl::Parse(absl::string_view url) {
  RedisUrl out;
  absl::string_view rest;
  bool unix_socket = false;
  if (absl::StartsWith(url, kTcp)) {
    rest = url.substr(kTcp.size());
  } else if (absl::StartsWith(url, kUnix)) {
    rest = url.substr(kUnix.size());
    unix_socket = true;
  } else if (absl::StartsWith(url, kUnixShort)) {
    rest = url.substr(kUnixShort.size());
    unix_socket = true;
  } else if (absl::StartsWith(url, "rediss://")) {
    return Bad(url, "TLS (rediss://) is not supported by this build");
  } else {
    return Bad(url,
               "expected redis://HOST[:PORT][/DB] or "
               "redis+unix:///PATH[?db=DB]");
  }
  // Userinfo.
  size_t at = unix_socket ? rest.find("@/") : rest.find('@');
  if (!unix_socket) {
    size_t slash = rest.find('/');
    if (at != absl::string_view::npos && slash != absl::string_view::npos &&
        slash < at) {
      at = absl::string_view::npos;
    }
  }
  if (at != absl::string_view::npos) {
    absl::string_view userinfo = rest.substr(0, at);
    rest = rest.substr(at + 1);
    size_t colon = userinfo.find(':');
    absl::string_view user = userinfo.substr(0, colon);
    absl::string_view pass =
        colon == absl::string_view::npos ? "" : userinfo.substr(colon + 1);
    if (colon == absl::string_view::npos) {
      // "redis://secret@host" is the common shorthand for a password.
      pass = user;
      user = "";
    }
    if (!PercentDecode(user, &out.username) ||
        !PercentDecode(pass, &out.password)) {
      return Bad(url, "bad percent-encoding in the user or password");
    }
  }
  if (unix_socket) {
    size_t query = rest.find('?');
    absl::string_view path = rest.substr(0, query);
    if (path.empty() || path[0] != '/') {
      return Bad(url, "a unix socket URL needs an absolute path");
    }
    out.socket_path = std::string(path);
    out.port = 0;
    if (query != absl::string_view::npos) {
      absl::string_view q = rest.substr(query + 1);
      if (!absl::StartsWith(q, "db=") || !ParseDb(q.substr(3), &out.db)) {
        return Bad(url, "the only query parameter is db=N");
      }
    }
    return out;
  }
  size_t slash = rest.find('/');
  absl::string_view hostport = rest.substr(0, slash);
  if (slash != absl::string_view::npos) {
    absl::string_view db = rest.substr(slash + 1);
    if (!db.empty() && !ParseDb(db, &out.db)) {
      return Bad(url, "the path must be a database number");
    }
  }
  absl::string_view port;
  if (absl::StartsWith(hostport, "[")) {  // [::1]:6379
    size_t close = hostport.find(']');
    if (close == absl::string_view::npos) return Bad(url, "unclosed '['");
    out.host = std::string(hostport.substr(1, close - 1));
    absl::string_view after = hostport.substr(close + 1);
    if (!after.empty()) {
      if (after[0] != ':') return Bad(url, "junk after ']'");
      port = after.substr(1);
    }
  } else {
    size_t colon = hostport.rfind(':');
    out.host = std::string(hostport.substr(0, colon));
    if (colon != absl::string_view::npos) port = hostport.substr(colon + 1);
  }
  if (out.host.empty()) return Bad(url, "missing host");
  if (!port.empty() && (!absl::SimpleAtoi(port, &out.port) || out.port <= 0 ||
                        out.port > 65535)) {
    return Bad(url, "bad port");
  }
  return out;
}

std::string RedisUrl::Redacted() const {
  std::string auth;
  if (!password.empty())
    auth = absl::StrCat(username, ":***@");
  else if (!username.empty())
    auth = absl::StrCat(username, "@");
  if (!socket_path.empty()) {
    return absl::StrCat("redis+unix://", auth, socket_path,
                        db != 0 ? absl::StrCat("?db=", db) : "");
  }
  const bool v6 = host.find(':') != std::string::npos;
  return absl::StrCat("redis://", auth, v6 ? "[" : "", host, v6 ? "]" : "", ":",
                      port, "/", db);
}

}  // namespace kiln::cache
