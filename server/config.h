// ServerConfig: every setting of kilnd, and the command-line flags that set
// them. Each flag is also a key of the TOML file given by --config (the long
// flag name without its dashes: `log-level = "debug"`); the command line wins
// over the file, the file over the defaults.
#ifndef KILN_SERVER_CONFIG_H_
#define KILN_SERVER_CONFIG_H_

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace kiln::server {

struct ServerConfig {
  // Unix socket to listen on (see proto/default_address.h for the default).
  std::string socket_path;
  // Optional TCP address, "HOST:PORT" (loopback only, see listen_address.h).
  std::string listen_tcp;
  // Accept plaintext TCP on a loopback address.
  bool insecure_loopback = false;
  // Where the cache lives (default: cache/cache_dir.h).
  std::string cache_dir;
  std::string log_format = "text";  // "text" or "json"
  std::string log_level = "info";   // spdlog level name
  // On SIGINT/SIGTERM, how long in-flight calls may run before being
  // cancelled.
  double shutdown_timeout_s = 10;

  // The defaults, with the paths taken from the environment (XDG variables,
  // HOME, the user id).
  static ServerConfig Defaults();
};

// Adds kilnd's flags (and --config) to `app`, each writing into `*config`,
// which must outlive parsing. Unknown keys in the config file are errors.
void AddServerFlags(CLI::App& app, ServerConfig* config);

}  // namespace kiln::server

#endif  // KILN_SERVER_CONFIG_H_
