// The end-to-end harness: corpus programs compiled for the CPU target
// (tunables chosen from their `where`-valid combinations), loaded with the CPU
// runtime and launched on host tensors; a fixture whose random inputs are
// seeded from the test's name and a fixed seed, printed with every failure.
#ifndef KILN_TESTS_E2E_E2E_HARNESS_H_
#define KILN_TESTS_E2E_E2E_HARNESS_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "runtime/cpu/cpu_kernel.h"
#include "tests/e2e/host_tensor.h"

namespace kiln::e2e {

using Bindings = std::map<std::string, int64_t>;

// The text of tests/compiler/corpus/`file`.
const std::string& CorpusSource(const std::string& file);

// Every tunable combination of `kernel` in `file` that satisfies its `where`
// constraints, in candidate order (the first tunable varies slowest).
absl::StatusOr<std::vector<Bindings>> ValidBindings(const std::string& file,
                                                    const std::string& kernel);

// The first valid combination that agrees with `fixed` (tunables set by the
// test; empty: the first valid combination). NotFound when none does.
absl::StatusOr<Bindings> PickBindings(const std::string& file,
                                      const std::string& kernel,
                                      const Bindings& fixed = {});

// "BM=64 BN=64": for test output.
std::string BindingsText(const Bindings& b);

// The kernel compiled for the CPU with `bindings` and loaded; compiled once
// per (file, kernel, bindings) and kept for the whole run. The error is
// Compile()'s or Load()'s status, with the file, kernel and bindings.
absl::StatusOr<const runtime::CpuKernel*> LoadKernel(const std::string& file,
                                                     const std::string& kernel,
                                                     const Bindings& bindings);

// "file:kernel:bindings" of a kernel LoadKernel returned ("?" otherwise).
std::string DescribeKernel(const runtime::CpuKernel* kernel);

// Kernels the tests exercise, registered next to the tests
// (KILN_E2E_COVERS) and checked against the corpus by coverage_test.cc.
struct CoveredKernel {
  std::string file;
  std::string kernel;
};
std::vector<CoveredKernel>& CoveredKernels();
bool RegisterCoverage(const char* file, const char* kernel);

#define KILN_E2E_CONCAT_INNER(a, b) a##b
#define KILN_E2E_CONCAT(a, b) KILN_E2E_CONCAT_INNER(a, b)
// Declares that this file's tests check `kernel` of corpus file `file`.
#define KILN_E2E_COVERS(file, kernel)                                      \
  [[maybe_unused]] static const bool KILN_E2E_CONCAT(kCovers_, __LINE__) = \
      ::kiln::e2e::RegisterCoverage(file, kernel)

// The fixed part of every test's seed; KILN_E2E_SEED overrides it.
inline constexpr uint64_t kDefaultSeed = 20240917;

// Base fixture: rng() is seeded from the fixed seed and "Suite.Test", and
// every failure of the test prints both (re-run with KILN_E2E_SEED=...).
class E2eTest : public ::testing::Test {
 protected:
  E2eTest();
  Rng& rng() { return rng_; }
  uint64_t seed() const { return seed_; }

  // A tensor filled by HostTensor::FillRandom(rng(), lo, hi).
  HostTensor Random(DType dtype, std::vector<int64_t> shape, double lo,
                    double hi, std::vector<int64_t> strides = {});

  // Loads the kernel (tunables: the first valid combination agreeing with
  // `fixed`) or fails the test with the compiler's message.
  const runtime::CpuKernel* Kernel(const std::string& file,
                                   const std::string& kernel,
                                   const Bindings& fixed = {});

 private:
  static uint64_t FixedSeed();
  static uint64_t SeedForCurrentTest();

  uint64_t seed_;
  Rng rng_;
  ::testing::ScopedTrace trace_;
};

// The arguments of one launch, in parameter order, with the checks every
// launch gets: outputs are poisoned first (NaN / 0xA5 patterns) so that an
// element the kernel does not write is caught; inputs are snapshotted and
// must come back unchanged; no tensor may be written outside its data.
// The tensors must outlive Run().
class Launch {
 public:
  Launch& In(HostTensor& t);     // read only
  Launch& Out(HostTensor& t);    // poisoned, then fully written
  Launch& InOut(HostTensor& t);  // updated in place (or accumulated into)
  Launch& Scalar(const runtime::ArgValue& v);

  // Launches and checks. Failure carries the launch status or the broken
  // check.
  ::testing::AssertionResult Run(const runtime::CpuKernel& kernel);

 private:
  std::vector<runtime::ArgValue> args_;
  std::vector<HostTensor*> tensors_;
  std::vector<std::pair<HostTensor*, HostTensor>> inputs_;  // and snapshots
};

}  // namespace kiln::e2e

// Loads a kernel into `var` or returns from the test (after the failure);
// later failures in the scope name the kernel and its tunables.
#define KILN_E2E_LOAD(var, ...)                                \
  const ::kiln::runtime::CpuKernel* var = Kernel(__VA_ARGS__); \
  if (var == nullptr) return;                                  \
  SCOPED_TRACE(::kiln::e2e::DescribeKernel(var))

#endif  // KILN_TESTS_E2E_E2E_HARNESS_H_
