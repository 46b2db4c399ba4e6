// Variant B: the row vectors (row_max, row_sum, tile max) live in registers,
// one value per thread for the row its chunk is in (row = warp: 32 chunks of
// 8 per row); reductions are warp butterflies (all lanes get the result), no
// shared memory, no barriers.
#include "kiln/kiln.cuh"
extern "C" __global__ void __launch_bounds__(128, 1)
kiln_main(unsigned short* X, unsigned short* Y, long long M, long long N) {
  const long long row = blockIdx.x * 4LL + threadIdx.x / 32;
  const int col = (threadIdx.x % 32) * 8;
  float row_max = -__int_as_float(0x7f800000), row_sum = 0.f;
  const long long tiles = kiln::ceildiv<long long>(N, 256LL);
  const bool row_ok = row < M;
  for (long long t = 0; t < tiles; ++t) {
    float xs[8];
    const long long c = t * 256 + col;
    if (row_ok && c + 7 < N) {
      alignas(16) unsigned short raw[8];
      kiln::copy_chunk<8>(raw, X + row * N + c);
#pragma unroll
      for (int u = 0; u < 8; ++u) xs[u] = (float)kiln::from_bits<kiln::f16_t>(raw[u]);
    } else {
#pragma unroll
      for (int u = 0; u < 8; ++u)
        xs[u] = (row_ok && c + u < N) ? (float)kiln::from_bits<kiln::f16_t>(X[row * N + c + u]) : -__int_as_float(0x7f800000);
    }
    float m = xs[0];
#pragma unroll
    for (int u = 1; u < 8; ++u) m = kiln::MaxOp()(m, xs[u]);
    m = kiln::warp_reduce(m, kiln::MaxOp());
    const float new_max = kiln::max_(row_max, m);
    row_sum = row_sum * expf(row_max - new_max);
    row_max = new_max;
    float s = 0.f;
#pragma unroll
    for (int u = 0; u < 8; ++u) s += expf(xs[u] - row_max);
    row_sum += kiln::warp_reduce(s, kiln::SumOp());
  }
  for (long long t = 0; t < tiles; ++t) {
    const long long c = t * 256 + col;
    float xs[8];
    if (row_ok && c + 7 < N) {
      alignas(16) unsigned short raw[8];
      kiln::copy_chunk<8>(raw, X + row * N + c);
#pragma unroll
      for (int u = 0; u < 8; ++u) xs[u] = (float)kiln::from_bits<kiln::f16_t>(raw[u]);
#pragma unroll
      for (int u = 0; u < 8; ++u) raw[u] = kiln::to_bits<kiln::f16_t>((float)kiln::round_to<kiln::f16_t>(expf(xs[u] - row_max) / row_sum));
      kiln::copy_chunk<8>(Y + row * N + c, raw);
    } else {
      for (int u = 0; u < 8; ++u)
        if (row_ok && c + u < N)
          Y[row * N + c + u] = kiln::to_bits<kiln::f16_t>((float)kiln::round_to<kiln::f16_t>(expf((float)kiln::from_bits<kiln::f16_t>(X[row * N + c + u]) - row_max) / row_sum));
    }
  }
}
