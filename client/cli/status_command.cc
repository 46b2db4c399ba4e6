// `kiln status`: whether a kilnd is running at an address, and what it can
// do (version, targets, GPUs, toolchains) and how its cache is doing,
// through the thin client library.
#include <iostream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "client/cli/commands.h"
#include "client/client.h"
#include "proto/default_address.h"

namespace kiln::cli {
namespace {

void PrintCapabilities(const std::string& target,
                       const kiln::v1::CapabilitiesResponse& caps) {
  std::vector<std::string> targets;
  for (const kiln::v1::Target& t : caps.targets()) targets.push_back(t.name());
  // A protobuf map iterates in no fixed order; print sorted.
  std::map<std::string, std::string> toolchains(
      caps.toolchain_versions().begin(), caps.toolchain_versions().end());
  std::cout << "kilnd " << caps.server_version() << " at " << target
            << ": serving\n"
            << "targets: " << absl::StrJoin(targets, " ") << "\n"
            << "toolchains: "
            << (toolchains.empty()
                    ? "none found"
                    : absl::StrJoin(toolchains, ", ", absl::PairFormatter(" ")))
            << "\n";
  if (caps.gpus_size() == 0) std::cout << "gpus: none\n";
  for (const kiln::v1::Gpu& gpu : caps.gpus()) {
    std::cout << "gpu " << gpu.index() << ": " << gpu.name() << " ("
              << gpu.target() << ", " << gpu.multiprocessors() << " SMs, "
              << (gpu.memory_bytes() >> 30) << " GiB), sku " << gpu.sku()
              << "\n";
  }
}

void PrintStats(const kiln::v1::StatsResponse& stats) {
  std::cout << "cache: " << stats.cache_entries() << " kernels, "
            << (stats.cache_disk_bytes() >> 10) << " KiB on disk\n"
            << "since start (" << static_cast<int64_t>(stats.uptime_seconds())
            << " s): " << stats.hits() << " hits (" << stats.memory_hits()
            << " from memory), " << stats.misses() << " misses, "
            << stats.compiles() << " compiles, " << stats.errors()
            << " errors, " << stats.active_compiles() << " compiling now\n";
  if (stats.cluster_waits() > 0) {
    std::cout << "cluster: " << stats.cluster_waits()
              << " waits for another daemon's compile: "
              << stats.cluster_served() << " served by it, "
              << stats.cluster_failures() << " failed there, "
              << stats.cluster_takeovers() << " taken over\n";
  }
}

}  // namespace

void RegisterStatusCommand(CLI::App& app) {
  auto address = std::make_shared<std::string>();
  CLI::App* status = app.add_subcommand(
      "status", "Check that kilnd is running and show what it can do");
  status->add_option("--address", *address,
                     "Daemon address: unix:PATH, /PATH or HOST:PORT "
                     "(default: " +
                         proto::DefaultAddress() + ")");
  status->callback([address] {
    absl::StatusOr<std::unique_ptr<client::Client>> client =
        client::Client::Connect(*address);
    if (!client.ok()) {
      std::cerr << "kiln: " << client.status().message()
                << "\nkiln: is kilnd running? Start it with "
                   "deploy/start-kilnd.sh (or build/server/kilnd).\n";
      Exit(client.status().code() == absl::StatusCode::kInvalidArgument
               ? kExitUsage
               : kExitFailure);
    }
    if (absl::Status health = (*client)->Health(); !health.ok()) {
      std::cerr << "kiln: kilnd at " << (*client)->target()
                << " is not healthy: " << health.message() << "\n";
      Exit(kExitFailure);
    }
    absl::StatusOr<kiln::v1::CapabilitiesResponse> caps =
        (*client)->Capabilities();
    if (!caps.ok()) {
      std::cerr << "kiln: Capabilities failed: " << caps.status().ToString()
                << "\n";
      Exit(kExitFailure);
    }
    PrintCapabilities((*client)->target(), *caps);
    absl::StatusOr<kiln::v1::StatsResponse> stats = (*client)->Stats();
    if (!stats.ok()) {
      std::cerr << "kiln: Stats failed: " << stats.status().ToString() << "\n";
      Exit(kExitFailure);
    }
    PrintStats(*stats);
  });
}

}  // namespace kiln::cli
