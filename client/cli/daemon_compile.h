// `kiln compile` through a running kilnd: the daemon compiles (or serves
// from its cache) and the CLI prints the handle it got.
#ifndef KILN_CLIENT_CLI_DAEMON_COMPILE_H_
#define KILN_CLIENT_CLI_DAEMON_COMPILE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "CLI/CLI.hpp"
#include "client/client.h"

namespace kiln::cli {

// Prints `text` line by line, each line indented by two spaces.
void PrintIndented(const std::string& text);

// The daemon to compile through: `address` when given (an unreachable one
// is an error: exits 1, naming `command`), else the default socket when a
// daemon answers there within half a second, else nullptr (compile in process).
std::unique_ptr<client::Client> DaemonForCompile(const std::string& command,
                                                 const std::string& address);

// Adds --daemon ADDR and --local (excluding each other) to `cmd`; `verb`
// ("Tune") begins their help.
void AddDaemonOptions(CLI::App* cmd, const std::string& verb,
                      std::string* daemon, bool* local);

// The client a command works through: the daemon as DaemonForCompile finds
// it (unless `local`), else the service in this process. `via` gets "kilnd
// at ADDR" or "this process". Exits 1, naming `command` ("kiln tune"), when
// neither can be had.
std::unique_ptr<client::Client> DaemonOrInProcess(const std::string& command,
                                                  const std::string& address,
                                                  bool local, std::string* via);

// Compiles `text` through `daemon`, prints the summary (or the metadata
// with `emit_metadata`), writes the binary to `output` if not empty. Exits
// 1 with the daemon's message on failure.
void CompileThroughDaemon(client::Client& daemon, const std::string& text,
                          const std::string& file, const std::string& kernel,
                          const std::string& target,
                          const std::map<std::string, int64_t>& bindings,
                          bool emit_metadata, const std::string& output);

}  // namespace kiln::cli

#endif  // KILN_CLIENT_CLI_DAEMON_COMPILE_H_
