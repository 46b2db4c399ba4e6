#include "tests/cache/redis_server.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace kiln::cache::testing {
namespace {

// A port that is free now (the kernel's choice for `port` 0), or 0.
int BindablePort(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 0;
  }
  int got = ntohs(addr.sin_port);
  close(fd);
  return got;
}

// A free port; for a cluster node, one whose bus port (port + 10000) is
// free and in range too.
int FreePort(bool cluster) {
  if (!cluster) return BindablePort(0);
  std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int port = 20000 + static_cast<int>(rng() % 20000);
    if (BindablePort(port) == port &&
        BindablePort(port + 10000) == port + 10000) {
      return port;
    }
  }
  return 0;
}

}  // namespace

std::string FindRedisServer() {
  const char* path = getenv("PATH");
  std::vector<std::string> dirs =
      absl::StrSplit(path != nullptr ? path : "", ':', absl::SkipEmpty());
  dirs.push_back("/usr/bin");
  dirs.push_back("/usr/sbin");
  dirs.push_back("/usr/local/bin");
  for (const std::string& dir : dirs) {
    std::string candidate = dir + "/redis-server";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

bool CreateCluster(const std::vector<int>& ports) {
  std::string binary = FindRedisServer();
  if (binary.empty()) return false;
  binary = binary.substr(0, binary.rfind('/')) + "/redis-cli";
  if (access(binary.c_str(), X_OK) != 0) return false;
  std::string command = binary + " --cluster create";
  for (int port : ports) absl::StrAppend(&command, " 127.0.0.1:", port);
  command += " --cluster-replicas 0 --cluster-yes >/dev/null 2>&1";
  if (system(command.c_str()) != 0) return false;
  for (int i = 0; i < 200; ++i) {
    bool all_ok = true;
    for (int port : ports) {
      redisContext* c = redisConnect("127.0.0.1", port);
      auto* reply =
          c != nullptr && !c->err
              ? static_cast<redisReply*>(redisCommand(c, "CLUSTER INFO"))
              : nullptr;
      all_ok = all_ok && reply != nullptr && reply->str != nullptr &&
               strstr(reply->str, "cluster_state:ok") != nullptr;
      if (reply != nullptr) freeReplyObject(reply);
      if (c != nullptr) redisFree(c);
    }
    if (all_ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

RedisServer::RedisServer(const std::string& dir, Options options)
    : dir_(dir), options_(std::move(options)), socket_(dir + "/redis.sock") {}

RedisServer::~RedisServer() { Stop(); }

bool RedisServer::Start() {
  const std::string binary = FindRedisServer();
  if (binary.empty()) return false;
  if (options_.tcp && port_ == 0) port_ = FreePort(options_.cluster);
  std::vector<std::string> args = {binary,
                                   "--port",
                                   absl::StrCat(options_.tcp ? port_ : 0),
                                   "--bind",
                                   "127.0.0.1",
                                   "--unixsocket",
                                   socket_,
                                   "--unixsocketperm",
                                   "700",
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--dir",
                                   dir_,
                                   "--loglevel",
                                   "warning",
                                   "--logfile",
                                   dir_ + "/redis.log"};
  if (options_.cluster) {
    for (const char* a :
         {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"}) {
      args.push_back(a);
    }
  }
  if (!options_.password.empty()) {
    args.push_back("--requirepass");
    args.push_back(options_.password);
  }
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  unlink(socket_.c_str());
  if (posix_spawn(&pid_, binary.c_str(), nullptr, nullptr, argv.data(),
                  environ) != 0) {
    pid_ = -1;
    return false;
  }
  for (int i = 0; i < 500; ++i) {
    struct timeval tv = {0, 200000};
    redisContext* c = redisConnectUnixWithTimeout(socket_.c_str(), tv);
    if (c != nullptr && !c->err) {
      auto* reply = static_cast<redisReply*>(
          options_.password.empty()
              ? redisCommand(c, "PING")
              : redisCommand(c, "AUTH %s", options_.password.c_str()));
      bool ok = reply != nullptr && reply->type != REDIS_REPLY_ERROR;
      if (reply != nullptr) freeReplyObject(reply);
      redisFree(c);
      if (ok) return true;
    } else if (c != nullptr) {
      redisFree(c);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  Stop();
  return false;
}

void RedisServer::Stop() {
  if (pid_ <= 0) return;
  kill(pid_, SIGCONT);
  kill(pid_, SIGTERM);
  int status;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

void RedisServer::Pause() {
  if (pid_ > 0) kill(pid_, SIGSTOP);
}

void RedisServer::Resume() {
  if (pid_ > 0) kill(pid_, SIGCONT);
}

std::string RedisServer::Log() const {
  std::ifstream in(dir_ + "/redis.log");
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string RedisServer::unix_url() const {
  std::string auth = options_.password.empty()
                         ? ""
                         : absl::StrCat(":", options_.password, "@");
  return absl::StrCat("redis+unix://", auth, socket_);
}

std::string RedisServer::tcp_url() const {
  std::string auth = options_.password.empty()
                         ? ""
                         : absl::StrCat(":", options_.password, "@");
  return absl::StrCat("redis://", auth, "127.0.0.1:", port_);
}

}  // namespace kiln::cache::testing
