// RedisStorage: the Redis backend of RemoteStorage, on hiredis.
//
// Keeps a small pool of connections; a connection that saw any error is
// closed, never reused. Every command runs under the operation timeout.
// Follows MOVED/ASK redirections, so one key per entry works against a Redis
// Cluster given any node's address. SIGPIPE from a dead server is blocked
// and swallowed around each command, never delivered to the process.
#ifndef KILN_CACHE_REDIS_STORAGE_H_
#define KILN_CACHE_REDIS_STORAGE_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "cache/redis_url.h"
#include "cache/remote_storage.h"

struct redisContext;

namespace kiln::cache {

class RedisStorage : public RemoteStorage {
 public:
  RedisStorage(RedisUrl url, RemoteStorageOptions options);
  ~RedisStorage() override;

  absl::StatusOr<std::optional<std::string>> Get(
      absl::string_view key) override;
  absl::Status Put(absl::string_view key, absl::string_view value) override;
  absl::Status Remove(absl::string_view key) override;
  absl::StatusOr<bool> SetIfAbsent(absl::string_view key,
                                   absl::string_view value, absl::Duration ttl,
                                   std::string* holder) override;
  absl::StatusOr<bool> ReplaceIf(absl::string_view key,
                                 absl::string_view expected,
                                 absl::string_view value,
                                 absl::Duration ttl) override;
  std::string Describe() const override { return url_.Redacted(); }

 private:
  struct Reply;
  // Runs one command (argv form) against the node `node` ("" = the URL's
  // address, else "host:port" from a redirection) and follows up to two
  // redirections.
  absl::StatusOr<Reply> Command(const std::vector<absl::string_view>& argv);
  absl::StatusOr<Reply> CommandOn(const std::string& node, bool asking,
                                  const std::vector<absl::string_view>& argv);
  absl::StatusOr<redisContext*> Connect(const std::string& node);
  redisContext* TakeIdle(const std::string& node);
  void ReturnIdle(const std::string& node, redisContext* c);

  const RedisUrl url_;
  const RemoteStorageOptions options_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::vector<redisContext*>> idle_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace kiln::cache

#endif  // KILN_CACHE_REDIS_STORAGE_H_
