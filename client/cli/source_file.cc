#include "client/cli/source_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace kiln::cli {
namespace {

absl::Status OpenError(int error) {
  std::string message = absl::StrCat("cannot read: ", std::strerror(error));
  switch (error) {
    case ENOENT:
      return absl::NotFoundError(message);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(message);
    case EISDIR:
      return absl::FailedPreconditionError(message);
    default:
      return absl::InternalError(message);
  }
}

class FileCloser {
 public:
  explicit FileCloser(int fd) : fd_(fd) {}
  ~FileCloser() { close(fd_); }

 private:
  int fd_;
};

}  // namespace

absl::StatusOr<std::string> ReadSourceFile(const std::string& path,
                                           size_t max_bytes) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return OpenError(errno);
  FileCloser closer(fd);
  struct stat st;
  if (fstat(fd, &st) != 0) return OpenError(errno);
  if (S_ISDIR(st.st_mode)) return OpenError(EISDIR);
  auto too_big = [&] {
    return absl::ResourceExhaustedError(
        absl::StrCat("file is larger than the limit of ", max_bytes, " bytes"));
  };
  if (S_ISREG(st.st_mode) && static_cast<size_t>(st.st_size) > max_bytes) {
    return too_big();
  }
  // Read to the end rather than trusting st_size: pipes have none, and files
  // can grow. One byte past the limit is enough to know it is too big.
  std::string text;
  char buffer[1 << 16];
  while (true) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(
          absl::StrCat("read failed: ", std::strerror(errno)));
    }
    if (n == 0) break;
    text.append(buffer, static_cast<size_t>(n));
    if (text.size() > max_bytes) return too_big();
  }
  return text;
}

}  // namespace kiln::cli
