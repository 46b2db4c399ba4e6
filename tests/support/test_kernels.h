// Small tile-IR programs shared by tests of different layers (the compile
// API, the daemon's compile engine), so they exercise the same kernel.
#ifndef KILN_TESTS_SUPPORT_TEST_KERNELS_H_
#define KILN_TESTS_SUPPORT_TEST_KERNELS_H_

namespace kiln::testing {

// Y = X * a over a symbolic N, in blocks of the tunable B (64 or 128): one
// copy in, one element-wise parallel, one copy out, edge-guarded.
inline constexpr char kScaleKernel[] = R"(
kernel scale(X: f32[N], Y: f32[N], a: f32)
  tune B in [64, 128]
  grid(ceildiv(N, B)) threads(32) (bx) {
  alloc fragment T: f32[B]
  copy X[bx * B:+B] -> T
  parallel (i) in (B) {
    T[i] = T[i] * a
  }
  copy T -> Y[bx * B:+B]
}
)";

}  // namespace kiln::testing

#endif  // KILN_TESTS_SUPPORT_TEST_KERNELS_H_
