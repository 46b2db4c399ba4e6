// An application outside Kiln's tree using the installed thin client
// (tests/install): built with find_package(Kiln) and with pkg-config.
//   kiln_example            connects to a socket that does not exist and
//                           expects a clean Unavailable error
//   kiln_example ADDRESS    connects to the kilnd at ADDRESS, checks its
//                           health and prints its version
#include <iostream>
#include <memory>

#include "client/client.h"

int main(int argc, char** argv) {
  if (argc == 1) {
    absl::StatusOr<std::unique_ptr<kiln::client::Client>> client =
        kiln::client::Client::Connect("unix:/nonexistent/kiln/kilnd.sock");
    if (client.ok() || !absl::IsUnavailable(client.status())) {
      std::cerr << "expected Unavailable, got "
                << (client.ok() ? "a connection" : client.status().ToString())
                << "\n";
      return 1;
    }
    std::cout << "ok: no daemon: " << client.status().message() << "\n";
    return 0;
  }
  absl::StatusOr<std::unique_ptr<kiln::client::Client>> client =
      kiln::client::Client::Connect(argv[1]);
  if (!client.ok()) {
    std::cerr << client.status() << "\n";
    return 1;
  }
  if (absl::Status health = (*client)->Health(); !health.ok()) {
    std::cerr << health << "\n";
    return 1;
  }
  absl::StatusOr<kiln::v1::CapabilitiesResponse> caps =
      (*client)->Capabilities();
  if (!caps.ok()) {
    std::cerr << caps.status() << "\n";
    return 1;
  }
  std::cout << "ok: kilnd " << caps->server_version() << " at "
            << (*client)->target() << "\n";
  return 0;
}
