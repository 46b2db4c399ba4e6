// An application outside Kiln's tree using the installed thin client
// (tests/install): built with find_package(Kiln) and with pkg-config.
//   kiln_example            connects to a socket that does not exist and
//                           expects a clean Unavailable error
//   kiln_example ADDRESS    connects to the kilnd at ADDRESS, checks its
//                           health, compiles a CPU kernel through it and
//                           launches it, checking the result
#include <iostream>
#include <memory>
#include <vector>

#include "client/client.h"

int main(int argc, char** argv) {
  if (argc == 1) {
    absl::StatusOr<std::unique_ptr<kiln::client::Client>> client =
        kiln::client::Client::Connect("unix:/nonexistent/kiln/kilnd.sock");
    if (client.ok() || !absl::IsUnavailable(client.status())) {
      std::cerr << "expected Unavailable, got "
                << (client.ok() ? "a connection" : client.status().ToString())
                << "\n";
      return 1;
    }
    std::cout << "ok: no daemon: " << client.status().message() << "\n";
    return 0;
  }
  absl::StatusOr<std::unique_ptr<kiln::client::Client>> client =
      kiln::client::Client::Connect(argv[1]);
  if (!client.ok()) {
    std::cerr << client.status() << "\n";
    return 1;
  }
  if (absl::Status health = (*client)->Health(); !health.ok()) {
    std::cerr << health << "\n";
    return 1;
  }
  absl::StatusOr<kiln::v1::CapabilitiesResponse> caps =
      (*client)->Capabilities();
  if (!caps.ok()) {
    std::cerr << caps.status() << "\n";
    return 1;
  }
  kiln::KernelRequest request;
  request.ir_text = R"(
kernel axpy(X: f32[N], Y: f32[N], a: f32)
  grid(ceildiv(N, 128)) threads(32) (bx) {
  alloc fragment T: f32[128]
  alloc fragment U: f32[128]
  copy X[bx * 128:+128] -> T
  copy Y[bx * 128:+128] -> U
  parallel (i) in (128) {
    U[i] = T[i] * a + U[i]
  }
  copy U -> Y[bx * 128:+128]
}
)";
  request.target = "cpu";
  absl::StatusOr<kiln::Kernel> kernel = (*client)->Compile(request);
  if (!kernel.ok()) {
    std::cerr << kernel.status() << "\n";
    return 1;
  }
  const int64_t n = 1000;
  std::vector<float> x(n), y(n);
  for (int64_t i = 0; i < n; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  using kiln::runtime::ArgValue;
  using kiln::runtime::DType;
  absl::Status launched = kernel->Launch(
      {ArgValue::Tensor(x.data(), DType::kF32, {n}),
       ArgValue::Tensor(y.data(), DType::kF32, {n}), ArgValue::F32(2.0f)});
  if (!launched.ok()) {
    std::cerr << launched << "\n";
    return 1;
  }
  for (int64_t i = 0; i < n; ++i) {
    if (y[i] != 2.0f * static_cast<float>(i) + 1.0f) {
      std::cerr << "y[" << i << "] = " << y[i] << "\n";
      return 1;
    }
  }
  std::cout << "ok: kilnd " << caps->server_version() << " at "
            << (*client)->target() << " compiled " << kernel->name() << " ("
            << kernel->tier() << "), launched and checked\n";
  return 0;
}
