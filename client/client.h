// Client: the thin C++ client of kilnd. Connects over the daemon's unix socket
// (or TCP, with TLS or a bearer token) and calls it; links no compiler and no
// cache, so applications that only ask kilnd for kernels stay small. The
// embedded mode (client/embedded.h) gives the same Client with the compiler
// and cache in the caller's process instead of a daemon.
//
//   auto client = kiln::Client::Connect("");   // the default socket
//   kiln::KernelRequest request{.ir_text = text, .kernel = "gemm",
//                               .bindings = {{"BLOCK_M", 128}}};
//   absl::StatusOr<kiln::Kernel> kernel = (*client)->Compile(request);
//   kernel->Launch({kiln::runtime::ArgValue::Tensor(a, kF16, {M, K}), ...},
//                  stream);                    // no daemon call
#ifndef KILN_CLIENT_CLIENT_H_
#define KILN_CLIENT_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "client/kernel.h"
#include "proto/kiln.pb.h"

namespace kiln::client {

// The gRPC target for a user-given daemon address: empty means the default
// socket (proto/default_address.h); "/PATH" and "unix:PATH" mean a unix
// socket; "HOST:PORT" (also "dns:", "ipv4:", "ipv6:" targets) means TCP.
// InvalidArgument for anything else.
absl::StatusOr<std::string> ToGrpcTarget(absl::string_view address);

struct ConnectOptions {
  // How long Connect() waits for the daemon to accept the connection.
  absl::Duration timeout = absl::Seconds(2);
  // TLS (TCP only): PEM text of the CA that signed the daemon's
  // certificate; non-empty turns TLS on. With a client certificate and key
  // (PEM text) the client authenticates itself too (mutual TLS).
  std::string tls_root_certs;
  std::string tls_client_cert;
  std::string tls_client_key;
  // Checks the daemon's certificate against this name instead of the host
  // in the address (for tests and IP addresses).
  std::string tls_server_name;
  // Sent as "authorization: Bearer TOKEN" on every call when not empty.
  std::string bearer_token;
};

// One kernel to compile (see kiln.v1.CompileRequest).
struct KernelRequest {
  std::string ir_text;  // the tile-IR program
  std::string kernel;   // may be empty when the program has one kernel
  // "auto": the daemon's first GPU, else "cpu"; or "cpu", "sm_90a", ...
  std::string target = "auto";
  std::map<std::string, int64_t> bindings;  // tunables and fixed symbols
  std::string filename;                     // for diagnostics
  absl::Duration timeout = absl::InfiniteDuration();
};

// The name of a tier, as Kernel::tier() gives it: "memory", "local",
// "remote", "compiled"; "" for an unknown one.
std::string TierName(kiln::v1::Tier tier);

// The transport under a Client: gRPC to a daemon, or the service in process.
class Transport;

// Thread-safe: any number of threads may call one Client at once.
class Client {
 public:
  // Connects to the kilnd at `address` (see ToGrpcTarget). InvalidArgument
  // for a malformed address; Unavailable, naming the address, when no daemon
  // accepts the connection within `options.timeout` (at once when a unix
  // socket does not exist).
  static absl::StatusOr<std::unique_ptr<Client>> Connect(
      absl::string_view address, ConnectOptions options = {});

  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // The gRPC target it is connected to ("unix:/run/user/1000/kiln/...").
  const std::string& target() const { return target_; }

  // Asks the standard gRPC health service. OK when the daemon is serving;
  // Unavailable when it is shutting down or unreachable; other codes as the
  // transport reports them (DeadlineExceeded after `timeout`).
  absl::Status Health(absl::Duration timeout = absl::Seconds(5)) const;

  // The daemon's version, targets, GPUs and toolchains. Errors as for
  // Health().
  absl::StatusOr<kiln::v1::CapabilitiesResponse> Capabilities(
      absl::Duration timeout = absl::Seconds(5)) const;

  // The kernel handle for `request` (from the daemon's cache or compiled),
  // loaded and ready to launch. Errors carry the daemon's code and message:
  // InvalidArgument with FILE:LINE:COL lines for bad programs, unknown
  // targets and missing tunables; NotFound for an unknown kernel;
  // DeadlineExceeded; Unavailable when the daemon cannot be reached. The
  // handle's binary is loaded here (FailedPrecondition when this process
  // cannot run the target, e.g. a CUDA kernel without a GPU).
  absl::StatusOr<Kernel> Compile(const KernelRequest& request) const;

  // The same, returning the raw response without loading the binary (for
  // tools that store or forward handles).
  absl::StatusOr<kiln::v1::CompileResponse> CompileRaw(
      const KernelRequest& request, bool omit_binary = false) const;

  // A stored kernel by binary key, loaded. NotFound when the daemon has
  // none.
  absl::StatusOr<Kernel> GetKernel(const std::string& key) const;

  // Whether the daemon's local cache holds `key`.
  absl::StatusOr<bool> Lookup(const std::string& key) const;
  // The key `request` would get and whether it is cached (not compiled).
  absl::StatusOr<kiln::v1::LookupResponse> Lookup(
      const KernelRequest& request) const;

  // Compiles a batch, calling `progress` once per request as it finishes
  // (if set). Returns the final status of the stream; per-request failures
  // are in their progress messages.
  absl::Status Prewarm(
      const std::vector<KernelRequest>& requests,
      const std::function<void(const kiln::v1::PrewarmProgress&)>& progress =
          nullptr,
      absl::Duration timeout = absl::InfiniteDuration()) const;

  // Tunes one kernel at one shape (kiln.v1.Autotune), calling `progress`
  // for every event as it streams in (if set), and returns the final result
  // (the last event's; `cached` says it was stored already). Errors carry
  // the daemon's code: InvalidArgument for bad programs, shapes, bindings or
  // options; NotFound for an unknown kernel; FailedPrecondition when the
  // target has no device there or no candidate ran correctly; Unavailable
  // when the daemon cannot be reached.
  absl::StatusOr<kiln::v1::AutotuneResult> Autotune(
      const kiln::v1::AutotuneRequest& request,
      const std::function<void(const kiln::v1::AutotuneProgress&)>& progress =
          nullptr,
      absl::Duration timeout = absl::InfiniteDuration()) const;

  absl::StatusOr<kiln::v1::StatsResponse> Stats() const;
  absl::StatusOr<kiln::v1::ListKernelsResponse> ListKernels(
      const kiln::v1::ListKernelsRequest& request = {}) const;
  absl::StatusOr<kiln::v1::EvictResponse> Evict(
      const std::vector<std::string>& keys) const;

  // Sends `payload` and returns it: one round trip with no work.
  absl::StatusOr<std::string> Echo(const std::string& payload) const;

  // For embedded mode (client/embedded.h).
  Client(std::string target, std::unique_ptr<Transport> transport);

 private:
  std::string target_;
  std::unique_ptr<Transport> transport_;
};

// Converts a KernelRequest into its protocol message.
kiln::v1::CompileRequest ToProto(const KernelRequest& request);

// The interface both transports implement. Deadlines are absolute.
class Transport {
 public:
  virtual ~Transport() = default;
  virtual absl::Status Health(absl::Time deadline) = 0;
  virtual absl::StatusOr<kiln::v1::CapabilitiesResponse> Capabilities(
      absl::Time deadline) = 0;
  virtual absl::StatusOr<kiln::v1::CompileResponse> Compile(
      const kiln::v1::CompileRequest& request, absl::Time deadline) = 0;
  virtual absl::StatusOr<kiln::v1::GetKernelResponse> GetKernel(
      const kiln::v1::GetKernelRequest& request) = 0;
  virtual absl::StatusOr<kiln::v1::LookupResponse> Lookup(
      const kiln::v1::LookupRequest& request) = 0;
  virtual absl::Status Prewarm(
      const kiln::v1::PrewarmRequest& request, absl::Time deadline,
      const std::function<void(const kiln::v1::PrewarmProgress&)>&
          progress) = 0;
  virtual absl::Status Autotune(
      const kiln::v1::AutotuneRequest& request, absl::Time deadline,
      const std::function<void(const kiln::v1::AutotuneProgress&)>&
          progress) = 0;
  virtual absl::StatusOr<kiln::v1::StatsResponse> Stats() = 0;
  virtual absl::StatusOr<kiln::v1::ListKernelsResponse> ListKernels(
      const kiln::v1::ListKernelsRequest& request) = 0;
  virtual absl::StatusOr<kiln::v1::EvictResponse> Evict(
      const kiln::v1::EvictRequest& request) = 0;
  virtual absl::StatusOr<kiln::v1::EchoResponse> Echo(
      const kiln::v1::EchoRequest& request) = 0;
};

}  // namespace kiln::client

namespace kiln {
using client::Client;
using client::ConnectOptions;
using client::KernelRequest;
}  // namespace kiln

#endif  // KILN_CLIENT_CLIENT_H_
