// Where the cache lives by default, shared by the daemon and the CLI.
#ifndef KILN_CACHE_CACHE_DIR_H_
#define KILN_CACHE_CACHE_DIR_H_

#include <string>

namespace kiln::cache {

// $XDG_CACHE_HOME/kiln if XDG_CACHE_HOME is an absolute path, else
// $HOME/.cache/kiln (HOME from the environment, else the password
// database). Does not create anything.
std::string DefaultCacheDirectory();

}  // namespace kiln::cache

#endif  // KILN_CACHE_CACHE_DIR_H_
