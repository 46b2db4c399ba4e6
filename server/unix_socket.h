// UnixSocketClaim: kilnd's right to one unix socket path. Two daemons must
// never share a path (gRPC silently unlinks an existing socket when it binds),
// and a socket left by a daemon that died must not stop the next one; an
// exclusive lock on `PATH.lock`, held for the daemon's life, settles both.
#ifndef KILN_SERVER_UNIX_SOCKET_H_
#define KILN_SERVER_UNIX_SOCKET_H_

#include <sys/types.h>

#include <string>
#include <utility>

#include "absl/status/statusor.h"

namespace kiln::server {

class UnixSocketClaim {
 public:
  // Longest socket path the kernel accepts (sockaddr_un::sun_path, minus NUL).
  static constexpr size_t kMaxPathBytes = 107;

  // Creates the socket's directory if missing (mode 0750), locks `PATH.lock`
  // and removes a stale socket at `path`. Returns:
  //  - InvalidArgument for a relative path or one over kMaxPathBytes;
  //  - AlreadyExists when another process (another kilnd) holds the lock;
  //  - FailedPrecondition when `path` exists and is not a socket, or the
  //    directory is not ours or is writable by others (anyone could then
  //    replace the socket);
  //  - PermissionDenied / Internal for failing system calls.
  static absl::StatusOr<UnixSocketClaim> Claim(std::string path);

  UnixSocketClaim(UnixSocketClaim&& other) noexcept;
  UnixSocketClaim& operator=(UnixSocketClaim&& other) noexcept;
  UnixSocketClaim(const UnixSocketClaim&) = delete;
  UnixSocketClaim& operator=(const UnixSocketClaim&) = delete;
  // Removes the socket if it is still there, then releases the lock.
  ~UnixSocketClaim();

  // Sets the permission bits of the socket, once the server has created it.
  absl::Status SetSocketMode(mode_t mode) const;

  const std::string& path() const { return path_; }
  // The gRPC target that reaches the socket: "unix:" + path().
  std::string GrpcAddress() const { return "unix:" + path_; }

 private:
  UnixSocketClaim(std::string path, int lock_fd)
      : path_(std::move(path)), lock_fd_(lock_fd) {}
  void Release();

  std::string path_;
  int lock_fd_ = -1;  // -1 only in a moved-from object
};

}  // namespace kiln::server

#endif  // KILN_SERVER_UNIX_SOCKET_H_
