#include "client/cli/progress.h"

#include <unistd.h>

#include <algorithm>
#include <iostream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace kiln::cli {
namespace {

std::string Seconds(double s) {
  if (s < 60) return absl::StrFormat("%.0f s", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", int(s) / 60, int(s) % 60);
  return absl::StrFormat("%dh%02dm", int(s) / 3600, int(s) / 60 % 60);
}

}  // namespace

ProgressBar::ProgressBar(int total, std::string what)
    : total_(std::max(total, 1)),
      what_(std::move(what)),
      tty_(isatty(STDERR_FILENO) == 1),
      start_(absl::Now()) {}

ProgressBar::~ProgressBar() {
  if (tty_ && dirty_) std::cerr << "\r\033[K" << std::flush;
}

std::string ProgressBar::Line(int done, int total, const std::string& what,
                              absl::Duration elapsed, const std::string& note,
                              int width) {
  total = std::max(total, 1);
  done = std::clamp(done, 0, total);
  constexpr int kBar = 24;
  const int filled = done * kBar / total;
  const double seconds = absl::ToDoubleSeconds(elapsed);
  std::string line =
      absl::StrFormat("[%s%s] %d/%d %s", std::string(filled, '#'),
                      std::string(kBar - filled, '.'), done, total, what);
  if (done > 0 && seconds > 0) {
    const double rate = done / seconds;
    absl::StrAppendFormat(&line, ", %.1f/s", rate);
    if (done < total) {
      absl::StrAppend(&line, ", ", Seconds((total - done) / rate), " left");
    }
  }
  if (!note.empty()) absl::StrAppend(&line, "  ", note);
  if (static_cast<int>(line.size()) > width) {
    line = line.substr(0, std::max(width - 3, 0)) + "...";
  }
  return line;
}

void ProgressBar::Update(int done, const std::string& note) {
  if (!tty_) return;
  // At most 20 redraws a second, and always the last one.
  const absl::Time now = absl::Now();
  if (done < total_ && now - drawn_ < absl::Milliseconds(50)) return;
  drawn_ = now;
  std::cerr << "\r\033[K" << Line(done, total_, what_, now - start_, note, 110)
            << std::flush;
  dirty_ = true;
}

}  // namespace kiln::cli
