#include "server/tuning/worker_process.h"

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "server/bench_worker/framing.h"

extern char** environ;

namespace kiln::server::tuning {
namespace {

bool IsExecutable(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

std::string SelfDirectory() {
  char buffer[4096];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof buffer - 1);
  if (n <= 0) return "";
  std::string path(buffer, static_cast<size_t>(n));
  return path.substr(0, path.rfind('/'));
}

std::string SignalName(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  const char* description = strsignal(sig);
  return absl::StrCat(abbrev != nullptr ? absl::StrCat("SIG", abbrev)
                                        : absl::StrCat("signal ", sig),
                      description != nullptr
                          ? absl::StrCat(" (", description, ")")
                          : std::string());
}

}  // namespace

absl::StatusOr<std::string> FindBenchWorker() {
  if (const char* env = std::getenv("KILN_BENCH_WORKER");
      env != nullptr && *env != '\0') {
    if (IsExecutable(env)) return std::string(env);
    return absl::NotFoundError(
        absl::StrCat("KILN_BENCH_WORKER=", env, " is not an executable file"));
  }
  std::vector<std::string> candidates;
  const std::string self = SelfDirectory();
  if (!self.empty()) {
    candidates.push_back(self + "/kiln-bench-worker");
    candidates.push_back(self + "/../libexec/kiln/kiln-bench-worker");
  }
#ifdef KILN_BENCH_WORKER_BUILD_PATH
  candidates.push_back(KILN_BENCH_WORKER_BUILD_PATH);
#endif
#ifdef KILN_BENCH_WORKER_INSTALL_PATH
  candidates.push_back(KILN_BENCH_WORKER_INSTALL_PATH);
#endif
  for (const std::string& c : candidates) {
    if (IsExecutable(c)) return c;
  }
  return absl::NotFoundError(absl::StrCat(
      "no benchmark worker (kiln-bench-worker) found; looked at ",
      absl::StrJoin(candidates, ", "), "; set KILN_BENCH_WORKER to its path"));
}

WorkerProcess::WorkerProcess(std::string path, std::string device,
                             bool allow_faults)
    : path_(std::move(path)),
      device_(std::move(device)),
      allow_faults_(allow_faults) {}

WorkerProcess::~WorkerProcess() { Stop(true); }

absl::Status WorkerProcess::Start() {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    return absl::UnavailableError(
        absl::StrCat("socketpair: ", strerror(errno)));
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // dup2 clears close-on-exec on the copies.
  posix_spawn_file_actions_adddup2(&actions, sv[1], STDIN_FILENO);
  posix_spawn_file_actions_adddup2(&actions, sv[1], STDOUT_FILENO);
  std::vector<std::string> args = {path_, "--device", device_};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    if (strncmp(*e, "KILN_BENCH_WORKER_FAULTS=", 25) != 0) env.push_back(*e);
  }
  if (allow_faults_) env.push_back("KILN_BENCH_WORKER_FAULTS=1");
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int error = posix_spawn(&pid, path_.c_str(), &actions, nullptr,
                                argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(sv[1]);
  if (error != 0) {
    close(sv[0]);
    return absl::UnavailableError(absl::StrCat(
        "cannot start the benchmark worker ", path_, ": ", strerror(error)));
  }
  pid_ = pid;
  fd_ = sv[0];
  ++starts_;
  return absl::OkStatus();
}

std::string WorkerProcess::Stop(bool kill_first) {
  if (fd_ >= 0) {
    close(fd_);
    fd_ = -1;
  }
  if (pid_ <= 0) return "";
  int status = 0;
  pid_t done = 0;
  if (!kill_first) {
    // It closed the connection: it is exiting. Give it a moment.
    for (int i = 0; i < 100 && done == 0; ++i) {
      done = waitpid(pid_, &status, WNOHANG);
      if (done == 0) absl::SleepFor(absl::Milliseconds(10));
    }
  }
  if (done == 0) {
    kill(pid_, SIGKILL);
    while ((done = waitpid(pid_, &status, 0)) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
  if (done < 0) return "ended";
  if (WIFSIGNALED(status)) {
    return absl::StrCat("was killed by ", SignalName(WTERMSIG(status)));
  }
  return absl::StrCat("exited with status ", WEXITSTATUS(status));
}

absl::StatusOr<kiln::bench::v1::BenchReply> WorkerProcess::Call(
    const kiln::bench::v1::BenchRequest& request, absl::Duration time_limit,
    const std::function<bool()>& cancelled) {
  if (pid_ > 0) {
    // A worker that ended while idle (killed from outside) is replaced
    // before it can fail a candidate.
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      Stop(false);
    }
  }
  if (pid_ <= 0) {
    if (absl::Status s = Start(); !s.ok()) return s;
  }
  std::string frame;
  request.SerializeToString(&frame);
  absl::Status status = kiln::bench::WriteFrame(fd_, frame);
  const absl::Time deadline = absl::Now() + time_limit;
  // Wait for the reply to begin, checking on the caller meanwhile.
  while (status.ok() && absl::Now() < deadline) {
    if (cancelled && cancelled()) {
      Stop(true);
      return absl::CancelledError("benchmark cancelled; worker killed");
    }
    pollfd p{fd_, POLLIN, 0};
    const int wait_ms = static_cast<int>(std::clamp<int64_t>(
        absl::ToInt64Milliseconds(deadline - absl::Now()) + 1, 0, 50));
    if (poll(&p, 1, wait_ms) > 0) break;
  }
  if (status.ok()) status = kiln::bench::ReadFrame(fd_, &frame, deadline);
  if (absl::IsDeadlineExceeded(status)) {
    Stop(true);
    return absl::DeadlineExceededError(
        absl::StrCat("no result within ", absl::FormatDuration(time_limit),
                     "; benchmark worker killed"));
  }
  if (!status.ok()) {
    return absl::AbortedError(absl::StrCat("benchmark worker ", Stop(false)));
  }
  kiln::bench::v1::BenchReply reply;
  if (!reply.ParseFromString(frame)) {
    Stop(true);
    return absl::AbortedError("benchmark worker sent a malformed reply");
  }
  return reply;
}

}  // namespace kiln::server::tuning
