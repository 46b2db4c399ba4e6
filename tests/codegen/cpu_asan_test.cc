// CPU kernels instrumented with AddressSanitizer (KILN_CPU_SANITIZE=address,
// CpuCodegenOptions::address_sanitizer), run in a process that carries
// ASan's runtime: ctest starts this binary with LD_PRELOAD of
// libclang_rt.asan and KILN_CPU_SANITIZE=address
// (tests/codegen/CMakeLists.txt), as it starts the e2e suite a second time.
// A kernel that reads past its tensor dies with ASan's report; a correct
// one runs as it does uninstrumented.
#include <dlfcn.h>

#include <memory>
#include <vector>

#include "compiler/compile.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cpu/cpu_kernel.h"

namespace kiln {
namespace {

using runtime::ArgValue;
using runtime::DType;

// Each block adds a tile of 64 elements through tiles on its stack.
constexpr char kTiledAdd[] = R"(
kernel tiled_add(A: f32[N], B: f32[N], C: f32[N])
  grid(ceildiv(N, 64)) threads(64) (bx) {
  alloc fragment a: f32[64]
  alloc fragment b: f32[64]
  copy A[bx * 64:+64] -> a
  copy B[bx * 64:+64] -> b
  parallel (i) in (64) {
    a[i] = a[i] + b[i]
  }
  copy a -> C[bx * 64:+64]
}
)";

// Compiled as every CPU compile is (compiler::Compile; the environment
// asks for the instrumentation) and loaded.
absl::StatusOr<std::unique_ptr<runtime::CpuKernel>> Build(
    std::string* llvm_ir = nullptr) {
  compiler::CompileOptions options;
  options.target = "cpu";
  absl::StatusOr<compiler::CompiledKernel> compiled =
      compiler::Compile(kTiledAdd, options);
  if (!compiled.ok()) return compiled.status();
  if (llvm_ir != nullptr) *llvm_ir = compiled->llvm_ir;
  return runtime::CpuKernel::Load(compiled->binary, compiled->metadata);
}

class CpuAsanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // Started without the runtime, every test here would fail to load its
    // kernel: say so once, plainly.
    ASSERT_NE(dlsym(RTLD_DEFAULT, "__asan_init"), nullptr)
        << "run under ASan: LD_PRELOAD=$(clang -print-file-name="
           "libclang_rt.asan-x86_64.so) KILN_CPU_SANITIZE=address";
  }
};

TEST_F(CpuAsanTest, AnInstrumentedKernelComputesWhatItDoesUninstrumented) {
  std::string ir;
  auto kernel = Build(&ir);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(ir, ::testing::HasSubstr("__asan_"));
  const int n = 1000;  // a partial last tile
  std::vector<float> a(n), b(n), c(n, -1.0f);
  for (int i = 0; i < n; ++i) {
    a[i] = 0.25f * i;
    b[i] = 3.0f - i;
  }
  ASSERT_TRUE((*kernel)
                  ->Launch({ArgValue::Tensor(a.data(), DType::kF32, {n}),
                            ArgValue::Tensor(b.data(), DType::kF32, {n}),
                            ArgValue::Tensor(c.data(), DType::kF32, {n})})
                  .ok());
  for (int i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << i;
}

TEST_F(CpuAsanTest, AReadPastATensorIsReportedWhereItHappens) {
  // The caller claims 1000 elements of B and passes 900: the kernel's
  // first read past the allocation is ASan's heap-buffer-overflow, at the
  // end of B's 3600 bytes.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto kernel = Build();
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const int n = 1000;
  std::vector<float> a(n, 1.0f), b(900, 2.0f), c(n);
  EXPECT_DEATH(
      {
        (void)(*kernel)->Launch({ArgValue::Tensor(a.data(), DType::kF32, {n}),
                                 ArgValue::Tensor(b.data(), DType::kF32, {n}),
                                 ArgValue::Tensor(c.data(), DType::kF32, {n})});
      },
      "heap-buffer-overflow(.|\n)*READ of size(.|\n)*"
      "0 bytes to the right of 3600-byte region");
}

}  // namespace
}  // namespace kiln
