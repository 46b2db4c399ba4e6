// The HIP device library's MFMA GEMM, accumulator layouts and wavefront
// reductions (kiln/mma.hip.h, kiln/reduce.hip.h) run on the host, since no
// AMD GPU runs our tests: every thread of a block is a std::thread, and the
// cross-lane operations are emulated per wavefront from their documented
// semantics (v_mfma_f32_16x16x16: lane l holds A[l % 16][4 * (l / 16) + i],
// B[4 * (l / 16) + i][l % 16] and D[4 * (l / 16) + i][l % 16]; __shfl_xor
// reads lane l ^ mask). This checks the library's indexing (operand loads,
// swizzles, transposes, warp grids, AccLayout / RowLayout) against a plain
// matrix product; the layouts themselves come from AMD's documentation.
#include <barrier>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

// ---- host stand-ins for what the headers take from HIP ----------------------
#define __device__
inline unsigned __float_as_uint(float x) { return std::bit_cast<unsigned>(x); }
inline float __uint_as_float(unsigned x) { return std::bit_cast<float>(x); }
inline float __double2float_rz(double x) { return static_cast<float>(x); }
// x86 clang 14 has no _Float16: f16 operands travel as their bits.
#define _Float16 short

struct HostDim3 {
  unsigned x = 0;
};
thread_local HostDim3 kiln_host_thread_idx, kiln_host_block_dim;
#define threadIdx kiln_host_thread_idx
#define blockDim kiln_host_block_dim
thread_local std::barrier<>* kiln_host_block = nullptr;
inline void __syncthreads() { kiln_host_block->arrive_and_wait(); }

typedef float host_f32x4 __attribute__((ext_vector_type(4)));
typedef short host_s16x4 __attribute__((ext_vector_type(4)));

// One wavefront's exchange area: every lane posts its operands, waits for
// the others, computes its own result, and waits again before reuse.
struct Wave {
  std::barrier<> sync{64};
  host_s16x4 a[64], b[64];
  int64_t shfl[64];
};
thread_local Wave* kiln_host_wave = nullptr;

float HostBf16(short bits) {
  return std::bit_cast<float>(static_cast<uint32_t>(static_cast<uint16_t>(bits))
                              << 16);
}

host_f32x4 __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(host_s16x4 a, host_s16x4 b,
                                                     host_f32x4 c, int, int,
                                                     int) {
  Wave& w = *kiln_host_wave;
  const int lane = static_cast<int>(threadIdx.x % 64);
  w.a[lane] = a;
  w.b[lane] = b;
  w.sync.arrive_and_wait();
  // Lane l: D[4 * (l / 16) + i][l % 16]; A[r][k] is lane r + 16 * (k / 4)
  // register k % 4, B[k][n] lane n + 16 * (k / 4) register k % 4.
  for (int i = 0; i < 4; ++i) {
    const int row = 4 * (lane / 16) + i, col = lane % 16;
    float sum = c[i];
    for (int k = 0; k < 16; ++k) {
      sum += HostBf16(w.a[row + 16 * (k / 4)][k % 4]) *
             HostBf16(w.b[col + 16 * (k / 4)][k % 4]);
    }
    c[i] = sum;
  }
  w.sync.arrive_and_wait();
  return c;
}
host_f32x4 __builtin_amdgcn_mfma_f32_16x16x16f16(host_s16x4, host_s16x4,
                                                 host_f32x4 c, int, int, int) {
  ADD_FAILURE() << "only bf16 is emulated";
  return c;
}

template <typename T>
T __shfl_xor(T v, int mask, int width) {
  Wave& w = *kiln_host_wave;
  const int lane = static_cast<int>(threadIdx.x % 64);
  EXPECT_EQ(width, 64);
  std::memcpy(&w.shfl[lane], &v, sizeof(T));
  w.sync.arrive_and_wait();
  T out;
  std::memcpy(&out, &w.shfl[lane ^ mask], sizeof(T));
  w.sync.arrive_and_wait();
  return out;
}

#include "compiler/codegen/hip/device/kiln/mma.hip.h"
#include "compiler/codegen/hip/device/kiln/reduce.hip.h"
#undef threadIdx
#undef blockDim
#undef _Float16
#undef __device__

namespace kiln {
namespace {

// Runs body() on `threads` host threads as one block of 64-lane waves.
void RunBlock(int threads, const std::function<void()>& body) {
  std::vector<std::unique_ptr<Wave>> waves;
  for (int w = 0; w < (threads + 63) / 64; ++w) {
    waves.push_back(std::make_unique<Wave>());
  }
  std::barrier<> block(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      kiln_host_thread_idx.x = static_cast<unsigned>(t);
      kiln_host_block_dim.x = static_cast<unsigned>(threads);
      kiln_host_block = &block;
      kiln_host_wave = waves[t / 64].get();
      body();
    });
  }
  for (std::thread& th : pool) th.join();
}

uint16_t Bf16Bits(float x) { return std::bit_cast<uint32_t>(x) >> 16; }

template <int M, int N, int K, int WM, int WN, bool TA, bool TB>
void CheckGemm() {
  typedef kiln::AccLayout<M, N, WM, WN> L;
  typedef kiln::Swizzled<(TA ? K : M), (TA ? M : K), 2> LA;
  typedef kiln::Swizzled<(TB ? N : K), (TB ? K : N), 2> LB;
  // Small integers: every product and sum is exact in f32.
  std::mt19937 rng(M * 7 + N * 3 + K + TA * 2 + TB);
  std::vector<float> a(M * K), b(K * N);
  for (float& x : a) x = static_cast<float>(static_cast<int>(rng() % 7) - 3);
  for (float& x : b) x = static_cast<float>(static_cast<int>(rng() % 7) - 3);
  std::vector<uint16_t> as(M * K), bs(K * N);
  for (int m = 0; m < M; ++m) {
    for (int k = 0; k < K; ++k) {
      as[TA ? LA::offset(k, m) : LA::offset(m, k)] = Bf16Bits(a[m * K + k]);
    }
  }
  for (int k = 0; k < K; ++k) {
    for (int n = 0; n < N; ++n) {
      bs[TB ? LB::offset(n, k) : LB::offset(k, n)] = Bf16Bits(b[k * N + n]);
    }
  }
  std::vector<float> c(M * N, NAN);
  std::vector<int> hits(M * N, 0);
  std::vector<int> stores(M, 0);  // row copies stored (one per column)
  std::mutex mu;
  RunBlock(WM * WN * 64, [&] {
    typename L::Regs acc;
    for (float& x : acc) x = 1.0f;  // accumulates onto what is there
    kiln::gemm_ss<kiln::bf16_t, M, N, K, WM, WN, TA, TB, LA, LB>(acc, as.data(),
                                                                 bs.data());
    std::lock_guard<std::mutex> lock(mu);
    for (int q = 0; q < L::kRegs; ++q) {
      c[L::row(q) * N + L::col(q)] = acc[q];
      ++hits[L::row(q) * N + L::col(q)];
      // The row-vector layout agrees with the accumulator's rows; each of
      // a row's WN column slices holds a copy, the first one stores it.
      EXPECT_EQ((kiln::RowLayout<M, WM, WN>::row(L::row_reg(q))), L::row(q));
      if (kiln_host_thread_idx.x % 16 == 0 &&
          kiln::RowLayout<M, WM, WN>::first_slice()) {
        ++stores[L::row(q)];
      }
      // What the emitter's row reductions assume (gpu/reduce_op.cc with the
      // HIP dialect): register (mi * kTn + ni) * 4 + h holds row
      // row((mi * kTn) * 4 + h) for every ni, at row-vector index mi * 4 + h.
      const int mi = q / 4 / L::kTn, h = q % 4;
      EXPECT_EQ(L::row(q), L::row(mi * L::kTn * 4 + h));
      EXPECT_EQ(L::row_reg(q), mi * 4 + h);
    }
  });
  for (int m = 0; m < M; ++m) {
    for (int n = 0; n < N; ++n) {
      float want = 1.0f;
      for (int k = 0; k < K; ++k) want += a[m * K + k] * b[k * N + n];
      ASSERT_EQ(hits[m * N + n], 1) << m << "," << n;
      if (n == 0) {
        // Register q of a lane is one column of its row: a row's stores
        // number its columns per slice (kTn * 4 / 4 per register row).
        ASSERT_EQ(stores[m], N / WN / 16) << "row " << m;
      }
      ASSERT_EQ(c[m * N + n], want) << "C[" << m << "][" << n << "]";
    }
  }
}

TEST(HipMmaHostTest, GemmSsOverTwoByTwoWaves) {
  CheckGemm<64, 64, 32, 2, 2, false, false>();
}
TEST(HipMmaHostTest, GemmSsTransposedOperands) {
  CheckGemm<32, 64, 48, 1, 2, true, true>();
}
TEST(HipMmaHostTest, GemmSsAttentionShapes) {
  CheckGemm<64, 32, 128, 4, 1, false, true>();   // S = Q K^T
  CheckGemm<64, 128, 32, 2, 1, false, false>();  // O += P V
}

TEST(HipMmaHostTest, RowGroupWaveAndBlockReductions) {
  constexpr int kThreads = 256;
  std::vector<float> rows(kThreads), waves(kThreads);
  std::vector<long long> block(kThreads);
  std::vector<long long> scratch64(kThreads / 64);
  RunBlock(kThreads, [&] {
    const int t = static_cast<int>(kiln_host_thread_idx.x);
    const float v = static_cast<float>(t % 64);
    rows[t] = kiln::row_group_reduce(v, kiln::SumOp());
    waves[t] = kiln::warp_reduce(static_cast<float>(t), kiln::MaxOp());
    block[t] = kiln::block_reduce(static_cast<long long>(t), kiln::SumOp(),
                                  scratch64.data());
  });
  for (int t = 0; t < kThreads; ++t) {
    const int g = t % 64 / 16;  // lanes 16g..16g+15: sum = 256g + 120
    EXPECT_EQ(rows[t], 256.0f * g + 120.0f) << t;
    EXPECT_EQ(waves[t], static_cast<float>(t / 64 * 64 + 63)) << t;
    EXPECT_EQ(block[t], kThreads * (kThreads - 1) / 2) << t;
  }
}

}  // namespace
}  // namespace kiln
