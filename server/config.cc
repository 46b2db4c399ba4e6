#include "server/config.h"

#include "CLI/CLI.hpp"
#include "cache/cache_dir.h"
#include "proto/default_address.h"

namespace kiln::server {

ServerConfig ServerConfig::Defaults() {
  ServerConfig config;
  config.socket_path = proto::DefaultSocketPath();
  config.cache_dir = cache::DefaultCacheDirectory();
  return config;
}

void AddServerFlags(CLI::App& app, ServerConfig* config) {
  app.set_config("--config", "",
                 "TOML file of settings: each key is a flag's long name "
                 "(log-level = \"debug\"); flags given on the command line "
                 "win");
  app.allow_config_extras(CLI::config_extras_mode::error);

  app.add_option("--socket", config->socket_path,
                 "Unix socket to listen on (mode 0660; its directory is "
                 "created)")
      ->capture_default_str();
  app.add_option("--listen-tcp", config->listen_tcp,
                 "Also listen on TCP at HOST:PORT (PORT 0 picks a free one). "
                 "Needs TLS (--tls-cert/--tls-key) or a bearer token "
                 "(--auth-token-file), or a loopback HOST with "
                 "--insecure-loopback");
  app.add_option("--metrics-address", config->metrics_address,
                 "Serve Prometheus metrics (GET /metrics over plain HTTP) at "
                 "HOST:PORT (PORT 0 picks a free one): counters only, no "
                 "kernels or requests");
  app.add_flag("--insecure-loopback", config->insecure_loopback,
               "Accept plaintext TCP on a loopback address: any local user "
               "can then reach kilnd");
  app.add_option("--tls-cert", config->tls_cert,
                 "PEM file of the TCP listener's certificate chain")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-key", config->tls_key,
                 "PEM file of the TCP listener's private key")
      ->check(CLI::ExistingFile);
  app.add_option("--tls-client-ca", config->tls_client_ca,
                 "PEM file of the CA that signs client certificates: TCP "
                 "clients must then present one (mutual TLS)")
      ->check(CLI::ExistingFile);
  app.add_option("--auth-token-file", config->auth_token_file,
                 "File holding the bearer token every TCP call must carry "
                 "(authorization: Bearer TOKEN)")
      ->check(CLI::ExistingFile);
  app.add_option("--compile-workers", config->compile_workers,
                 "Compile worker threads (0: one per core)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--max-queued-compiles", config->max_queued_compiles,
                 "Distinct compiles queued or running at once; more are "
                 "refused with RESOURCE_EXHAUSTED")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--compile-timeout", config->compile_timeout_s,
                 "Seconds a compile may take before it fails with "
                 "DEADLINE_EXCEEDED")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  app.add_option("--failed-compile-ttl", config->failed_compile_ttl_s,
                 "Seconds a failed compile's error answers requests for the "
                 "same kernel without compiling it again (0: off)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--max-request-bytes", config->max_request_bytes,
                 "Largest request accepted, in bytes")
      ->check(CLI::Range(1024, 1 << 30))
      ->capture_default_str();
  app.add_option("--cache-max-mb", config->cache_max_mb,
                 "Local cache size limit in MiB; least recently used kernels "
                 "are evicted past it (0: no limit)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--redis-url", config->redis_url,
                 "Shared cache tier: redis://HOST[:PORT][/DB] or "
                 "redis+unix:///PATH (off when empty)");
  app.add_option("--redis-secret-file", config->redis_secret_file,
                 "File holding the cluster secret that signs shared entries "
                 "(at least 16 bytes; needed with --redis-url)")
      ->check(CLI::ExistingFile);
  app.add_option("--redis-namespace", config->redis_namespace,
                 "Prefix of this cluster's keys in Redis")
      ->capture_default_str();
  app.add_option("--redis-compile-lease", config->redis_compile_lease_s,
                 "Seconds a compile lease in Redis lasts unrenewed: a miss is "
                 "compiled once in the cluster, and a daemon that dies "
                 "mid-compile is taken over after this long (0: every daemon "
                 "compiles its own misses)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--cache-dir", config->cache_dir,
                 "Directory of the kernel cache (created)")
      ->capture_default_str();
  app.add_flag("--allow-shared-cache-dir", config->allow_shared_cache_dir,
               "Use a cache directory (or index) that other users can write "
               "to; without it kilnd refuses one, since whoever can write "
               "the cache can make kilnd serve their code");
  app.add_option("--log-format", config->log_format, "Log format on stderr")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  app.add_option("--log-level", config->log_level, "Least severe level logged")
      ->check(CLI::IsMember(
          {"trace", "debug", "info", "warn", "error", "critical", "off"}))
      ->capture_default_str();
  app.add_option("--shutdown-timeout", config->shutdown_timeout_s,
                 "Seconds in-flight calls may take to finish after "
                 "SIGINT/SIGTERM before they are cancelled")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
}

}  // namespace kiln::server
