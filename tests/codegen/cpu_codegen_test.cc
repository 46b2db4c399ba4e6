// End-to-end tests of the CPU back end: lowered-form kernels written as
// tile-IR text, compiled with GenerateCpu, loaded and launched through the
// CPU runtime, results checked against plain C++.
#include "compiler/codegen/cpu/cpu_codegen.h"

#include <elf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/cpu/cpu_kernel.h"
#include "tests/codegen/cpu_test_util.h"

namespace kiln {
namespace {

using runtime::ArgValue;
using runtime::DType;
using ::testing::HasSubstr;

constexpr char kAdd[] = R"(
kernel add(A: f32[N], B: f32[N], C: f32[N])
  grid(ceildiv(N, 256)) threads(256) (bx) {
  for i in serial(256) {
    let idx = bx * 256 + i
    if idx < N {
      C[idx] = A[idx] + B[idx]
    }
  }
}
)";

TEST(CpuCodegenTest, ElementwiseAddWithEdgeGuard) {
  compiler::CpuArtifact artifact;
  auto kernel = testing::CompileAndLoad(kAdd, {}, &artifact);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const int n = 1000;
  std::vector<float> a(n), b(n), c(n + 8, -1.0f);
  for (int i = 0; i < n; ++i) {
    a[i] = 0.5f * i;
    b[i] = 1000.0f - i;
  }
  absl::Status st = (*kernel)->Launch({
      ArgValue::Tensor(a.data(), DType::kF32, {n}),
      ArgValue::Tensor(b.data(), DType::kF32, {n}),
      ArgValue::Tensor(c.data(), DType::kF32, {n}),
  });
  ASSERT_TRUE(st.ok()) << st;
  for (int i = 0; i < n; ++i) ASSERT_EQ(c[i], a[i] + b[i]) << i;
  for (int i = n; i < n + 8; ++i) EXPECT_EQ(c[i], -1.0f) << "wrote past N";
  EXPECT_EQ(artifact.entry, "kiln_add");
  EXPECT_THAT(artifact.llvm_ir, HasSubstr("define void @kiln_add"));
  std::printf(
      "compile add: emit %.1f ms, optimize %.1f ms, object %.1f ms, "
      "link %.1f ms\n",
      artifact.timings.emit_ms, artifact.timings.optimize_ms,
      artifact.timings.object_ms, artifact.timings.link_ms);
}

constexpr char kMatmul[] = R"(
kernel matmul(A: f32[M, K], B: f32[K, N], C: f32[M, N])
  grid(ceildiv(N, 16), ceildiv(M, 16)) threads(128) (bx, by) {
  alloc shared As: f32[16, 8]
  alloc shared Bs: f32[8, 16]
  alloc fragment Acc: f32[16, 16]
  for i in serial(16) {
    for j in serial(16) {
      Acc[i, j] = 0.0
    }
  }
  for k in serial(ceildiv(K, 8)) {
    for i in serial(16) {
      for kk in serial(8) {
        if by * 16 + i < M && k * 8 + kk < K {
          As[i, kk] = A[by * 16 + i, k * 8 + kk]
        } else {
          As[i, kk] = 0.0
        }
      }
    }
    for kk in serial(8) {
      for j in serial(16) {
        if k * 8 + kk < K && bx * 16 + j < N {
          Bs[kk, j] = B[k * 8 + kk, bx * 16 + j]
        } else {
          Bs[kk, j] = 0.0
        }
      }
    }
    for i in serial(16) {
      for kk in serial(8) {
        let a = As[i, kk]
        for j in unroll(16) {
          Acc[i, j] += a * Bs[kk, j]
        }
      }
    }
  }
  for i in serial(16) {
    for j in serial(16) {
      if by * 16 + i < M && bx * 16 + j < N {
        C[by * 16 + i, bx * 16 + j] = Acc[i, j]
      }
    }
  }
}
)";

TEST(CpuCodegenTest, SmallMatmulWithLoopsAndTiles) {
  compiler::CpuArtifact artifact;
  auto kernel = testing::CompileAndLoad(kMatmul, {}, &artifact);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::printf(
      "compile matmul: emit %.1f ms, optimize %.1f ms, object %.1f "
      "ms, link %.1f ms\n",
      artifact.timings.emit_ms, artifact.timings.optimize_ms,
      artifact.timings.object_ms, artifact.timings.link_ms);
  const int64_t m = 37, n = 29, k = 53;
  std::vector<float> a(m * k), b(k * n), c(m * n, NAN);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& v : a) v = dist(rng);
  for (float& v : b) v = dist(rng);
  absl::Status st = (*kernel)->Launch({
      ArgValue::Tensor(a.data(), DType::kF32, {m, k}),
      ArgValue::Tensor(b.data(), DType::kF32, {k, n}),
      ArgValue::Tensor(c.data(), DType::kF32, {m, n}),
  });
  ASSERT_TRUE(st.ok()) << st;
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double want = 0;
      for (int64_t x = 0; x < k; ++x)
        want += double{a[i * k + x]} * b[x * n + j];
      ASSERT_NEAR(c[i * n + j], want, 1e-4) << i << ", " << j;
    }
  }
}

TEST(CpuCodegenTest, UnrollLoopsCarryFullUnrollMetadata) {
  compiler::CpuCodegenOptions options;
  options.opt_level = 0;  // keep the metadata visible
  compiler::CpuArtifact artifact;
  auto kernel = testing::CompileAndLoad(kMatmul, options, &artifact);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(artifact.llvm_ir, HasSubstr("llvm.loop.unroll.full"));
  const int64_t m = 20, n = 20, k = 9;
  std::vector<float> a(m * k, 1.0f), b(k * n, 2.0f), c(m * n);
  ASSERT_TRUE((*kernel)
                  ->Launch({ArgValue::Tensor(a.data(), DType::kF32, {m, k}),
                            ArgValue::Tensor(b.data(), DType::kF32, {k, n}),
                            ArgValue::Tensor(c.data(), DType::kF32, {m, n})})
                  .ok());
  for (float v : c) ASSERT_EQ(v, 18.0f);
}

TEST(CpuCodegenTest, AtomicAddFromManyBlocks) {
  constexpr char kText[] = R"(
kernel atomics(X: u8[G], F: f32[1], D: f64[1], I: i32[1], H: f16[1],
               B: bf16[1], W: i4[2], F2: f32[1], U: u8[1])
  grid(G) threads(1) (bx) {
  F[0] += 1.0
  D[0] += 0.5
  I[0] += bx
  H[0] += 1.0
  B[0] += 1
  W[0] += 1
  F2[0] += f64(0.25)
  U[0] += 3
}
)";
  auto kernel = testing::CompileAndLoad(kText);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  const int64_t g = 200;
  std::vector<uint8_t> x(g);
  for (int round = 0; round < 5; ++round) {
    float f = 0, f2 = 0;
    double d = 0;
    int32_t i = 0;
    uint16_t h = 0, b = 0;
    uint8_t w = 0x50, u = 0;
    absl::Status st = (*kernel)->Launch({
        ArgValue::Tensor(x.data(), DType::kU8, {g}),
        ArgValue::Tensor(&f, DType::kF32, {1}),
        ArgValue::Tensor(&d, DType::kF64, {1}),
        ArgValue::Tensor(&i, DType::kI32, {1}),
        ArgValue::Tensor(&h, DType::kF16, {1}),
        ArgValue::Tensor(&b, DType::kBF16, {1}),
        ArgValue::Tensor(&w, DType::kI4, {2}),
        ArgValue::Tensor(&f2, DType::kF32, {1}),
        ArgValue::Tensor(&u, DType::kU8, {1}),
    });
    ASSERT_TRUE(st.ok()) << st;
    EXPECT_EQ(f, 200.0f);
    EXPECT_EQ(d, 100.0);
    EXPECT_EQ(i, 199 * 200 / 2);
    EXPECT_EQ(h, 0x5A40);  // 200.0 in f16
    EXPECT_EQ(b, 0x4348);  // 200.0 in bf16
    EXPECT_EQ(w, 0x58);    // low nibble: 200 % 16; high nibble kept
    EXPECT_EQ(f2, 50.0f);
    EXPECT_EQ(u, static_cast<uint8_t>(600 % 256));
  }
}

TEST(CpuCodegenTest, CompoundStoresAndScalarParameters) {
  constexpr char kText[] = R"(
kernel compound(X: f32[N], Y: f32[N], alpha: f32, n2: i32, h: f16, flag: bool)
  grid(1) threads(1) (bx) {
  alloc local T: f32[4]
  for i in serial(N) {
    T[1] = X[i]
    T[1] -= 1.0
    T[1] *= alpha
    T[1] /= 2.0
    Y[i] = T[1] + f32(n2) + h
    Y[i] -= 0.5
    if flag {
      Y[i] *= -1
    }
  }
}
)";
  auto kernel = testing::CompileAndLoad(kText);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<float> x = {1, 2, 3, 4, 5}, y(5);
  const uint16_t h = 0x3C00;  // 1.0
  ASSERT_TRUE(
      (*kernel)
          ->Launch({ArgValue::Tensor(x.data(), DType::kF32, {5}),
                    ArgValue::Tensor(y.data(), DType::kF32, {5}),
                    ArgValue::F32(3.0f), ArgValue::I32(10),
                    ArgValue::Scalar(DType::kF16, h), ArgValue::Bool(true)})
          .ok());
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(y[i], -((x[i] - 1) * 3 / 2 + 10 + 1 - 0.5f)) << i;
  }
}

TEST(CpuCodegenTest, ExplicitStridesAndThreeDimensionalGrid) {
  constexpr char kText[] = R"(
kernel grid3(A: f32[M, N] strides [1, M], O: i64[Z, Y, X], T: f32[M, N])
  grid(X, Y, Z) threads(1) (bx, by, bz) {
  O[bz, by, bx] = bx + 100 * by + 10000 * bz
  if bx == 0 && by == 0 && bz == 0 {
    for i in serial(M) {
      for j in serial(N) {
        T[i, j] = A[i, j]
      }
    }
  }
}
)";
  compiler::CpuArtifact artifact;
  auto kernel = testing::CompileAndLoad(kText, {}, &artifact);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  EXPECT_THAT(artifact.metadata, HasSubstr("symbols M N Z Y X\n"));
  EXPECT_THAT(artifact.metadata, HasSubstr("strides A 1 M\n"));
  const int64_t m = 3, n = 4, gx = 5, gy = 3, gz = 2;
  std::vector<float> a(m * n), t(m * n);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) a[j * m + i] = i * 10 + j;  // column-major
  }
  std::vector<int64_t> o(gx * gy * gz, -1);
  absl::Status st = (*kernel)->Launch({
      ArgValue::Tensor(a.data(), DType::kF32, {m, n}, {1, m}),
      ArgValue::Tensor(o.data(), DType::kI64, {gz, gy, gx}),
      ArgValue::Tensor(t.data(), DType::kF32, {m, n}),
  });
  ASSERT_TRUE(st.ok()) << st;
  for (int64_t z = 0; z < gz; ++z) {
    for (int64_t y = 0; y < gy; ++y) {
      for (int64_t x = 0; x < gx; ++x) {
        EXPECT_EQ(o[(z * gy + y) * gx + x], x + 100 * y + 10000 * z);
      }
    }
  }
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) EXPECT_EQ(t[i * n + j], i * 10 + j);
  }
}

// A buffer whose end touches an inaccessible page: reading past it faults.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes) {
    page_ = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    mapped_ = (bytes + page_ - 1) / page_ * page_ + page_;
    base_ = static_cast<char*>(mmap(nullptr, mapped_, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    mprotect(base_ + mapped_ - page_, page_, PROT_NONE);
    data_ = base_ + mapped_ - page_ - bytes;
  }
  ~GuardedBuffer() { munmap(base_, mapped_); }
  void* data() const { return data_; }

 private:
  size_t page_, mapped_;
  char* base_;
  char* data_;
};

TEST(CpuCodegenTest, GuardsInSelectAndConditionsProtectTheirLoads) {
  constexpr char kText[] = R"(
kernel guards(A: f32[M], O: f32[N], P: f32[N])
  grid(1) threads(1) (bx) {
  for i in serial(N) {
    O[i] = select(i < M, A[i], -1.0)
    if i < M && A[i] > 0.0 {
      P[i] = 1.0
    } else {
      P[i] = 0.0
    }
  }
}
)";
  // AVX-512 masked loads suppress faults on masked-off lanes, so an
  // unguarded wide load could pass there; AVX2 (x86-64-v3) would fault.
  compiler::CpuCodegenOptions avx2;
  avx2.cpu = "x86-64-v3";
  std::vector<compiler::CpuCodegenOptions> targets = {{}};
  if (testing::IsX86Host()) targets.push_back(avx2);
  for (const compiler::CpuCodegenOptions& options : targets) {
    auto kernel = testing::CompileAndLoad(kText, options);
    ASSERT_TRUE(kernel.ok()) << kernel.status();
    const int64_t m = 3, n = 64;
    GuardedBuffer guarded(m * sizeof(float));
    auto* a = static_cast<float*>(guarded.data());
    a[0] = 5;
    a[1] = -6;
    a[2] = 7;
    std::vector<float> o(n), p(n);
    ASSERT_TRUE((*kernel)
                    ->Launch({ArgValue::Tensor(a, DType::kF32, {m}),
                              ArgValue::Tensor(o.data(), DType::kF32, {n}),
                              ArgValue::Tensor(p.data(), DType::kF32, {n})})
                    .ok());
    EXPECT_EQ(o[0], 5);
    EXPECT_EQ(o[1], -6);
    EXPECT_EQ(o[2], 7);
    EXPECT_EQ(o[3], -1);
    EXPECT_EQ(o[n - 1], -1);
    EXPECT_EQ(p[0], 1);
    EXPECT_EQ(p[1], 0);
    EXPECT_EQ(p[2], 1);
    EXPECT_EQ(p[n - 1], 0);
  }
}

TEST(CpuCodegenTest, LargeTilesRunOnPoolThreadStacks) {
  constexpr char kText[] = R"(
kernel big(O: f32[G])
  grid(G) threads(1) (bx) {
  alloc local T: f32[2048, 1024]
  for i in serial(2048) {
    for j in serial(1024) {
      T[i, j] = 1.0
    }
  }
  O[bx] = 0.0
  for i in serial(2048) {
    O[bx] += T[i, (i + bx) % 1024]
  }
}
)";
  auto kernel = testing::CompileAndLoad(kText);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  std::vector<float> o(8);
  ASSERT_TRUE(
      (*kernel)->Launch({ArgValue::Tensor(o.data(), DType::kF32, {8})}).ok());
  for (float v : o) EXPECT_EQ(v, 2048.0f);
}

TEST(CpuCodegenTest, TilesBeyondTheStackBudgetAreRejected) {
  constexpr char kText[] = R"(
kernel huge(O: f32[1])
  grid(1) threads(1) (bx) {
  alloc local T: f32[8192, 2048]
  T[0, 0] = 1.0
  O[0] = T[0, 0]
}
)";
  auto kernel = testing::CompileAndLoad(kText);
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(kernel.status().message(), HasSubstr("bytes of tiles"));
}

TEST(CpuCodegenTest, TileOpsAreNotTheLoweredForm) {
  constexpr char kText[] = R"(
kernel unlowered(A: f32[64], B: f32[64])
  grid(1) threads(64) (bx) {
  alloc shared S: f32[64]
  copy A -> S
  copy S -> B
}
)";
  auto kernel = testing::CompileAndLoad(kText);
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(kernel.status().message(),
              HasSubstr("5:3: statement not in the lowered form"));
}

// The DT_NEEDED entries of an ELF64 shared object.
std::vector<std::string> NeededLibraries(const std::string& so) {
  std::vector<std::string> out;
  if (so.size() < sizeof(Elf64_Ehdr)) return out;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(so.data());
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(so.data() + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_DYNAMIC) continue;
    const char* strtab = so.data() + sh[sh[i].sh_link].sh_offset;
    const auto* dyn =
        reinterpret_cast<const Elf64_Dyn*>(so.data() + sh[i].sh_offset);
    for (size_t j = 0; j < sh[i].sh_size / sizeof(Elf64_Dyn); ++j) {
      if (dyn[j].d_tag == DT_NEEDED) out.push_back(strtab + dyn[j].d_un.d_val);
    }
  }
  return out;
}

TEST(CpuCodegenTest, SharedObjectNeedsOnlyLibcAndLibm) {
  compiler::CpuArtifact artifact;
  // Math calls (libm) and a zero-fill loop LLVM may turn into memset (libc).
  auto kernel = testing::CompileAndLoad(R"(
kernel deps(X: f32[N], H: f16[N], B: bf16[N])
  grid(1) threads(1) (bx) {
  alloc local T: f32[4096]
  for i in serial(4096) {
    T[i] = 0.0
  }
  for i in serial(N) {
    H[i] = tanh(X[i]) + erf(X[i]) + T[i % 4096]
    B[i] = f64(X[i]) * 3.0
  }
}
)",
                                        testing::NoF16cOptions(), &artifact);
  ASSERT_TRUE(kernel.ok()) << kernel.status();
  ASSERT_EQ(artifact.shared_object.substr(0, 4),
            "\x7f"
            "ELF");
  std::vector<std::string> needed = NeededLibraries(artifact.shared_object);
  EXPECT_FALSE(needed.empty());
  for (const std::string& lib : needed) {
    EXPECT_TRUE(lib == "libc.so.6" || lib == "libm.so.6") << lib;
  }
}

TEST(CpuCodegenTest, ConcurrentCompilesAreIndependent) {
  std::vector<std::thread> threads;
  std::vector<absl::Status> results(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([t, &results] {
      compiler::CpuCodegenOptions options;
      options.entry = "entry_" + std::to_string(t);
      auto kernel = testing::CompileAndLoad(kAdd, options);
      if (!kernel.ok()) {
        results[t] = kernel.status();
        return;
      }
      std::vector<float> a(300, 1.0f), b(300, float(t)), c(300);
      results[t] =
          (*kernel)->Launch({ArgValue::Tensor(a.data(), DType::kF32, {300}),
                             ArgValue::Tensor(b.data(), DType::kF32, {300}),
                             ArgValue::Tensor(c.data(), DType::kF32, {300})});
      if (results[t].ok() && c[299] != 1.0f + t) {
        results[t] = absl::InternalError("wrong result");
      }
    });
  }
  for (std::thread& th : threads) th.join();
  for (const absl::Status& st : results) EXPECT_TRUE(st.ok()) << st;
}

// Regression: glibc dedups dlopen by path, so two kernels loaded through
// /proc/self/fd/N must never share N while both are loaded.
TEST(CpuCodegenTest, LoadedKernelsStayDistinct) {
  std::vector<compiler::CpuArtifact> artifacts(3);
  for (int t = 0; t < 3; ++t) {
    compiler::CpuCodegenOptions options;
    options.entry = "distinct_" + std::to_string(t);
    ASSERT_TRUE(testing::CompileAndLoad(kAdd, options, &artifacts[t]).ok());
  }
  std::vector<std::unique_ptr<runtime::CpuKernel>> alive;
  for (int round = 0; round < 30; ++round) {
    const compiler::CpuArtifact& a = artifacts[round % 3];
    auto k =
        runtime::CpuKernel::Load(a.shared_object, std::string_view(a.metadata));
    ASSERT_TRUE(k.ok()) << round << ": " << k.status();
    std::vector<float> x(4, 1.0f), y(4, 2.0f), z(4);
    ASSERT_TRUE((*k)->Launch({ArgValue::Tensor(x.data(), DType::kF32, {4}),
                              ArgValue::Tensor(y.data(), DType::kF32, {4}),
                              ArgValue::Tensor(z.data(), DType::kF32, {4})})
                    .ok());
    EXPECT_EQ(z[3], 3.0f);
    if (round % 2 == 0) alive.push_back(std::move(*k));
    if (alive.size() > 4) alive.erase(alive.begin());
  }
}

TEST(CpuCodegenTest, ToolchainIdentityNamesLlvmAndTheCpu) {
  const std::string id = compiler::CpuToolchainIdentity();
  EXPECT_THAT(id, HasSubstr("llvm-14"));
  EXPECT_THAT(id, HasSubstr(compiler::DetectCpuTarget().cpu));
  compiler::CpuCodegenOptions options;
  options.cpu = "x86-64-v3";
  EXPECT_THAT(compiler::CpuToolchainIdentity(options), HasSubstr("x86-64-v3"));
}

TEST(CpuCodegenTest, AddressSanitizerIsChosenByTheEnvironmentAndKeyed) {
  // Unset: plain kernels. "address": instrumented, under another key.
  // Anything else: an error naming the variable.
  ASSERT_EQ(unsetenv("KILN_CPU_SANITIZE"), 0);
  auto plain = compiler::DefaultCpuCodegenOptions();
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_FALSE(plain->address_sanitizer);
  ASSERT_EQ(setenv("KILN_CPU_SANITIZE", "address", 1), 0);
  auto asan = compiler::DefaultCpuCodegenOptions();
  ASSERT_EQ(setenv("KILN_CPU_SANITIZE", "thread", 1), 0);
  auto bad = compiler::DefaultCpuCodegenOptions();
  ASSERT_EQ(unsetenv("KILN_CPU_SANITIZE"), 0);
  ASSERT_TRUE(asan.ok()) << asan.status();
  EXPECT_TRUE(asan->address_sanitizer);
  EXPECT_EQ(compiler::CpuToolchainIdentity(*asan),
            compiler::CpuToolchainIdentity(*plain) + " asan");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("KILN_CPU_SANITIZE='thread'"));
}

TEST(CpuCodegenTest, AnInstrumentedKernelNeedsTheAsanRuntimeToLoad) {
  // This process has no ASan runtime (cpu_asan_test.cc runs with one): the
  // kernel compiles, calls into the runtime, and loading it says what to do.
  compiler::CpuCodegenOptions options;
  options.address_sanitizer = true;
  compiler::CpuArtifact artifact;
  auto kernel = testing::CompileAndLoad(kAdd, options, &artifact);
  EXPECT_THAT(artifact.llvm_ir, HasSubstr("call void @__asan_report_load4"));
  ASSERT_FALSE(kernel.ok());
  EXPECT_EQ(kernel.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(kernel.status().message(),
              HasSubstr("instrumented with AddressSanitizer"));
  EXPECT_THAT(kernel.status().message(), HasSubstr("LD_PRELOAD"));
}

}  // namespace
}  // namespace kiln
