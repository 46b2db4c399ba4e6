#include "tests/support/subprocess.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

extern char** environ;

namespace kiln::testing {

TempDir::TempDir() {
  char pattern[] = "/tmp/kiln-test-XXXXXX";
  const char* made = mkdtemp(pattern);
  if (made == nullptr) {
    ADD_FAILURE() << "mkdtemp: " << std::strerror(errno);
    return;
  }
  path_ = made;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::File(const std::string& name) const {
  return absl::StrCat(path_, "/", name);
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << content;
  out.close();
  if (!out) ADD_FAILURE() << "cannot write " << path;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::StatusOr<Subprocess> Subprocess::Start(
    const std::vector<std::string>& argv,
    const std::vector<std::string>& extra_env) {
  if (argv.empty()) return absl::InvalidArgumentError("empty argv");
  Subprocess child;
  child.output_ = std::make_unique<TempDir>();

  std::vector<char*> args;
  for (const std::string& arg : argv)
    args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  for (const std::string& e : extra_env)
    env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);

  std::string out_path = child.output_->File("stdout");
  std::string err_path = child.output_->File("stderr");
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null",
                                   O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  // The child must not inherit a blocked SIGINT/SIGTERM from a test thread.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t empty;
  sigemptyset(&empty);
  posix_spawnattr_setsigmask(&attributes, &empty);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGMASK);
  int error = posix_spawn(&child.pid_, args[0], &actions, &attributes,
                          args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attributes);
  if (error != 0) {
    child.pid_ = -1;
    return absl::InternalError(
        absl::StrCat("cannot start ", argv[0], ": ", std::strerror(error)));
  }
  return child;
}

Subprocess::Subprocess(Subprocess&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      exited_(other.exited_),
      exit_code_(other.exit_code_),
      output_(std::move(other.output_)) {}

Subprocess::~Subprocess() {
  if (running()) {
    kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
  }
}

void Subprocess::Signal(int signal_number) const {
  if (running()) kill(pid_, signal_number);
}

absl::StatusOr<int> Subprocess::Wait(absl::Duration timeout) {
  if (pid_ <= 0) return absl::FailedPreconditionError("no child process");
  absl::Time deadline = absl::Now() + timeout;
  while (!exited_) {
    int status = 0;
    pid_t done = waitpid(pid_, &status, WNOHANG);
    if (done == pid_) {
      exited_ = true;
      exit_code_ =
          WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      break;
    }
    if (done < 0) {
      return absl::InternalError(absl::StrCat("waitpid: ", strerror(errno)));
    }
    if (absl::Now() > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("child ", pid_, " still running after ",
                       absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return exit_code_;
}

absl::StatusOr<RunResult> Run(const std::vector<std::string>& argv,
                              absl::Duration timeout) {
  absl::StatusOr<Subprocess> child = Subprocess::Start(argv);
  if (!child.ok()) return child.status();
  absl::StatusOr<int> code = child->Wait(timeout);
  if (!code.ok()) return code.status();
  return RunResult{*code, child->Stdout(), child->Stderr()};
}

}  // namespace kiln::testing
