#include "server/bench_worker/framing.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace kiln::bench {
namespace {

absl::Status WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = send(fd, data, size, MSG_NOSIGNAL);
    if (n < 0 && errno == ENOTSOCK) n = write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(
          absl::StrCat("benchmark worker connection: ", strerror(errno)));
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

// Reads exactly `size` bytes unless the deadline passes or the stream ends.
absl::Status ReadAll(int fd, char* data, size_t size, absl::Time deadline) {
  while (size > 0) {
    int timeout_ms = -1;
    if (deadline != absl::InfiniteFuture()) {
      const absl::Duration left = deadline - absl::Now();
      if (left <= absl::ZeroDuration()) {
        return absl::DeadlineExceededError("no answer in time");
      }
      timeout_ms = static_cast<int>(
          std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
    }
    pollfd p{fd, POLLIN, 0};
    int ready = poll(&p, 1, timeout_ms);
    if (ready < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("poll: ", strerror(errno)));
    }
    if (ready == 0) continue;  // the deadline check above ends the wait
    ssize_t n = read(fd, data, size);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return absl::UnavailableError(absl::StrCat("read: ", strerror(errno)));
    }
    if (n == 0) return absl::UnavailableError("end of stream");
    data += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status WriteFrame(int fd, std::string_view payload) {
  if (payload.size() > kMaxFrameBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("frame of ", payload.size(), " bytes is too large"));
  }
  const uint32_t n = static_cast<uint32_t>(payload.size());
  const unsigned char header[4] = {
      static_cast<unsigned char>(n), static_cast<unsigned char>(n >> 8),
      static_cast<unsigned char>(n >> 16), static_cast<unsigned char>(n >> 24)};
  if (absl::Status s =
          WriteAll(fd, reinterpret_cast<const char*>(header), sizeof header);
      !s.ok()) {
    return s;
  }
  return WriteAll(fd, payload.data(), payload.size());
}

absl::Status ReadFrame(int fd, std::string* payload, absl::Time deadline) {
  unsigned char header[4];
  if (absl::Status s =
          ReadAll(fd, reinterpret_cast<char*>(header), sizeof header, deadline);
      !s.ok()) {
    return s;
  }
  const uint32_t n = header[0] | (header[1] << 8) | (header[2] << 16) |
                     (static_cast<uint32_t>(header[3]) << 24);
  if (n > kMaxFrameBytes) {
    return absl::DataLossError(absl::StrCat("frame of ", n, " bytes"));
  }
  payload->resize(n);
  return ReadAll(fd, payload->data(), n, deadline);
}

}  // namespace kiln::bench
