// The commands of the `kiln` CLI. Each Register*() adds one command (or a
// group of them) to the app; main.cc calls every one. A command ends by
// returning normally (exit status 0) or by calling Exit(code).
//
// Exit statuses, the same for every command:
//   0  success
//   1  the input was invalid, the check failed, or the daemon is unreachable
//   2  usage error (bad flags or arguments)
#ifndef KILN_CLIENT_CLI_COMMANDS_H_
#define KILN_CLIENT_CLI_COMMANDS_H_

#include "CLI/CLI.hpp"

namespace kiln::cli {

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Ends the running command with exit status `code`, by throwing
// CLI::RuntimeError(code), which main() turns into the process's status.
[[noreturn]] inline void Exit(int code) { throw CLI::RuntimeError(code); }

// `kiln ir check|fmt|hash`: offline tile-IR tools (ir_commands.cc).
void RegisterIrCommands(CLI::App& app);

// `kiln status`: is a daemon running, and what can it do (status_command.cc).
void RegisterStatusCommand(CLI::App& app);
void RegisterCacheCommands(CLI::App& app);  // `kiln cache`: cache_commands.cc
// `kiln cache explain FILE`: hit or miss, and why (explain_command.cc); added
// to the `kiln cache` group.
void RegisterCacheExplain(CLI::App* cache_group);

// `kiln compile FILE`: compile one kernel offline (compile_command.cc).
void RegisterCompileCommand(CLI::App& app);

// `kiln tune FILE --shape ...`: autotune one kernel (tune_command.cc).
void RegisterTuneCommand(CLI::App& app);

}  // namespace kiln::cli

#endif  // KILN_CLIENT_CLI_COMMANDS_H_
