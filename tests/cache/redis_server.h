// RedisServer: a real redis-server for tests, on a unix socket in a temp
// directory (and optionally a free TCP port), without persistence, stopped
// when the object dies.
#ifndef KILN_TESTS_CACHE_REDIS_SERVER_H_
#define KILN_TESTS_CACHE_REDIS_SERVER_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace kiln::cache::testing {

// The redis-server binary, or "" if it is not installed.
std::string FindRedisServer();

// Joins cluster-enabled servers at 127.0.0.1:`ports` into one cluster owning
// all slots (redis-cli --cluster create) and waits until it is "ok". False
// if redis-cli is missing or the cluster does not form.
bool CreateCluster(const std::vector<int>& ports);

class RedisServer {
 public:
  struct Options {
    bool tcp = false;      // also listen on 127.0.0.1:<free port>
    bool cluster = false;  // cluster-enabled (needs tcp)
    std::string password;  // requirepass, if set
  };
  explicit RedisServer(const std::string& dir) : RedisServer(dir, Options()) {}
  RedisServer(const std::string& dir, Options options);
  ~RedisServer();

  // Starts the server and waits until it answers PING; false on failure.
  bool Start();
  // SIGTERM and wait.
  void Stop();
  // Freeze / thaw the process (SIGSTOP / SIGCONT) to make commands time out.
  void Pause();
  void Resume();

  // The server's log file, to explain a failed Start().
  std::string Log() const;

  std::string unix_url() const;  // redis+unix://[:pw@]/path
  std::string tcp_url() const;   // redis://[:pw@]127.0.0.1:port
  const std::string& socket_path() const { return socket_; }
  int port() const { return port_; }

 private:
  std::string dir_;
  Options options_;
  std::string socket_;
  int port_ = 0;
  pid_t pid_ = -1;
};

}  // namespace kiln::cache::testing

#endif  // KILN_TESTS_CACHE_REDIS_SERVER_H_
