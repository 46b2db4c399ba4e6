// The autotuner's building blocks: benchmark inputs made from the
// parameter ABI (server/bench_worker/inputs.h), the output check with its
// dtype tolerances (output_check.h), resource pruning (resource_check.h)
// and the worker's framing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "runtime/kernel_metadata.h"
#include "server/bench_worker/bench_device.h"
#include "server/bench_worker/framing.h"
#include "server/bench_worker/inputs.h"
#include "server/tuning/output_check.h"
#include "server/tuning/resource_check.h"
#include "server/tuning/worker_process.h"

namespace kiln::server::tuning {
namespace {

using ::testing::HasSubstr;

constexpr char kMetadata[] = R"(kiln-kernel 1
name gemm
target cpu
entry kiln_gemm
symbols M N K
param A tensor f16 M K
param B tensor f32 K N
param C tensor i8 M N
param alpha scalar f32
param n scalar i32
grid (ceildiv N 64) (ceildiv M 64) 1
block 128 1 1
shared-bytes 0
)";

runtime::KernelMetadata Metadata(const std::string& text = kMetadata) {
  auto m = runtime::ParseKernelMetadata(text);
  EXPECT_TRUE(m.ok()) << m.status();
  return m.ok() ? *m : runtime::KernelMetadata{};
}

TEST(BenchInputsTest, FollowTheAbiAreSeededAndNeverZero) {
  const runtime::KernelMetadata m = Metadata();
  const bench::ShapeValues shape = {{"M", 5}, {"N", 7}, {"K", 3}, {"n", 9}};
  auto a = bench::MakeInputs(m, shape, 42);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->args.size(), 5u);
  EXPECT_EQ(a->args[0].shape, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(a->buffers[0].size(), 5u * 3 * 2);  // f16
  EXPECT_EQ(a->buffers[1].size(), 3u * 7 * 4);  // f32
  EXPECT_EQ(a->buffers[2].size(), 5u * 7);      // i8
  EXPECT_EQ(a->args[4].IntegerValue(), 9);      // n from the shape
  for (size_t i = 0; i < 3 * 7; ++i) {
    float v;
    std::memcpy(&v, a->buffers[1].data() + 4 * i, 4);
    EXPECT_NE(v, 0.0f);
    EXPECT_LE(std::abs(v), 1.0f);
  }
  for (size_t i = 0; i < 5 * 3; ++i) {
    uint16_t h;
    std::memcpy(&h, a->buffers[0].data() + 2 * i, 2);
    EXPECT_NE(h & 0x7fff, 0) << "f16 element " << i << " is zero";
  }
  for (unsigned char c : a->buffers[2]) EXPECT_NE(c, 0);

  auto same = bench::MakeInputs(m, shape, 42);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(same->buffers, a->buffers);
  auto other = bench::MakeInputs(m, shape, 43);
  ASSERT_TRUE(other.ok());
  EXPECT_NE(other->buffers, a->buffers);
}

TEST(BenchInputsTest, AMissingSymbolIsNamed) {
  auto inputs = bench::MakeInputs(Metadata(), {{"M", 5}, {"N", 7}}, 1);
  ASSERT_FALSE(inputs.ok());
  EXPECT_THAT(inputs.status().message(), HasSubstr("symbol K"));
  auto huge = bench::MakeInputs(
      Metadata(), {{"M", 1 << 20}, {"N", 1 << 20}, {"K", 1 << 20}}, 1);
  EXPECT_FALSE(huge.ok());
}

TEST(BenchDeviceTest, NamesAreCheckedAndNoGpuIsAnErrorNotACrash) {
  EXPECT_TRUE(absl::IsInvalidArgument(bench::OpenBenchDevice("gpu").status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(bench::OpenBenchDevice("cuda:x").status()));
  EXPECT_TRUE(bench::OpenBenchDevice("cpu").ok());
  auto gpu = bench::OpenBenchDevice("cuda:0");
  ASSERT_TRUE(gpu.ok()) << gpu.status();
  auto inputs =
      bench::MakeInputs(Metadata(), {{"M", 2}, {"N", 2}, {"K", 2}}, 1);
  ASSERT_TRUE(inputs.ok());
  // On a host without a GPU (CI), loading fails with the driver's reason;
  // on one with a GPU, these bytes are not a cubin.
  EXPECT_FALSE((*gpu)->Prepare("not a cubin", kMetadata, *inputs).ok());
}

kiln::bench::v1::Tensor Tensor(const std::string& dtype, const void* data,
                               size_t size) {
  kiln::bench::v1::Tensor t;
  t.set_name("C");
  t.set_dtype(dtype);
  t.set_data(data, size);
  return t;
}

TEST(OutputCheckTest, ToleranceDependsOnTheDtype) {
  Tensors expected, close, far;
  const float e[3] = {1.0f, -2.0f, 0.5f};
  const float c[3] = {1.0005f, -2.001f, 0.5f};
  const float f[3] = {1.0f, -2.0f, 0.6f};
  *expected.Add() = Tensor("f32", e, sizeof e);
  *close.Add() = Tensor("f32", c, sizeof c);
  *far.Add() = Tensor("f32", f, sizeof f);
  EXPECT_EQ(CompareOutputs(close, expected), "");
  EXPECT_THAT(CompareOutputs(far, expected),
              HasSubstr("C[2] is 0.6, expected 0.5"));
  EXPECT_THAT(CompareOutputs(far, expected), HasSubstr("1 of 3 elements"));

  // Integers are exact.
  Tensors ie, ig;
  const int32_t a[2] = {7, 8}, b[2] = {7, 9};
  *ie.Add() = Tensor("i32", a, sizeof a);
  *ig.Add() = Tensor("i32", b, sizeof b);
  EXPECT_THAT(CompareOutputs(ig, ie), HasSubstr("C[1] is 9, expected 8"));
  // f16: 1.0 (0x3c00) against 1.0078125 (0x3c08) is within 2e-2.
  Tensors he, hg;
  const uint16_t h1 = 0x3c00, h2 = 0x3c08, h3 = 0x4000;
  *he.Add() = Tensor("f16", &h1, 2);
  *hg.Add() = Tensor("f16", &h2, 2);
  EXPECT_EQ(CompareOutputs(hg, he), "");
  *hg.Mutable(0) = Tensor("f16", &h3, 2);
  EXPECT_THAT(CompareOutputs(hg, he), HasSubstr("is 2, expected 1"));
  // A different tensor count or size is a mismatch too.
  EXPECT_THAT(CompareOutputs(Tensors(), he), HasSubstr("returned 0 tensors"));
}

TEST(OutputCheckTest, UntouchedInputsMatchOnlyUntouchedInputs) {
  kiln::bench::v1::Tensor kept;
  kept.set_name("C");
  kept.set_dtype("f32");
  kept.set_unchanged(true);
  const float e[2] = {1.0f, 2.0f};
  Tensors both_kept, written, also_kept;
  *both_kept.Add() = kept;
  *also_kept.Add() = kept;
  *written.Add() = Tensor("f32", e, sizeof e);
  EXPECT_EQ(CompareOutputs(also_kept, both_kept), "");
  EXPECT_EQ(CompareOutputs(written, both_kept),
            "wrote C, which the reference leaves as it was");
  EXPECT_EQ(CompareOutputs(both_kept, written),
            "left C as it was, which the reference writes");
  // Bit-identical tensors match at once; a NaN in both is fine too.
  const float n[2] = {NAN, 2.0f};
  Tensors nan_a, nan_b;
  *nan_a.Add() = Tensor("f32", n, sizeof n);
  *nan_b.Add() = Tensor("f32", n, sizeof n);
  EXPECT_EQ(CompareOutputs(nan_a, nan_b), "");
}

TEST(ResourceCheckTest, GpuLimitsPruneAndTheCpuHasNone) {
  std::string big = kMetadata;
  big.replace(big.find("target cpu"), 10, "target sm_90");
  big.replace(big.find("shared-bytes 0"), 14, "shared-bytes 262144");
  EXPECT_EQ(ResourceExcess(kMetadata, "cpu"), "");
  EXPECT_THAT(ResourceExcess(big, "sm_90"),
              HasSubstr("needs 262144 bytes of shared memory per block; "
                        "sm_90 allows 232448"));
  std::string regs = kMetadata;
  regs.replace(regs.find("target cpu"), 10, "target sm_80");
  regs +=
      "ptxas registers 255 spill-stores 0 spill-loads 0 stack 0 "
      "static-shared 0\n";
  regs.replace(regs.find("block 128 1 1"), 13, "block 512 1 1");
  EXPECT_THAT(ResourceExcess(regs, "sm_80"),
              HasSubstr("registers per block (255 x 512 threads)"));
  EXPECT_THAT(ResourceExcess("junk", "sm_90"), HasSubstr("does not parse"));
}

TEST(ResourceCheckTest, SpillsAreReportedFromThePtxasRecord) {
  std::string spilling = kMetadata;
  spilling +=
      "ptxas registers 255 spill-stores 96 spill-loads 64 stack 128 "
      "static-shared 0\n";
  EXPECT_EQ(SpillReport(spilling),
            "spills registers to local memory (ptxas: 96 bytes of spill "
            "stores, 64 of spill loads, 128-byte stack)");
  EXPECT_EQ(SpillReport(kMetadata), "");
  std::string clean = kMetadata;
  clean +=
      "ptxas registers 128 spill-stores 0 spill-loads 0 stack 0 "
      "static-shared 0\n";
  EXPECT_EQ(SpillReport(clean), "");
}

TEST(FramingTest, FramesRoundTripAndEndOfStreamIsUnavailable) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
  ASSERT_TRUE(bench::WriteFrame(sv[0], "hello").ok());
  ASSERT_TRUE(bench::WriteFrame(sv[0], "").ok());
  std::string got;
  ASSERT_TRUE(bench::ReadFrame(sv[1], &got).ok());
  EXPECT_EQ(got, "hello");
  ASSERT_TRUE(bench::ReadFrame(sv[1], &got).ok());
  EXPECT_EQ(got, "");
  absl::Status timeout =
      bench::ReadFrame(sv[1], &got, absl::Now() + absl::Milliseconds(20));
  EXPECT_TRUE(absl::IsDeadlineExceeded(timeout)) << timeout;
  close(sv[0]);
  EXPECT_TRUE(absl::IsUnavailable(bench::ReadFrame(sv[1], &got)));
  // Writing to a closed peer is an error, not SIGPIPE.
  EXPECT_TRUE(absl::IsUnavailable(bench::WriteFrame(sv[1], "x")));
  close(sv[1]);
}

TEST(WorkerProcessTest, AnswersAndIsReplacedWhenKilledWhileIdle) {
  absl::StatusOr<std::string> path = FindBenchWorker();
  ASSERT_TRUE(path.ok()) << path.status();
  WorkerProcess worker(*path, "cpu", false);
  kiln::bench::v1::BenchRequest request;  // no kernel: an error reply
  auto reply = worker.Call(request, absl::Seconds(10));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_THAT(reply->error(), HasSubstr("kiln-kernel 1"));
  ASSERT_GT(worker.pid(), 0);
  kill(worker.pid(), SIGKILL);
  absl::SleepFor(absl::Milliseconds(100));
  reply = worker.Call(request, absl::Seconds(10));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(worker.starts(), 2);

  WorkerProcess missing("/nonexistent/kiln-bench-worker", "cpu", false);
  EXPECT_TRUE(
      absl::IsUnavailable(missing.Call(request, absl::Seconds(1)).status()));
}

}  // namespace
}  // namespace kiln::server::tuning
