#include "client/cli/daemon_compile.h"

#include <sys/stat.h>

#include <fstream>
#include <iomanip>
#include <iostream>

#include "absl/strings/str_cat.h"
#include "client/cli/commands.h"
#include "client/embedded.h"
#include "proto/default_address.h"

namespace kiln::cli {

void PrintIndented(const std::string& text) {
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    std::cout << "  " << text.substr(start, end - start) << "\n";
    start = end + 1;
  }
}

std::unique_ptr<client::Client> DaemonForCompile(const std::string& command,
                                                 const std::string& address) {
  const bool explicit_address = !address.empty();
  if (!explicit_address) {
    // Quietly in process when no daemon socket exists.
    struct stat st;
    if (stat(proto::DefaultSocketPath().c_str(), &st) != 0) return nullptr;
  }
  absl::StatusOr<std::unique_ptr<client::Client>> client =
      client::Client::Connect(address, {.timeout = absl::Milliseconds(500)});
  if (client.ok() && (*client)->Health(absl::Seconds(2)).ok()) {
    return *std::move(client);
  }
  if (explicit_address) {
    std::cerr << command << ": error: "
              << (client.ok() ? "kilnd is not serving"
                              : std::string(client.status().message()))
              << "\n";
    Exit(kExitFailure);
  }
  return nullptr;  // a stale socket: compile in process
}

void AddDaemonOptions(CLI::App* cmd, const std::string& verb,
                      std::string* daemon, bool* local) {
  cmd->add_option("--daemon", *daemon,
                  verb +
                      " through the kilnd at this address (unix:PATH, /PATH "
                      "or HOST:PORT). By default through the kilnd on the "
                      "default socket when one is running, else in process");
  cmd->add_flag("--local", *local,
                verb + " in this process even when kilnd is running")
      ->excludes("--daemon");
}

std::unique_ptr<client::Client> DaemonOrInProcess(const std::string& command,
                                                  const std::string& address,
                                                  bool local,
                                                  std::string* via) {
  std::unique_ptr<client::Client> client;
  if (!local) client = DaemonForCompile(command, address);
  if (client != nullptr) {
    *via = absl::StrCat("kilnd at ", client->target());
    return client;
  }
  absl::StatusOr<std::unique_ptr<client::Client>> embedded = client::Embedded();
  if (!embedded.ok()) {
    std::cerr << command << ": error: " << embedded.status().message() << "\n";
    Exit(kExitFailure);
  }
  *via = "this process";
  return *std::move(embedded);
}

void CompileThroughDaemon(client::Client& daemon, const std::string& text,
                          const std::string& file, const std::string& kernel,
                          const std::string& target,
                          const std::map<std::string, int64_t>& bindings,
                          bool emit_metadata, const std::string& output) {
  client::KernelRequest request;
  request.ir_text = text;
  request.kernel = kernel;
  request.target = target;
  request.bindings = bindings;
  request.filename = file;
  absl::StatusOr<kiln::v1::CompileResponse> response =
      daemon.CompileRaw(request);
  if (!response.ok()) {
    std::cerr << response.status().message() << "\n";
    Exit(kExitFailure);
  }
  const kiln::v1::KernelHandle& k = response->kernel();
  if (emit_metadata) {
    std::cout << k.metadata();
  } else {
    std::string tier = kiln::v1::Tier_Name(response->tier());
    tier = tier.substr(tier.find('_') + 1);
    for (char& c : tier) c = static_cast<char>(std::tolower(c));
    std::cout << "kernel   " << k.kernel_name() << "\n"
              << "target   " << k.target() << "\n"
              << "key      " << k.key() << "\n"
              << "binary   " << k.binary().size() << " bytes\n"
              << "via      kilnd at " << daemon.target() << "\n"
              << std::fixed << std::setprecision(1) << "tier     " << tier;
    if (response->tier() == kiln::v1::TIER_COMPILED) {
      std::cout << " (" << response->compile_ms() << " ms)";
    }
    std::cout << "\nmetadata\n";
    PrintIndented(k.metadata());
  }
  if (!output.empty()) {
    std::ofstream out(output, std::ios::binary | std::ios::trunc);
    out.write(k.binary().data(),
              static_cast<std::streamsize>(k.binary().size()));
    out.close();
    if (!out) {
      std::cerr << output << ": error: cannot write the binary\n";
      Exit(kExitFailure);
    }
  }
}

}  // namespace kiln::cli
