// KilndProcess: a real kilnd started for a test, on a unix socket in its own
// temporary directory, stopped (SIGKILL if need be) when the object dies.
#ifndef KILN_TESTS_SUPPORT_KILND_PROCESS_H_
#define KILN_TESTS_SUPPORT_KILND_PROCESS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "tests/support/subprocess.h"

namespace kiln::testing {

class KilndProcess {
 public:
  // Starts `kilnd_path` with --socket and --cache-dir inside a fresh
  // temporary directory (--cache-dir only if `extra_args` has none), plus
  // `extra_args`, and waits (up to 20 s) until it
  // logs that it is listening. Unavailable, with kilnd's stderr, when it
  // exits or stays silent instead.
  static absl::StatusOr<std::unique_ptr<KilndProcess>> Start(
      const std::string& kilnd_path,
      const std::vector<std::string>& extra_args = {});

  const std::string& socket_path() const { return socket_path_; }
  // The gRPC target of the socket: "unix:" + socket_path().
  std::string address() const { return "unix:" + socket_path_; }
  const TempDir& dir() const { return dir_; }
  Subprocess& process() { return *process_; }

 private:
  KilndProcess() = default;

  TempDir dir_;
  std::string socket_path_;
  std::unique_ptr<Subprocess> process_;
};

// Waits until `process`'s stderr contains `text`. False on timeout or when
// the process exits first.
bool WaitForStderr(Subprocess& process, const std::string& text,
                   absl::Duration timeout = absl::Seconds(20));

}  // namespace kiln::testing

#endif  // KILN_TESTS_SUPPORT_KILND_PROCESS_H_
