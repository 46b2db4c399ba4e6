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
                 "No TLS yet: only a loopback HOST, and only with "
                 "--insecure-loopback");
  app.add_flag("--insecure-loopback", config->insecure_loopback,
               "Accept plaintext TCP on a loopback address: any local user "
               "can then reach kilnd");
  app.add_option("--cache-dir", config->cache_dir,
                 "Directory of the kernel cache (created)")
      ->capture_default_str();
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
