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

#include <functional>
#include <string>
#include <vector>

#include "CLI/CLI.hpp"
#include "absl/status/statusor.h"
#include "cache/digest.h"
#include "cache/local_store.h"

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
// The cache keys a prewarm manifest resolves to in a store (manifest.h's
// LoadManifest and ManifestKeys), for `kiln cache export --manifest`; a
// parameter so that the cache commands build without the compiler.
using ManifestResolver =
    std::function<absl::StatusOr<std::vector<cache::Digest>>(
        const std::string& manifest, const std::string& target,
        cache::LocalStore& store, std::vector<std::string>* missing)>;

// `kiln cache`: cache_commands.cc. Without a resolver, export --manifest
// says it is not available.
void RegisterCacheCommands(CLI::App& app, ManifestResolver resolver = nullptr);
// `kiln cache explain FILE`: hit or miss, and why (explain_command.cc); added
// to the `kiln cache` group.
void RegisterCacheExplain(CLI::App* cache_group);

// `kiln compile FILE`: compile one kernel offline (compile_command.cc).
void RegisterCompileCommand(CLI::App& app);

// `kiln tune FILE --shape ...`: autotune one kernel (tune_command.cc).
void RegisterTuneCommand(CLI::App& app);

// `kiln prewarm MANIFEST`: compile and tune a manifest's kernels
// (prewarm_command.cc).
void RegisterPrewarmCommand(CLI::App& app);

// The resolver of `kiln cache export --manifest` (manifest.cc).
ManifestResolver ManifestKeyResolver();

}  // namespace kiln::cli

#endif  // KILN_CLIENT_CLI_COMMANDS_H_
