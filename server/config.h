// ServerConfig: every setting of kilnd, and the command-line flags that set
// them. Each flag is also a key of the TOML file given by --config (the long
// flag name without its dashes: `log-level = "debug"`); the command line wins
// over the file, the file over the defaults.
#ifndef KILN_SERVER_CONFIG_H_
#define KILN_SERVER_CONFIG_H_

#include <cstdint>
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
  // Serve Prometheus metrics (GET /metrics, plain HTTP) at "HOST:PORT";
  // empty: off (server/metrics_http.h).
  std::string metrics_address;
  // TLS on the TCP listener: PEM files of the server's certificate chain
  // and key; with tls_client_ca, clients must present a certificate it
  // signed (mutual TLS).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // A file holding the bearer token every TCP call must carry (the unix
  // socket is guarded by its file mode instead). Surrounding whitespace is
  // ignored.
  std::string auth_token_file;
  // Compile workers (0: one per core) and how many distinct compiles may be
  // queued or running at once.
  int compile_workers = 0;
  int max_queued_compiles = 256;
  // A compile running longer fails with DEADLINE_EXCEEDED.
  double compile_timeout_s = 600;
  // How long a failed compile's error is served without compiling again.
  double failed_compile_ttl_s = 10;
  // Largest request message accepted (bytes); larger ones get
  // RESOURCE_EXHAUSTED from gRPC.
  int max_request_bytes = 16 << 20;
  // Local cache size limit in MiB (0: none); least recently used kernels
  // are evicted past it.
  int64_t cache_max_mb = 0;
  // The shared remote tier: a Redis URL (redis://HOST:PORT/DB), the file
  // holding the cluster secret used to sign entries (at least 16 bytes),
  // and the key namespace. Off when redis_url is empty.
  std::string redis_url;
  std::string redis_secret_file;
  std::string redis_namespace = "kiln";
  // Cluster single-flight over the shared tier: seconds a compile lease
  // lasts unrenewed (how long the cluster waits for a daemon that died
  // mid-compile); 0 turns it off.
  double redis_compile_lease_s = 10;
  // Where the cache lives (default: cache/cache_dir.h).
  std::string cache_dir;
  // Use a cache directory that other users can write to (refused otherwise:
  // whoever can write the index can make kilnd serve their code).
  bool allow_shared_cache_dir = false;
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
