// kiln-bench-worker: runs candidate kernels for kilnd's autotuner, one
// request at a time, so that a candidate that crashes or hangs takes down
// this process and never kilnd. Started by kilnd (server/tuning/
// worker_process.h) with a socket on stdin/stdout; speaks bench.proto in
// length-prefixed frames (framing.h); logs on stderr.
//
//   kiln-bench-worker --device cpu|cuda:N
//
// For each request: load the kernel, make the inputs (inputs.h; kept for
// the next request, which in a tuning wants the same), run once and send
// back every tensor the kernel changed (the autotuner checks them; an
// untouched input is marked so, without its data), then warm up and time
// runs until enough are taken.
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/kernel_metadata.h"
#include "server/bench_worker/bench.pb.h"
#include "server/bench_worker/bench_device.h"
#include "server/bench_worker/framing.h"
#include "server/bench_worker/inputs.h"

namespace kiln::bench {
namespace {

using v1::BenchReply;
using v1::BenchRequest;

// Test-only faults (see bench.proto): ends or stalls this process.
void InjectFault(const std::string& fault) {
  if (fault == "crash") {
    std::signal(SIGSEGV, SIG_DFL);
    std::raise(SIGSEGV);
  } else if (fault == "abort") {
    std::abort();
  } else if (fault == "hang") {
    for (;;) pause();
  }
}

// Flips a high exponent bit (floats) or the low bit (integers) of every
// element: far outside any tolerance.
void Corrupt(v1::Tensor& tensor) {
  std::string& data = *tensor.mutable_data();
  std::optional<runtime::DType> dtype = runtime::ParseDType(tensor.dtype());
  const int size =
      dtype.has_value() ? std::max(1, runtime::DTypeBits(*dtype) / 8) : 1;
  const bool integer = !dtype.has_value() || runtime::IsIntegerOrBool(*dtype);
  for (size_t i = 0; i + size <= data.size(); i += size) {
    if (integer) {
      data[i] ^= 0x01;
    } else {
      data[i + size - 1] ^= 0x40;
    }
  }
}

BenchReply Fail(const absl::Status& status) {
  BenchReply reply;
  reply.set_error(std::string(status.message()));
  return reply;
}

// The inputs of the last request, as made: a tuning asks for the same
// inputs (the same parameters, shape and seed) for every candidate, and
// making them (tens of millions of random values at GEMM shapes) costs far
// more than copying them. Also what tells outputs from untouched inputs.
struct InputCache {
  std::string key;
  std::optional<Inputs> pristine;
};

// Timed runs before a candidate may be dropped early (stop_above_us).
constexpr int kEarlyRuns = 3;

// Inputs larger than this are made afresh for every request, not kept.
constexpr uint64_t kMaxCachedInputBytes = uint64_t{2} << 30;

std::string InputsKey(const runtime::KernelMetadata& metadata,
                      const ShapeValues& shape, uint64_t seed) {
  std::string key = absl::StrCat(seed, ";");
  for (const auto& [name, value] : shape) {
    absl::StrAppend(&key, name, "=", value, ",");
  }
  for (const runtime::MetadataParam& p : metadata.params) {
    absl::StrAppend(&key, ";", p.name, ":",
                    std::string(runtime::DTypeName(p.dtype)),
                    p.is_tensor ? "[" : "");
    for (const runtime::MetadataDim& d : p.shape) {
      absl::StrAppend(&key, d.is_symbol() ? d.symbol : absl::StrCat(d.value),
                      ",");
    }
    for (const runtime::IntExpr& s : p.strides) {
      absl::StrAppend(&key, "/", s.text());
    }
  }
  return key;
}

// A copy of `from` whose tensor arguments point into the copy's buffers.
Inputs CopyInputs(const Inputs& from) {
  Inputs to = from;
  for (size_t p = 0; p < to.args.size() && p < to.buffers.size(); ++p) {
    if (to.args[p].is_tensor) to.args[p].data = to.buffers[p].data();
  }
  return to;
}

// Fresh inputs for `metadata` at `shape`, from the cache when they are the
// last request's.
absl::StatusOr<Inputs> InputsFor(const runtime::KernelMetadata& metadata,
                                 const ShapeValues& shape, uint64_t seed,
                                 InputCache& cache) {
  const std::string key = InputsKey(metadata, shape, seed);
  if (cache.pristine.has_value() && cache.key == key) {
    return CopyInputs(*cache.pristine);
  }
  cache.pristine.reset();
  absl::StatusOr<Inputs> made = MakeInputs(metadata, shape, seed);
  if (!made.ok()) return made.status();
  uint64_t bytes = 0;
  for (const std::vector<unsigned char>& b : made->buffers) bytes += b.size();
  if (bytes <= kMaxCachedInputBytes) {
    cache.key = key;
    cache.pristine = CopyInputs(*made);
  }
  return made;
}

BenchReply Handle(BenchDevice& device, const BenchRequest& request,
                  bool faults_enabled, InputCache& cache) {
  absl::StatusOr<runtime::KernelMetadata> metadata =
      runtime::ParseKernelMetadata(request.metadata());
  if (!metadata.ok()) return Fail(metadata.status());
  ShapeValues shape(request.shape().begin(), request.shape().end());
  absl::StatusOr<Inputs> inputs =
      InputsFor(*metadata, shape, request.seed(), cache);
  if (!inputs.ok()) return Fail(inputs.status());
  absl::StatusOr<std::unique_ptr<BenchKernel>> kernel =
      device.Prepare(request.binary(), request.metadata(), *inputs);
  if (!kernel.ok()) return Fail(kernel.status());

  if (faults_enabled) InjectFault(request.fault());
  // The checked run, on fresh inputs.
  if (absl::Status s = (*kernel)->Run(); !s.ok()) return Fail(s);
  BenchReply reply;
  if (request.return_outputs()) {
    if (absl::Status s = (*kernel)->ReadBack(); !s.ok()) return Fail(s);
    for (size_t p = 0; p < metadata->params.size(); ++p) {
      const runtime::MetadataParam& param = metadata->params[p];
      if (!param.is_tensor) continue;
      v1::Tensor* t = reply.add_tensors();
      t->set_name(param.name);
      t->set_dtype(std::string(runtime::DTypeName(param.dtype)));
      const std::vector<unsigned char>& buffer = inputs->buffers[p];
      const bool wrong = faults_enabled && request.fault() == "wrong";
      if (!wrong && cache.pristine.has_value() &&
          cache.pristine->buffers[p] == buffer) {
        t->set_unchanged(true);  // an input: no need to send it back
        continue;
      }
      t->set_data(buffer.data(), buffer.size());
      if (wrong) Corrupt(*t);
    }
  }
  for (int i = 0; i < request.warmup_runs(); ++i) {
    if (absl::Status s = (*kernel)->Run(); !s.ok()) return Fail(s);
  }
  const int max_runs = std::max(1, request.max_runs());
  double total_ms = 0;
  const absl::Time start = absl::Now();
  while (reply.times_us_size() < max_runs) {
    absl::StatusOr<double> us = (*kernel)->TimedRunUs();
    if (!us.ok()) return Fail(us.status());
    reply.add_times_us(*us);
    total_ms += *us / 1000;
    const double elapsed_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
    if (reply.times_us_size() >= request.min_runs() &&
        total_ms >= request.min_time_ms()) {
      break;
    }
    if (request.stop_above_us() > 0 && reply.times_us_size() == kEarlyRuns) {
      std::vector<double> first(reply.times_us().begin(),
                                reply.times_us().end());
      std::nth_element(first.begin(), first.begin() + kEarlyRuns / 2,
                       first.end());
      if (first[kEarlyRuns / 2] > request.stop_above_us()) break;
    }
    if (request.max_time_ms() > 0 && elapsed_ms >= request.max_time_ms()) {
      break;
    }
  }
  return reply;
}

int Main(int argc, char** argv) {
  // Die with kilnd, even while a candidate hangs: a worker must never
  // outlive the daemon that owns it. (PR_SET_PDEATHSIG would follow the
  // thread that started the worker, which may end long before kilnd; an
  // idle worker also sees end of stream when kilnd goes.)
  const pid_t parent = getppid();
  std::thread([parent] {
    while (getppid() == parent) usleep(200 * 1000);
    _exit(1);
  }).detach();
  std::string device_name = "cpu";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--device" && i + 1 < argc) {
      device_name = argv[++i];
    } else if (arg.rfind("--device=", 0) == 0) {
      device_name = arg.substr(9);
    } else {
      std::cerr << "usage: kiln-bench-worker --device cpu|cuda:N\n";
      return 2;
    }
  }
  const char* faults = std::getenv("KILN_BENCH_WORKER_FAULTS");
  const bool faults_enabled =
      faults != nullptr && std::strcmp(faults, "1") == 0;
  absl::StatusOr<std::unique_ptr<BenchDevice>> device =
      OpenBenchDevice(device_name);
  // The connection is the socket on stdin; stdout goes to stderr so that
  // nothing a kernel or library prints can corrupt the protocol.
  const int connection = dup(STDIN_FILENO);
  dup2(STDERR_FILENO, STDOUT_FILENO);
  std::string frame;
  InputCache cache;
  while (ReadFrame(connection, &frame).ok()) {
    BenchRequest request;
    BenchReply reply;
    if (!device.ok()) {
      reply = Fail(device.status());
    } else if (!request.ParseFromString(frame)) {
      reply.set_error("malformed benchmark request");
    } else {
      reply = Handle(**device, request, faults_enabled, cache);
    }
    std::string out;
    reply.SerializeToString(&out);
    if (!WriteFrame(connection, out).ok()) break;
  }
  return 0;  // kilnd closed the connection
}

}  // namespace
}  // namespace kiln::bench

int main(int argc, char** argv) { return kiln::bench::Main(argc, argv); }
