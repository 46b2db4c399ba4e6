// kilnd: the Kiln compile daemon. Parses flags and the config file, sets up
// logging, starts the Daemon, and shuts it down gracefully on SIGINT/SIGTERM.
#include <cstdio>
#include <cstring>

#include "CLI/CLI.hpp"
#include "server/capabilities.h"
#include "server/config.h"
#include "server/daemon.h"
#include "server/logging.h"
#include "server/shutdown_signals.h"
#include "spdlog/spdlog.h"

int main(int argc, char** argv) {
  // First, before gRPC starts threads: they inherit the blocked signals.
  if (absl::Status status = kiln::server::BlockShutdownSignals();
      !status.ok()) {
    std::fprintf(stderr, "kilnd: %s\n", status.ToString().c_str());
    return 1;
  }

  CLI::App app("kilnd: the Kiln compile daemon", "kilnd");
  kiln::server::ServerConfig config = kiln::server::ServerConfig::Defaults();
  kiln::server::AddServerFlags(app, &config);
  app.set_version_flag("--version", kiln::server::ServerVersion());
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }

  if (absl::Status status =
          kiln::server::SetUpLogging(config.log_format, config.log_level);
      !status.ok()) {
    std::fprintf(stderr, "kilnd: %s\n", status.ToString().c_str());
    return 2;
  }

  absl::StatusOr<std::unique_ptr<kiln::server::Daemon>> daemon =
      kiln::server::Daemon::Start(config);
  if (!daemon.ok()) {
    spdlog::error("{}", daemon.status().ToString());
    return 1;
  }
  int signal_number = kiln::server::WaitForShutdownSignal();
  spdlog::info("{}: draining in-flight calls (up to {}s)",
               strsignal(signal_number), config.shutdown_timeout_s);
  (*daemon)->Shutdown(absl::Seconds(config.shutdown_timeout_s));
  spdlog::info("stopped");
  return 0;
}
