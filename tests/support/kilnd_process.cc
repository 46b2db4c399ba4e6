#include "tests/support/kilnd_process.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace kiln::testing {

bool WaitForStderr(Subprocess& process, const std::string& text,
                   absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    if (absl::StrContains(process.Stderr(), text)) return true;
    // Wait() with a zero timeout only reaps; stop once the child is gone.
    if (process.Wait(absl::ZeroDuration()).ok()) {
      return absl::StrContains(process.Stderr(), text);
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return false;
}

absl::StatusOr<std::unique_ptr<KilndProcess>> KilndProcess::Start(
    const std::string& kilnd_path, const std::vector<std::string>& extra_args) {
  std::unique_ptr<KilndProcess> kilnd(new KilndProcess());
  kilnd->socket_path_ = kilnd->dir_.File("run/kilnd.sock");
  std::vector<std::string> argv = {kilnd_path, "--socket", kilnd->socket_path_};
  if (std::find(extra_args.begin(), extra_args.end(), "--cache-dir") ==
      extra_args.end()) {
    argv.insert(argv.end(), {"--cache-dir", kilnd->dir_.File("cache")});
  }
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  absl::StatusOr<Subprocess> process = Subprocess::Start(argv);
  if (!process.ok()) return process.status();
  kilnd->process_ = std::make_unique<Subprocess>(*std::move(process));
  if (!WaitForStderr(*kilnd->process_, "listening on unix:")) {
    return absl::UnavailableError(absl::StrCat(
        "kilnd did not start; its stderr:\n", kilnd->process_->Stderr()));
  }
  return kilnd;
}

}  // namespace kiln::testing
