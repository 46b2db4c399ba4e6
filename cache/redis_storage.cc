#include "cache/redis_storage.h"

#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cerrno>
#include <ctime>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "cache/status_macros.h"

namespace kiln::cache {
namespace {

// hiredis writes with write(2), so a server that went away raises SIGPIPE,
// which would kill the daemon. Block it on this thread for the duration of a
// command and discard one raised meanwhile; the process's disposition is
// left alone.
class SigpipeGuard {
 public:
  SigpipeGuard() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeGuard() {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const struct timespec zero = {0, 0};
        sigtimedwait(&pipe_, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
  bool was_pending_ = false;
};

bool IsTimeout(int err, int saved_errno) {
  return err == REDIS_ERR_IO &&
         (saved_errno == EAGAIN || saved_errno == EWOULDBLOCK ||
          saved_errno == ETIMEDOUT || saved_errno == EINPROGRESS);
}

}  // namespace

struct RedisStorage::Reply {
  int type = 0;
  std::string str;
  long long integer = 0;
};

RedisStorage::RedisStorage(RedisUrl url, RemoteStorageOptions options)
    : url_(std::move(url)), options_(options) {}

RedisStorage::~RedisStorage() {
  absl::MutexLock lock(&mu_);
  for (auto& [node, contexts] : idle_) {
    for (redisContext* c : contexts) redisFree(c);
  }
}

redisContext* RedisStorage::TakeIdle(const std::string& node) {
  absl::MutexLock lock(&mu_);
  auto it = idle_.find(node);
  if (it == idle_.end() || it->second.empty()) return nullptr;
  redisContext* c = it->second.back();
  it->second.pop_back();
  return c;
}

void RedisStorage::ReturnIdle(const std::string& node, redisContext* c) {
  absl::MutexLock lock(&mu_);
  std::vector<redisContext*>& pool = idle_[node];
  if (pool.size() < 8) {
    pool.push_back(c);
  } else {
    redisFree(c);
  }
}

absl::StatusOr<redisContext*> RedisStorage::Connect(const std::string& node) {
  const struct timeval connect_timeout =
      absl::ToTimeval(options_.connect_timeout);
  redisContext* c = nullptr;
  std::string where;
  if (node.empty() && !url_.socket_path.empty()) {
    c = redisConnectUnixWithTimeout(url_.socket_path.c_str(), connect_timeout);
    where = url_.Redacted();
  } else {
    std::string host = url_.host;
    int port = url_.port;
    if (!node.empty()) {
      size_t colon = node.rfind(':');
      host = node.substr(0, colon);
      if (colon == std::string::npos ||
          !absl::SimpleAtoi(node.substr(colon + 1), &port)) {
        return absl::UnavailableError(
            absl::StrCat("redis: bad redirection target ", node));
      }
    }
    c = redisConnectWithTimeout(host.c_str(), port, connect_timeout);
    where = node.empty() ? url_.Redacted() : absl::StrCat("redis node ", node);
  }
  const int saved_errno = errno;
  if (c == nullptr) {
    return absl::UnavailableError(absl::StrCat(where, ": out of memory"));
  }
  if (c->err) {
    std::string message = absl::StrCat(where, ": cannot connect: ", c->errstr);
    const bool timeout = IsTimeout(c->err, saved_errno);
    redisFree(c);
    return timeout ? absl::DeadlineExceededError(message)
                   : absl::UnavailableError(message);
  }
  const struct timeval op_timeout = absl::ToTimeval(options_.operation_timeout);
  redisSetTimeout(c, op_timeout);
  auto setup = [&](std::vector<std::string> argv,
                   absl::string_view what) -> absl::Status {
    std::vector<const char*> ptrs;
    std::vector<size_t> lens;
    for (const std::string& a : argv) {
      ptrs.push_back(a.data());
      lens.push_back(a.size());
    }
    SigpipeGuard guard;
    auto* reply = static_cast<redisReply*>(redisCommandArgv(
        c, static_cast<int>(argv.size()), ptrs.data(), lens.data()));
    absl::Status status;
    if (reply == nullptr) {
      status = absl::UnavailableError(
          absl::StrCat(where, ": ", what, " failed: ", c->errstr));
    } else if (reply->type == REDIS_REPLY_ERROR) {
      // The server's message names the problem, never the password.
      status = absl::UnavailableError(absl::StrCat(
          where, ": ", what, " failed: ", std::string(reply->str, reply->len)));
    }
    if (reply != nullptr) freeReplyObject(reply);
    return status;
  };
  absl::Status status;
  if (!url_.password.empty()) {
    status = url_.username.empty()
                 ? setup({"AUTH", url_.password}, "AUTH")
                 : setup({"AUTH", url_.username, url_.password}, "AUTH");
  }
  if (status.ok() && url_.db != 0) {
    status = setup({"SELECT", absl::StrCat(url_.db)}, "SELECT");
  }
  if (!status.ok()) {
    redisFree(c);
    return status;
  }
  return c;
}

absl::StatusOr<RedisStorage::Reply> RedisStorage::CommandOn(
    const std::string& node, bool asking,
    const std::vector<absl::string_view>& argv) {
  redisContext* c = TakeIdle(node);
  const bool reused = c != nullptr;
  if (c == nullptr) {
    CACHE_ASSIGN_OR_RETURN(c, Connect(node));
  }
  std::vector<const char*> ptrs;
  std::vector<size_t> lens;
  for (absl::string_view a : argv) {
    ptrs.push_back(a.data());
    lens.push_back(a.size());
  }
  redisReply* reply = nullptr;
  int saved_errno = 0;
  {
    SigpipeGuard guard;
    if (asking) {
      auto* ok = static_cast<redisReply*>(redisCommand(c, "ASKING"));
      if (ok != nullptr) freeReplyObject(ok);
    }
    reply = static_cast<redisReply*>(redisCommandArgv(
        c, static_cast<int>(argv.size()), ptrs.data(), lens.data()));
    saved_errno = errno;
  }
  const std::string where =
      node.empty() ? url_.Redacted() : absl::StrCat("redis node ", node);
  if (reply == nullptr) {
    const bool timeout = IsTimeout(c->err, saved_errno);
    std::string message =
        timeout ? absl::StrCat(where, ": no reply within ",
                               absl::FormatDuration(options_.operation_timeout))
                : absl::StrCat(where, ": ", c->errstr);
    redisFree(c);  // a connection that failed mid-command is unusable
    if (timeout) return absl::DeadlineExceededError(message);
    // An idle connection may have been closed by a server restart or an
    // idle timeout; that says nothing about the server now. Retry once on
    // a fresh connection. Every command we send may run twice: GET, SET and
    // DEL are idempotent, and the lease commands read a second run's answer
    // right (SetIfAbsent sees its own value; ReplaceIf a replaced value).
    if (reused) return CommandOn(node, asking, argv);
    return absl::UnavailableError(message);
  }
  Reply out;
  out.type = reply->type;
  out.integer = reply->integer;
  if (reply->str != nullptr) out.str.assign(reply->str, reply->len);
  freeReplyObject(reply);
  ReturnIdle(node, c);
  return out;
}

absl::StatusOr<RedisStorage::Reply> RedisStorage::Command(
    const std::vector<absl::string_view>& argv) {
  std::string node;
  bool asking = false;
  for (int hop = 0; hop < 3; ++hop) {
    CACHE_ASSIGN_OR_RETURN(Reply reply, CommandOn(node, asking, argv));
    if (reply.type != REDIS_REPLY_ERROR) return reply;
    // Redis Cluster: "MOVED <slot> <host:port>" or "ASK <slot> <host:port>".
    std::vector<std::string> parts = absl::StrSplit(reply.str, ' ');
    if (parts.size() == 3 && (parts[0] == "MOVED" || parts[0] == "ASK")) {
      node = parts[2];
      asking = parts[0] == "ASK";
      continue;
    }
    return absl::UnavailableError(
        absl::StrCat(node.empty() ? url_.Redacted() : node, ": ", reply.str));
  }
  return absl::UnavailableError(
      absl::StrCat(url_.Redacted(), ": too many cluster redirections"));
}

absl::StatusOr<std::optional<std::string>> RedisStorage::Get(
    absl::string_view key) {
  CACHE_ASSIGN_OR_RETURN(Reply reply, Command({"GET", key}));
  if (reply.type == REDIS_REPLY_NIL) return std::nullopt;
  if (reply.type != REDIS_REPLY_STRING) {
    return absl::UnavailableError(
        absl::StrCat(url_.Redacted(), ": unexpected reply type to GET"));
  }
  return std::move(reply.str);
}

absl::Status RedisStorage::Put(absl::string_view key, absl::string_view value) {
  absl::StatusOr<Reply> reply;
  if (options_.ttl > absl::ZeroDuration()) {
    const std::string ms =
        absl::StrCat(absl::ToInt64Milliseconds(options_.ttl));
    reply = Command({"SET", key, value, "PX", ms});
  } else {
    reply = Command({"SET", key, value});
  }
  return reply.status();
}

absl::Status RedisStorage::Remove(absl::string_view key) {
  return Command({"DEL", key}).status();
}

namespace {

std::string Milliseconds(absl::Duration ttl) {
  return absl::StrCat(std::max<int64_t>(1, absl::ToInt64Milliseconds(ttl)));
}

// KEYS[1] = the key; ARGV = expected, new value ("" deletes), expiry in ms.
constexpr char kReplaceIfScript[] =
    "if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end "
    "if ARGV[2] == '' then redis.call('DEL', KEYS[1]) "
    "else redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3]) end "
    "return 1";

}  // namespace

absl::StatusOr<bool> RedisStorage::SetIfAbsent(absl::string_view key,
                                               absl::string_view value,
                                               absl::Duration ttl,
                                               std::string* holder) {
  const std::string ms = Milliseconds(ttl);
  CACHE_ASSIGN_OR_RETURN(Reply set,
                         Command({"SET", key, value, "NX", "PX", ms}));
  if (set.type == REDIS_REPLY_STATUS) return true;  // "OK"
  if (set.type != REDIS_REPLY_NIL) {
    return absl::UnavailableError(
        absl::StrCat(url_.Redacted(), ": unexpected reply type to SET NX"));
  }
  CACHE_ASSIGN_OR_RETURN(std::optional<std::string> current, Get(key));
  if (!current.has_value()) {
    // Expired between the two commands: try once more.
    CACHE_ASSIGN_OR_RETURN(Reply again,
                           Command({"SET", key, value, "NX", "PX", ms}));
    if (again.type == REDIS_REPLY_STATUS) return true;
    CACHE_ASSIGN_OR_RETURN(current, Get(key));
  }
  if (current.has_value() && *current == value) return true;
  if (holder != nullptr) *holder = current.value_or("");
  return false;
}

absl::StatusOr<bool> RedisStorage::ReplaceIf(absl::string_view key,
                                             absl::string_view expected,
                                             absl::string_view value,
                                             absl::Duration ttl) {
  const std::string ms = Milliseconds(ttl);
  CACHE_ASSIGN_OR_RETURN(Reply reply, Command({"EVAL", kReplaceIfScript, "1",
                                               key, expected, value, ms}));
  if (reply.type != REDIS_REPLY_INTEGER) {
    return absl::UnavailableError(
        absl::StrCat(url_.Redacted(), ": unexpected reply type to EVAL"));
  }
  return reply.integer == 1;
}

}  // namespace kiln::cache
