// A progress bar on stderr for the CLI's long work (prewarm): count, rate
// and time left, one line rewritten in place. Quiet when stderr is not a
// terminal (logs and CI get the final report only).
#ifndef KILN_CLIENT_CLI_PROGRESS_H_
#define KILN_CLIENT_CLI_PROGRESS_H_

#include <string>

#include "absl/time/time.h"

namespace kiln::cli {

class ProgressBar {
 public:
  // `what` names the unit counted: "kernels".
  ProgressBar(int total, std::string what);
  // Clears the line.
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // `done` of total finished; `note` says what is going on now.
  void Update(int done, const std::string& note);

  // The line Update draws (no control characters), for tests.
  static std::string Line(int done, int total, const std::string& what,
                          absl::Duration elapsed, const std::string& note,
                          int width);

 private:
  const int total_;
  const std::string what_;
  const bool tty_;
  const absl::Time start_;
  absl::Time drawn_ = absl::InfinitePast();
  bool dirty_ = false;
};

}  // namespace kiln::cli

#endif  // KILN_CLIENT_CLI_PROGRESS_H_
