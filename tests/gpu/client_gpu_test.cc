// The C++ client on the GPU: kilnd compiles the corpus GEMM for the host's
// GPU (target "auto"), the client loads the cubin and launches it on a
// stream with no further call to the daemon, and the result is checked
// against a host reference on fresh random data with ragged shapes.
// Skips (GTEST_SKIP, with the reason) where there is no GPU or no kilnd.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "client/client.h"
#include "runtime/cuda/cuda_device.h"
#include "tests/e2e/dtype_codec.h"
#include "tests/support/kilnd_process.h"

namespace kiln {
namespace {

std::string KilndPath() {
  const char* env = std::getenv("KILN_KILND");
  return env != nullptr ? env : KILN_KILND_PATH;
}

std::string ReadCorpus(const std::string& name) {
  const char* dir = std::getenv("KILN_CORPUS_DIR");
  std::ifstream in(std::string(dir != nullptr ? dir : KILN_CORPUS_DIR) + "/" +
                   name);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(ClientGpuTest, CompilesThroughKilndAndLaunchesTheGemm) {
  absl::StatusOr<std::vector<runtime::cuda::DeviceInfo>> devices =
      runtime::cuda::ListDevices();
  if (!devices.ok()) GTEST_SKIP() << "no GPU: " << devices.status();
  ASSERT_TRUE(runtime::cuda::UseDevice(0).ok());
  const std::string gemm = ReadCorpus("gemm.tile");
  ASSERT_FALSE(gemm.empty()) << "tests/compiler/corpus/gemm.tile not found";

  auto kilnd = testing::KilndProcess::Start(KilndPath());
  ASSERT_TRUE(kilnd.ok()) << kilnd.status();
  auto client = Client::Connect((*kilnd)->address());
  ASSERT_TRUE(client.ok()) << client.status();
  auto caps = (*client)->Capabilities();
  ASSERT_TRUE(caps.ok()) << caps.status();
  ASSERT_GE(caps->gpus_size(), 1);
  std::cout << "gpu 0: " << caps->gpus(0).name() << " target "
            << caps->gpus(0).target() << " sku " << caps->gpus(0).sku() << "\n";

  KernelRequest request;
  request.ir_text = gemm;
  request.filename = "gemm.tile";
  request.target = "auto";
  request.bindings = {{"BM", 128}, {"BN", 128}, {"BK", 32}, {"STAGES", 3}};
  absl::StatusOr<Kernel> kernel = (*client)->Compile(request);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_EQ(kernel->target(), caps->gpus(0).target());
  EXPECT_EQ(kernel->tier(), "compiled");

  std::mt19937 rng(std::random_device{}());
  for (auto [m, n, k] : {std::array<int64_t, 3>{512, 256, 128},
                         std::array<int64_t, 3>{333, 517, 200},
                         // The same shape again, new buffers: the launch
                         // reuses the last binding (only pointers change).
                         std::array<int64_t, 3>{333, 517, 200}}) {
    std::normal_distribution<float> dist;
    std::vector<uint16_t> a(m * k), b(k * n), c(m * n, 0x7e00);  // NaN
    std::vector<float> af(m * k), bf(k * n);
    for (int64_t i = 0; i < m * k; ++i) {
      a[i] =
          static_cast<uint16_t>(e2e::Encode(runtime::DType::kF16, dist(rng)));
      af[i] = static_cast<float>(e2e::Decode(runtime::DType::kF16, a[i]));
    }
    for (int64_t i = 0; i < k * n; ++i) {
      b[i] =
          static_cast<uint16_t>(e2e::Encode(runtime::DType::kF16, dist(rng)));
      bf[i] = static_cast<float>(e2e::Decode(runtime::DType::kF16, b[i]));
    }
    auto da = runtime::cuda::DeviceBuffer::Allocate(a.size() * 2);
    auto db = runtime::cuda::DeviceBuffer::Allocate(b.size() * 2);
    auto dc = runtime::cuda::DeviceBuffer::Allocate(c.size() * 2);
    ASSERT_TRUE(da.ok() && db.ok() && dc.ok());
    ASSERT_TRUE(da->CopyFrom(a.data(), a.size() * 2).ok());
    ASSERT_TRUE(db->CopyFrom(b.data(), b.size() * 2).ok());
    ASSERT_TRUE(dc->CopyFrom(c.data(), c.size() * 2).ok());
    using runtime::ArgValue;
    absl::Status launched = kernel->Launch(
        {ArgValue::Tensor(da->data(), runtime::DType::kF16, {m, k}),
         ArgValue::Tensor(db->data(), runtime::DType::kF16, {k, n}),
         ArgValue::Tensor(dc->data(), runtime::DType::kF16, {m, n})},
        nullptr);
    ASSERT_TRUE(launched.ok()) << launched;
    ASSERT_TRUE(dc->CopyTo(c.data(), c.size() * 2).ok());  // synchronises
    int64_t bad = 0;
    double worst = 0;
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        double ref = 0;
        for (int64_t p = 0; p < k; ++p)
          ref += double(af[i * k + p]) * bf[p * n + j];
        const double got = e2e::Decode(runtime::DType::kF16, c[i * n + j]);
        const double err = std::abs(got - ref);
        worst = std::max(worst, err);
        if (!(err <= 2e-2 * std::abs(ref) + 5e-2)) ++bad;
      }
    }
    EXPECT_EQ(bad, 0) << m << "x" << n << "x" << k << ": worst error " << worst;
    // Same shapes with a null pointer: refused, naming the parameter.
    absl::Status null_launch = kernel->Launch(
        {ArgValue::Tensor(nullptr, runtime::DType::kF16, {m, k}),
         ArgValue::Tensor(db->data(), runtime::DType::kF16, {k, n}),
         ArgValue::Tensor(dc->data(), runtime::DType::kF16, {m, n})},
        nullptr);
    EXPECT_EQ(null_launch.code(), absl::StatusCode::kInvalidArgument)
        << null_launch;
    std::cout << "gemm " << m << "x" << n << "x" << k << " through kilnd on "
              << kernel->target() << ": worst abs error " << worst << "\n";
  }
}

}  // namespace
}  // namespace kiln
