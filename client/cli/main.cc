// kiln: the command-line tool of Kiln. Registers every command, parses the
// command line and turns the outcome into an exit status (see commands.h).
#include "CLI/CLI.hpp"
#include "client/cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app("kiln: tile-IR tools and the Kiln daemon's command line",
               "kiln");
  app.set_version_flag("--version", KILN_VERSION);
  app.require_subcommand(1);

  kiln::cli::RegisterIrCommands(app);
  kiln::cli::RegisterStatusCommand(app);
  kiln::cli::RegisterCacheCommands(app, kiln::cli::ManifestKeyResolver());
  kiln::cli::RegisterCacheExplain(app.get_subcommand("cache"));
  kiln::cli::RegisterCompileCommand(app);
  kiln::cli::RegisterTuneCommand(app);
  kiln::cli::RegisterPrewarmCommand(app);
  // More command groups register here, one line each.

  try {
    app.parse(argc, argv);
  } catch (const CLI::RuntimeError& e) {
    return e.get_exit_code();  // a command's kiln::cli::Exit()
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every real parse error is a usage error.
    return app.exit(e) == 0 ? kiln::cli::kExitOk : kiln::cli::kExitUsage;
  }
  return kiln::cli::kExitOk;
}
