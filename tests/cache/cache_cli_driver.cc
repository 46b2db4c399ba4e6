// A test-only `kiln` with just the cache commands, so the cache tests do not
// depend on the rest of the CLI's build. The exit-status mapping is the one
// of client/cli/main.cc.
#include "CLI/CLI.hpp"
#include "client/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app("kiln (cache commands only, for tests)", "kiln");
  app.require_subcommand(1);
  kiln::cli::RegisterCacheCommands(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kiln::cli::kExitOk : kiln::cli::kExitUsage;
  }
  return kiln::cli::kExitOk;
}
