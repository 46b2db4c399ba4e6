// Variant C: B plus a register prefetch of the next tile in both loops.
#include "kiln/kiln.cuh"
__device__ __forceinline__ void load8(const unsigned short* X, long long row, long long c, long long M, long long N, unsigned short (&raw)[8]) {
  if (row < M && c + 7 < N) {
    kiln::copy_chunk<8>(raw, X + row * N + c);
  } else {
#pragma unroll
    for (int u = 0; u < 8; ++u) raw[u] = (row < M && c + u < N) ? X[row * N + c + u] : (unsigned short)0xfc00;  // -inf
  }
}
extern "C" __global__ void __launch_bounds__(128)
kiln_main(unsigned short* X, unsigned short* Y, long long M, long long N) {
  const long long row = blockIdx.x * 4LL + threadIdx.x / 32;
  const int col = (threadIdx.x % 32) * 8;
  float row_max = -__int_as_float(0x7f800000), row_sum = 0.f;
  const long long tiles = kiln::ceildiv<long long>(N, 256LL);
  alignas(16) unsigned short cur[8], nxt[8];
  load8(X, row, col, M, N, cur);
  for (long long t = 0; t < tiles; ++t) {
    if (t + 1 < tiles) load8(X, row, (t + 1) * 256 + col, M, N, nxt);
    float xs[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) xs[u] = (float)kiln::from_bits<kiln::f16_t>(cur[u]);
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
#pragma unroll
    for (int u = 0; u < 8; ++u) cur[u] = nxt[u];
  }
  load8(X, row, col, M, N, cur);
  for (long long t = 0; t < tiles; ++t) {
    const long long c = t * 256 + col;
    if (t + 1 < tiles) load8(X, row, c + 256, M, N, nxt);
    alignas(16) unsigned short raw[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) raw[u] = kiln::to_bits<kiln::f16_t>((float)kiln::round_to<kiln::f16_t>(expf((float)kiln::from_bits<kiln::f16_t>(cur[u]) - row_max) / row_sum));
    if (row < M && c + 7 < N) {
      kiln::copy_chunk<8>(Y + row * N + c, raw);
    } else {
      for (int u = 0; u < 8; ++u) if (row < M && c + u < N) Y[row * N + c + u] = raw[u];
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) cur[u] = nxt[u];
  }
}
