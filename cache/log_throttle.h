// LogThrottle: lets a repeated warning through at most once per interval and
// counts the ones it holds back, so that a failing disk or a damaged index
// is reported without a line per request. Thread-safe.
#ifndef KILN_CACHE_LOG_THROTTLE_H_
#define KILN_CACHE_LOG_THROTTLE_H_

#include <cstdint>
#include <optional>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace kiln::cache {

class LogThrottle {
 public:
  explicit LogThrottle(absl::Duration interval) : interval_(interval) {}

  // When a warning at `now` may be logged: how many were held back since
  // the last one that was. nullopt when this one is held back.
  std::optional<int64_t> Admit(absl::Time now) {
    absl::MutexLock lock(&mu_);
    if (now - last_ < interval_) {
      ++held_back_;
      return std::nullopt;
    }
    last_ = now;
    return std::exchange(held_back_, 0);
  }

 private:
  const absl::Duration interval_;
  absl::Mutex mu_;
  absl::Time last_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int64_t held_back_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace kiln::cache

#endif  // KILN_CACHE_LOG_THROTTLE_H_
