#include "server/unix_socket.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/local_paths.h"
#include "spdlog/spdlog.h"

namespace kiln::server {
namespace {

absl::Status SyscallError(absl::string_view what, const std::string& path) {
  int error = errno;
  std::string message = absl::StrCat(what, " ", path, ": ", strerror(error));
  if (error == EACCES || error == EPERM || error == EROFS) {
    return absl::PermissionDeniedError(message);
  }
  return absl::InternalError(message);
}

// The directory holds the socket: whoever can write to it can replace the
// socket with their own, so it must be ours and closed to others.
absl::Status CheckDirectoryIsPrivate(const std::string& dir) {
  struct stat st;
  if (lstat(dir.c_str(), &st) != 0) return SyscallError("cannot stat", dir);
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir,
                     " is not a directory (a symlink?); refusing to put "
                     "kilnd's socket there"));
  }
  if (st.st_uid != geteuid()) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, " belongs to uid ", st.st_uid, ", not to uid ",
                     geteuid(), "; refusing to put kilnd's socket there"));
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        dir,
        " is writable by other users; refusing to put kilnd's socket "
        "there (chmod go-w it, or choose another --socket)"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<UnixSocketClaim> UnixSocketClaim::Claim(std::string path) {
  if (path.empty() || path.front() != '/') {
    return absl::InvalidArgumentError(
        absl::StrCat("unix socket path '", path, "' is not absolute"));
  }
  if (path.size() > kMaxPathBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("unix socket path ", path, " is ", path.size(),
                     " bytes; the limit is ", kMaxPathBytes));
  }
  std::string dir = ParentDirectory(path);
  if (absl::Status status = MakeDirectories(dir, 0750); !status.ok()) {
    return status;
  }
  if (absl::Status status = CheckDirectoryIsPrivate(dir); !status.ok()) {
    return status;
  }

  std::string lock_path = path + ".lock";
  int fd =
      open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return SyscallError("cannot open", lock_path);
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int error = errno;
    close(fd);
    if (error == EWOULDBLOCK) {
      return absl::AlreadyExistsError(
          absl::StrCat("another kilnd is already listening on ", path,
                       " (it holds ", lock_path, ")"));
    }
    errno = error;
    return SyscallError("cannot lock", lock_path);
  }
  UnixSocketClaim claim(std::move(path), fd);

  // Holding the lock, whatever socket is at the path is a dead daemon's.
  struct stat st;
  if (lstat(claim.path_.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(absl::StrCat(
          claim.path_, " exists and is not a socket; refusing to replace it"));
    }
    if (unlink(claim.path_.c_str()) != 0) {
      return SyscallError("cannot remove stale socket", claim.path_);
    }
    spdlog::info("removed stale socket {}", claim.path_);
  } else if (errno != ENOENT) {
    return SyscallError("cannot stat", claim.path_);
  }
  return claim;
}

UnixSocketClaim::UnixSocketClaim(UnixSocketClaim&& other) noexcept
    : path_(std::move(other.path_)),
      lock_fd_(std::exchange(other.lock_fd_, -1)) {}

UnixSocketClaim& UnixSocketClaim::operator=(UnixSocketClaim&& other) noexcept {
  if (this != &other) {
    Release();
    path_ = std::move(other.path_);
    lock_fd_ = std::exchange(other.lock_fd_, -1);
  }
  return *this;
}

UnixSocketClaim::~UnixSocketClaim() { Release(); }

void UnixSocketClaim::Release() {
  if (lock_fd_ < 0) return;
  struct stat st;
  if (lstat(path_.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) {
    unlink(path_.c_str());
  }
  close(lock_fd_);  // releases the lock
  lock_fd_ = -1;
}

absl::Status UnixSocketClaim::SetSocketMode(mode_t mode) const {
  if (chmod(path_.c_str(), mode) != 0)
    return SyscallError("cannot chmod", path_);
  return absl::OkStatus();
}

}  // namespace kiln::server
