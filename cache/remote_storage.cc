#include "cache/remote_storage.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "cache/redis_storage.h"
#include "cache/redis_url.h"
#include "cache/status_macros.h"

namespace kiln::cache {

absl::StatusOr<bool> RemoteStorage::SetIfAbsent(absl::string_view,
                                                absl::string_view,
                                                absl::Duration, std::string*) {
  return absl::UnimplementedError(
      absl::StrCat(Describe(), " has no conditional set"));
}

absl::StatusOr<bool> RemoteStorage::ReplaceIf(absl::string_view,
                                              absl::string_view,
                                              absl::string_view,
                                              absl::Duration) {
  return absl::UnimplementedError(
      absl::StrCat(Describe(), " has no conditional replace"));
}

absl::StatusOr<std::unique_ptr<RemoteStorage>> CreateRemoteStorage(
    absl::string_view url, const RemoteStorageOptions& options) {
  if (absl::StartsWith(url, "redis://") ||
      absl::StartsWith(url, "redis+unix:") ||
      absl::StartsWith(url, "rediss://")) {
    CACHE_ASSIGN_OR_RETURN(RedisUrl parsed, RedisUrl::Parse(url));
    return std::make_unique<RedisStorage>(std::move(parsed), options);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported remote cache URL \"", RedactRedisUrl(url),
      "\": expected redis://HOST[:PORT][/DB] or redis+unix:///PATH"));
}

}  // namespace kiln::cache
