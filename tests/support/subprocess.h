// Test helpers for running Kiln's programs (kilnd, kiln) as child processes:
// start one, signal it, wait for it with a timeout, read what it printed.
// Also a self-deleting temporary directory with a short path (unix socket
// paths are limited to 107 bytes).
#ifndef KILN_TESTS_SUPPORT_SUBPROCESS_H_
#define KILN_TESTS_SUPPORT_SUBPROCESS_H_

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace kiln::testing {

// A fresh directory under /tmp (mode 0700), removed with its content when
// the object dies.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string File(const std::string& name) const;

 private:
  std::string path_;
};

// Writes `content` to `path`, replacing it. Fails the current test on error.
void WriteFile(const std::string& path, const std::string& content);
// The content of `path`, or "" when it cannot be read.
std::string ReadFile(const std::string& path);

// A child process whose stdout and stderr go to files. Killed (SIGKILL) and
// reaped on destruction if still running.
class Subprocess {
 public:
  // Starts `argv[0]` (a path) with `argv`; `extra_env` entries ("K=V") are
  // added to this process's environment. InvalidArgument for an empty argv,
  // Internal when the program cannot be started.
  static absl::StatusOr<Subprocess> Start(
      const std::vector<std::string>& argv,
      const std::vector<std::string>& extra_env = {});

  Subprocess(Subprocess&& other) noexcept;
  Subprocess& operator=(Subprocess&&) = delete;
  ~Subprocess();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !exited_; }

  // Sends `signal_number` to the child.
  void Signal(int signal_number) const;

  // Waits for the child to exit, up to `timeout`. Returns its exit status,
  // or 128 + N when signal N killed it; DeadlineExceeded on timeout.
  absl::StatusOr<int> Wait(absl::Duration timeout);

  // Everything the child has written so far.
  std::string Stdout() const { return ReadFile(output_->File("stdout")); }
  std::string Stderr() const { return ReadFile(output_->File("stderr")); }

 private:
  Subprocess() = default;

  pid_t pid_ = -1;
  bool exited_ = false;
  int exit_code_ = 0;
  std::unique_ptr<TempDir> output_;
};

struct RunResult {
  int exit_code = -1;  // 128 + N when killed by signal N
  std::string out;
  std::string err;
};

// Runs `argv` to completion (killing it after `timeout`) and returns its exit
// status and output.
absl::StatusOr<RunResult> Run(const std::vector<std::string>& argv,
                              absl::Duration timeout = absl::Seconds(60));

}  // namespace kiln::testing

#endif  // KILN_TESTS_SUPPORT_SUBPROCESS_H_
