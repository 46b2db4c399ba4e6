// The metrics endpoint: a small HTTP/1.x server on its own thread answering
// `GET /metrics` with the text a callback renders (Prometheus exposition
// format, server/engine/metrics.h). Read-only counters, no request body,
// one connection at a time with short timeouts: a scraper, not a web
// server. Anything but GET gets 405, any other path 404.
#ifndef KILN_SERVER_METRICS_HTTP_H_
#define KILN_SERVER_METRICS_HTTP_H_

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "server/listen_address.h"

namespace kiln::server {

class MetricsServer {
 public:
  // The page's text, or an error (answered 500 with its message).
  using Render = std::function<absl::StatusOr<std::string>()>;

  // Binds `address` (port 0: a free one) and starts serving. Unavailable
  // when the address cannot be bound, InvalidArgument when the host does
  // not resolve to an IP address.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      const TcpAddress& address, Render render);

  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;
  // Stops the thread and closes the socket.
  ~MetricsServer();

  // The bound port (the real one when 0 was asked for).
  int port() const { return port_; }

 private:
  MetricsServer(int listen_fd, int wake_read, int wake_write, int port,
                Render render);
  void Serve();
  void Answer(int fd);

  int listen_fd_;
  int wake_read_;  // a pipe: the destructor writes to stop the thread
  int wake_write_;
  int port_;
  Render render_;
  std::thread thread_;
};

}  // namespace kiln::server

#endif  // KILN_SERVER_METRICS_HTTP_H_
