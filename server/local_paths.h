// Creating the directories kilnd keeps its files in (the socket's, the
// cache's). The default locations live with their owners:
// proto/default_address.h and cache/cache_dir.h.
#ifndef KILN_SERVER_LOCAL_PATHS_H_
#define KILN_SERVER_LOCAL_PATHS_H_

#include <sys/types.h>

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace kiln::server {

// `XDG_CACHE_HOME/kiln` when `xdg_cache_home` is absolute, else
// `HOME/.cache/kiln`. Pure: reads no environment.
std::string CacheDirFor(absl::string_view xdg_cache_home,
                        absl::string_view home);

// CacheDirFor($XDG_CACHE_HOME, $HOME), with the password database's home
// directory when HOME is unset.
std::string DefaultCacheDir();

// `path` without its last component: "/a/b/c" -> "/a/b", "/a" -> "/",
// "name" -> ".".
std::string ParentDirectory(absl::string_view path);

// Creates `path` and every missing parent with permission bits `mode` (the
// umask applies), like `mkdir -p`. OK when it already is a directory;
// FailedPrecondition when it or a parent exists and is not a directory;
// PermissionDenied or Internal (with strerror's text) when mkdir fails.
absl::Status MakeDirectories(const std::string& path, mode_t mode);

}  // namespace kiln::server

#endif  // KILN_SERVER_LOCAL_PATHS_H_
