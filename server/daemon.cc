#include "server/daemon.h"

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/health_check_service_interface.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "cache/cache.h"
#include "server/bad_request_interceptor.h"
#include "server/capabilities.h"
#include "server/engine/compile_engine.h"
#include "server/engine/metrics.h"
#include "server/kiln_service.h"
#include "server/listen_address.h"
#include "server/local_paths.h"
#include "server/metrics_http.h"
#include "server/reflection_v1.h"
#include "server/service_core.h"
#include "spdlog/spdlog.h"

namespace kiln::server {

namespace {

// The whole of a small file (a certificate, a key, a token).
absl::StatusOr<std::string> ReadSmallFile(const std::string& path,
                                          absl::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot read ", what, " file '", path, "'"));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (contents.str().size() > (1 << 20)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " file '", path, "' is larger than 1 MiB"));
  }
  return contents.str();
}

// The TCP listener's credentials: TLS when a certificate is configured.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TcpCredentials(
    const ServerConfig& config) {
  if (config.tls_cert.empty() != config.tls_key.empty()) {
    return absl::InvalidArgumentError(
        "--tls-cert and --tls-key must be given together");
  }
  if (config.tls_cert.empty()) {
    if (!config.tls_client_ca.empty()) {
      return absl::InvalidArgumentError(
          "--tls-client-ca needs --tls-cert and --tls-key");
    }
    return grpc::InsecureServerCredentials();
  }
  grpc::SslServerCredentialsOptions options(
      config.tls_client_ca.empty()
          ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
          : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  absl::StatusOr<std::string> cert =
      ReadSmallFile(config.tls_cert, "TLS certificate");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadSmallFile(config.tls_key, "TLS key");
  if (!key.ok()) return key.status();
  pair.cert_chain = *std::move(cert);
  pair.private_key = *std::move(key);
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (!config.tls_client_ca.empty()) {
    absl::StatusOr<std::string> ca =
        ReadSmallFile(config.tls_client_ca, "TLS client CA");
    if (!ca.ok()) return ca.status();
    options.pem_root_certs = *std::move(ca);
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::string> ReadToken(const std::string& path,
                                      absl::string_view what, size_t min_size) {
  absl::StatusOr<std::string> text = ReadSmallFile(path, what);
  if (!text.ok()) return text.status();
  std::string token(absl::StripAsciiWhitespace(*text));
  if (token.size() < min_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " in '", path, "' is shorter than ", min_size, " characters"));
  }
  return token;
}

// The cache directory, its index and its blob folder must not be writable
// by other users: the index says which binary answers which key.
absl::Status CheckCacheDirectoryIsPrivate(const std::string& dir) {
  for (const std::string& path :
       {dir, absl::StrCat(dir, "/", cache::kIndexFileName),
        absl::StrCat(dir, "/blobs")}) {
    struct stat st;
    if (stat(path.c_str(), &st) != 0) continue;  // created below, privately
    if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          path, " is writable by other users (mode ",
          absl::StrFormat("%04o", st.st_mode & 07777),
          "); refusing to serve kernels from it: chmod go-w it, choose "
          "another --cache-dir, or pass --allow-shared-cache-dir"));
    }
  }
  return absl::OkStatus();
}

// A fresh private directory for a temporary cache, in the first of
// $XDG_RUNTIME_DIR, /dev/shm and /tmp that takes one.
absl::StatusOr<std::string> MakeTemporaryCacheDirectory() {
  std::vector<std::string> bases;
  if (const char* runtime = getenv("XDG_RUNTIME_DIR"); runtime && *runtime) {
    bases.push_back(runtime);
  }
  bases.insert(bases.end(), {"/dev/shm", "/tmp"});
  for (const std::string& base : bases) {
    std::string pattern = base + "/kiln-temporary-cache-XXXXXX";
    if (mkdtemp(pattern.data()) != nullptr) return pattern;
  }
  return absl::UnavailableError("no place for a temporary cache");
}

absl::StatusOr<std::unique_ptr<cache::Cache>> OpenCache(
    const ServerConfig& config, const std::string& dir) {
  cache::CacheOptions options;
  options.local.max_size = static_cast<uint64_t>(config.cache_max_mb) << 20;
  if (!config.redis_url.empty()) {
    if (config.redis_secret_file.empty()) {
      return absl::InvalidArgumentError(
          "--redis-url needs --redis-secret-file (the cluster secret that "
          "signs shared entries)");
    }
    absl::StatusOr<std::string> secret =
        ReadToken(config.redis_secret_file, "cluster secret", 16);
    if (!secret.ok()) return secret.status();
    cache::RemoteTierOptions remote;
    remote.url = config.redis_url;
    remote.secret = *std::move(secret);
    remote.key_namespace = config.redis_namespace;
    options.remote = std::move(remote);
  }
  return cache::Cache::Open(dir, std::move(options));
}

}  // namespace

Daemon::Daemon() = default;

Daemon::~Daemon() { Shutdown(absl::ZeroDuration()); }

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(
    const ServerConfig& config) {
  // Check every setting before touching anything shared.
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> tcp_credentials =
      TcpCredentials(config);
  if (!tcp_credentials.ok()) return tcp_credentials.status();
  std::string bearer_token;
  if (!config.auth_token_file.empty()) {
    absl::StatusOr<std::string> token =
        ReadToken(config.auth_token_file, "bearer token", 16);
    if (!token.ok()) return token.status();
    bearer_token = *std::move(token);
  }
  std::optional<TcpAddress> tcp;
  if (!config.listen_tcp.empty()) {
    absl::StatusOr<TcpAddress> parsed = ParseTcpAddress(config.listen_tcp);
    if (!parsed.ok()) return parsed.status();
    TcpSecurity security;
    security.tls = !config.tls_cert.empty();
    security.bearer_token = !bearer_token.empty();
    security.insecure_loopback = config.insecure_loopback;
    if (absl::Status status = CheckTcpSecurity(*parsed, security);
        !status.ok()) {
      return status;
    }
    if (!security.tls && !IsLoopbackHost(parsed->host)) {
      spdlog::warn(
          "TCP {} has a bearer token but no TLS: the token and kernels "
          "cross the network in clear text",
          parsed->ToString());
    }
    tcp = *parsed;
  }
  std::optional<TcpAddress> metrics_address;
  if (!config.metrics_address.empty()) {
    absl::StatusOr<TcpAddress> parsed = ParseTcpAddress(config.metrics_address);
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--metrics-address: ", parsed.status().message()));
    }
    metrics_address = *parsed;
  }
  const absl::Status cache_dir_made = MakeDirectories(config.cache_dir, 0700);
  if (cache_dir_made.ok()) {
    if (absl::Status status = CheckCacheDirectoryIsPrivate(config.cache_dir);
        !status.ok()) {
      if (!config.allow_shared_cache_dir) return status;
      spdlog::warn("{} (allowed by --allow-shared-cache-dir)",
                   std::string(status.message()));
    }
  }

  std::unique_ptr<Daemon> daemon(new Daemon());
  absl::StatusOr<UnixSocketClaim> claim =
      UnixSocketClaim::Claim(config.socket_path);
  if (!claim.ok()) return claim.status();
  daemon->socket_.emplace(*std::move(claim));

  absl::StatusOr<std::unique_ptr<cache::Cache>> cache =
      cache_dir_made.ok()
          ? OpenCache(config, config.cache_dir)
          : absl::StatusOr<std::unique_ptr<cache::Cache>>(cache_dir_made);
  if (!cache.ok() && !absl::IsInvalidArgument(cache.status()) &&
      !absl::IsFailedPrecondition(cache.status())) {
    // The directory cannot hold a cache (a full or failing disk, a file in
    // the way): kilnd still serves, from a private temporary cache.
    absl::StatusOr<std::string> temporary = MakeTemporaryCacheDirectory();
    if (!temporary.ok()) return cache.status();
    spdlog::error(
        "cache directory {} is unusable ({}); serving from a temporary cache "
        "in {}, deleted when kilnd stops",
        config.cache_dir, std::string(cache.status().message()), *temporary);
    daemon->temporary_cache_.path = *temporary;
    cache = OpenCache(config, *temporary);
  }
  if (!cache.ok()) return cache.status();
  daemon->cache_ = *std::move(cache);
  CompileEngineOptions engine_options;
  engine_options.worker_threads =
      config.compile_workers > 0
          ? config.compile_workers
          : std::max(1u, std::thread::hardware_concurrency());
  engine_options.max_queued_compiles = config.max_queued_compiles;
  engine_options.max_ir_bytes = static_cast<size_t>(config.max_request_bytes);
  engine_options.compile_time_limit = absl::Seconds(config.compile_timeout_s);
  engine_options.failed_compile_ttl =
      absl::Seconds(config.failed_compile_ttl_s);
  engine_options.cluster_lease_ttl =
      absl::Seconds(config.redis_compile_lease_s);
  absl::StatusOr<std::unique_ptr<CompileEngine>> engine =
      CompileEngine::Create(daemon->cache_.get(), std::move(engine_options));
  if (!engine.ok()) return engine.status();
  daemon->engine_ = *std::move(engine);

  HostCapabilities capabilities = ProbeHostCapabilities();
  const std::string version = capabilities.server_version;
  daemon->core_ = std::make_unique<ServiceCore>(daemon->engine_.get(),
                                                std::move(capabilities));
  daemon->core_->EnableAutotune(daemon->cache_.get());
  daemon->service_ =
      std::make_unique<KilnService>(daemon->core_.get(), bearer_token);

  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.SetMaxReceiveMessageSize(config.max_request_bytes);
  // Responses carry binaries: no limit beyond gRPC's own.
  builder.SetMaxSendMessageSize(-1);
  int unix_port = 0;
  builder.AddListeningPort(daemon->socket_->GrpcAddress(),
                           grpc::InsecureServerCredentials(), &unix_port);
  int tcp_port = 0;
  if (tcp.has_value()) {
    builder.AddListeningPort(tcp->ToString(), *tcp_credentials, &tcp_port);
  }
  builder.RegisterService(daemon->service_.get());
  // Reflection v1 beside gRPC's v1alpha plugin (server/reflection_v1.h).
  daemon->reflection_v1_ = MakeReflectionV1Service(
      {kiln::v1::Kiln::service_full_name(), "grpc.health.v1.Health",
       "grpc.reflection.v1alpha.ServerReflection"});
  builder.RegisterService(daemon->reflection_v1_.get());
  builder.experimental().SetInterceptorCreators(BadRequestInterceptors());
  // gRPC creates the unix socket while it starts: under this umask it is
  // born with its final mode (0660), never briefly open to everyone.
  const mode_t old_umask = umask(0117);
  daemon->server_ = builder.BuildAndStart();
  umask(old_umask);
  if (daemon->server_ == nullptr || unix_port == 0 ||
      (tcp.has_value() && tcp_port == 0)) {
    return absl::UnavailableError(absl::StrCat(
        "cannot listen on ", daemon->socket_->GrpcAddress(),
        tcp.has_value() ? absl::StrCat(" and ", tcp->ToString()) : "",
        " (is the TCP port in use? gRPC's log above says more)"));
  }

  // The socket exists only once the server is bound.
  if (absl::Status status = daemon->socket_->SetSocketMode(0660);
      !status.ok()) {
    return status;
  }
  daemon->server_->GetHealthCheckService()->SetServingStatus(
      kiln::v1::Kiln::service_full_name(), true);

  if (metrics_address.has_value()) {
    CompileEngine* engine = daemon->engine_.get();
    const absl::Time started = absl::Now();
    absl::StatusOr<std::unique_ptr<MetricsServer>> metrics =
        MetricsServer::Start(
            *metrics_address,
            [engine, started]() -> absl::StatusOr<std::string> {
              absl::StatusOr<cache::StoreStats> c = engine->CacheStats();
              if (!c.ok()) return c.status();
              return RenderMetrics(
                  engine->Stats(), *c,
                  absl::ToDoubleSeconds(absl::Now() - started));
            });
    if (!metrics.ok()) return metrics.status();
    daemon->metrics_ = *std::move(metrics);
    metrics_address->port = daemon->metrics_->port();
    spdlog::info("metrics on http://{}/metrics", metrics_address->ToString());
  }

  daemon->addresses_.push_back(daemon->socket_->GrpcAddress());
  if (tcp.has_value()) {
    tcp->port = tcp_port;
    daemon->addresses_.push_back(tcp->ToString());
  }
  spdlog::info("kilnd {} cache {}{}", version, config.cache_dir,
               config.redis_url.empty() ? "" : " with a shared Redis tier");
  for (const std::string& address : daemon->addresses_) {
    spdlog::info("listening on {}", address);
  }
  return daemon;
}

Daemon::TemporaryCache::~TemporaryCache() {
  if (path.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

int Daemon::metrics_port() const {
  return metrics_ != nullptr ? metrics_->port() : 0;
}

void Daemon::Shutdown(absl::Duration grace) {
  if (stopped_) return;
  stopped_ = true;
  metrics_.reset();
  if (server_ != nullptr) {
    server_->GetHealthCheckService()->Shutdown();
    server_->Shutdown(std::chrono::system_clock::now() +
                      absl::ToChronoNanoseconds(grace));
    server_->Wait();
  }
  // Compiles still running (their callers were cancelled) finish and are
  // stored, so their work is not lost.
  if (engine_ != nullptr) engine_->Shutdown();
  socket_.reset();
}

}  // namespace kiln::server
