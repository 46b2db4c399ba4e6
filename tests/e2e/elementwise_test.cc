// End-to-end tests of the element-wise, data-movement and selection kernels
// on the CPU: adam_step, the two int4 dequantisers, dropout,
// elementwise_broadcast (column-major input), the three quantisers,
// stencil_blur, transpose, topk and the paged KV-cache write (element stores
// into tensors at data-dependent indices), plain and with RoPE fused.
#include <cmath>
#include <cstdlib>

#include "gtest/gtest.h"
#include "tests/e2e/e2e_harness.h"
#include "tests/e2e/references.h"
#include "tests/e2e/tolerance.h"

namespace kiln::e2e {
namespace {

using runtime::ArgValue;

KILN_E2E_COVERS("adam_step.tile", "adam_step");
KILN_E2E_COVERS("dequant_int4.tile", "dequant_i4");
KILN_E2E_COVERS("dequant_int4.tile", "unpack_i4_bytes");
KILN_E2E_COVERS("dropout.tile", "dropout");
KILN_E2E_COVERS("elementwise_broadcast.tile", "elementwise_broadcast");
KILN_E2E_COVERS("kv_cache_write.tile", "kv_cache_write");
KILN_E2E_COVERS("kv_cache_write.tile", "rope_kv_cache_write");
KILN_E2E_COVERS("quantize.tile", "quantize_fp8_e4m3");
KILN_E2E_COVERS("quantize.tile", "quantize_fp8_e5m2");
KILN_E2E_COVERS("quantize.tile", "quantize_q15");
KILN_E2E_COVERS("stencil_blur.tile", "stencil_blur");
KILN_E2E_COVERS("transpose.tile", "transpose");
KILN_E2E_COVERS("topk.tile", "topk");

struct Mn {
  int64_t m, n;
};

class ElementwiseE2eTest : public E2eTest {
 protected:
  void RunAdam(const Bindings& fixed, int64_t n) {
    SCOPED_TRACE(::testing::Message() << "N=" << n);
    KILN_E2E_LOAD(kernel, "adam_step.tile", "adam_step", fixed);
    HostTensor p = Random(DType::kF32, {n}, -1, 1);
    HostTensor g = Random(DType::kBF16, {n}, -1, 1);
    HostTensor m = Random(DType::kF32, {n}, -0.1, 0.1);
    HostTensor v = Random(DType::kF32, {n}, 0, 0.01);
    const int step = 3;
    const float lr = 1e-3f, beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f,
                wd = 0.01f;
    const float c1 = static_cast<float>(1 / (1 - std::pow(beta1, step)));
    const float c2 = static_cast<float>(1 / (1 - std::pow(beta2, step)));
    const AdamState before{p.Values(), m.Values(), v.Values()};
    ASSERT_TRUE(Launch()
                    .InOut(p)
                    .In(g)
                    .InOut(m)
                    .InOut(v)
                    .Scalar(ArgValue::F32(lr))
                    .Scalar(ArgValue::F32(beta1))
                    .Scalar(ArgValue::F32(beta2))
                    .Scalar(ArgValue::F32(eps))
                    .Scalar(ArgValue::F32(wd))
                    .Scalar(ArgValue::F32(c1))
                    .Scalar(ArgValue::F32(c2))
                    .Run(*kernel));
    const AdamState ref = AdamStepReference(
        before, g.Values(), {lr, beta1, beta2, eps, wd, c1, c2});
    EXPECT_TRUE(AllClose(p, ref.p, OutputTolerance(DType::kF32)));
    EXPECT_TRUE(AllClose(m, ref.m, OutputTolerance(DType::kF32)));
    EXPECT_TRUE(AllClose(v, ref.v, OutputTolerance(DType::kF32)));
  }

  // W = f16(q * scale) is one correctly rounded f16 product: exact.
  void RunDequantI4(const Bindings& fixed, Mn s) {
    SCOPED_TRACE(::testing::Message() << "N=" << s.m << " K=" << s.n);
    KILN_E2E_LOAD(kernel, "dequant_int4.tile", "dequant_i4", fixed);
    HostTensor wq = Random(DType::kI4, {s.m, s.n}, -8, 7);
    HostTensor scales = Random(DType::kF16, {s.m, s.n / 128}, 0.001, 0.1);
    HostTensor w(DType::kF16, {s.m, s.n});
    ASSERT_TRUE(Launch().In(wq).In(scales).Out(w).Run(*kernel));
    EXPECT_TRUE(AllClose(
        w, DequantReference(wq.Values(), scales.Values(), s.m, s.n), Exact()));
  }

  void RunUnpackI4Bytes(const Bindings& fixed, Mn s) {
    SCOPED_TRACE(::testing::Message() << "N=" << s.m << " K=" << s.n);
    KILN_E2E_LOAD(kernel, "dequant_int4.tile", "unpack_i4_bytes", fixed);
    HostTensor packed = Random(DType::kU8, {s.m, s.n / 2}, 0, 255);
    HostTensor scales = Random(DType::kF16, {s.m, s.n / 128}, 0.001, 0.1);
    HostTensor w(DType::kF16, {s.m, s.n});
    ASSERT_TRUE(Launch().In(packed).In(scales).Out(w).Run(*kernel));
    EXPECT_TRUE(
        AllClose(w,
                 DequantReference(UnpackI4Bytes(packed.Values(), s.m, s.n),
                                  scales.Values(), s.m, s.n),
                 Exact()));
  }

  // The keep mask is exact; kept values are one f16 rounding of an f32
  // product, modelled exactly by the reference.
  void RunDropout(const Bindings& fixed, Mn s, float p, bool training) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n << " p="
                                      << p << " training=" << training);
    KILN_E2E_LOAD(kernel, "dropout.tile", "dropout", fixed);
    HostTensor x = Random(DType::kF16, {s.m, s.n}, -2, 2);
    HostTensor y(DType::kF16, {s.m, s.n});
    HostTensor keep(DType::kBool, {s.m, s.n});
    const uint32_t seed = static_cast<uint32_t>(rng().Next());
    ASSERT_TRUE(Launch()
                    .In(x)
                    .Out(y)
                    .Out(keep)
                    .Scalar(ArgValue::U32(seed))
                    .Scalar(ArgValue::F32(p))
                    .Scalar(ArgValue::Bool(training))
                    .Run(*kernel));
    const DropoutResult ref =
        DropoutReference(x.Values(), s.m, s.n, seed, p, training);
    EXPECT_TRUE(AllClose(keep, ref.keep, Exact()));
    EXPECT_TRUE(AllClose(y, ref.y, Exact()));
  }

  void RunBroadcast(const Bindings& fixed, Mn s, int act) {
    SCOPED_TRACE(::testing::Message()
                 << "M=" << s.m << " N=" << s.n << " act=" << act);
    KILN_E2E_LOAD(kernel, "elementwise_broadcast.tile", "elementwise_broadcast",
                  fixed);
    // X is column-major: strides [1, M].
    HostTensor x = Random(DType::kF16, {s.m, s.n}, -2, 2, {1, s.m});
    HostTensor col_scale = Random(DType::kF32, {s.n}, 0.5, 2);
    HostTensor row_bias = Random(DType::kF32, {s.m}, -1, 1);
    HostTensor r = Random(DType::kF16, {s.m, s.n}, -1, 1);
    HostTensor y(DType::kF16, {s.m, s.n});
    const float alpha = 0.75f;
    ASSERT_TRUE(Launch()
                    .In(x)
                    .In(col_scale)
                    .In(row_bias)
                    .In(r)
                    .Out(y)
                    .Scalar(ArgValue::F32(alpha))
                    .Scalar(ArgValue::I32(act))
                    .Run(*kernel));
    EXPECT_TRUE(AllClose(y,
                         ElementwiseBroadcastReference(
                             x.Values(), col_scale.Values(), row_bias.Values(),
                             r.Values(), alpha, act, s.m, s.n),
                         OutputTolerance(DType::kF16)));
  }

  // Row 1 is all zeros (the 1e-12 floor of the scale).
  void RunQuantizeE4M3(const Bindings& fixed, int64_t m) {
    constexpr int64_t kN = 4096;
    SCOPED_TRACE(::testing::Message() << "M=" << m);
    KILN_E2E_LOAD(kernel, "quantize.tile", "quantize_fp8_e4m3", fixed);
    HostTensor x = Random(DType::kBF16, {m, kN}, -3, 3);
    if (m > 1) {
      for (int64_t j = 0; j < kN; ++j) x.Set(kN + j, 0);
    }
    HostTensor xq(DType::kF8E4M3, {m, kN});
    HostTensor scale(DType::kF32, {m});
    ASSERT_TRUE(Launch().In(x).Out(xq).Out(scale).Run(*kernel));
    // The program's f32 arithmetic decides every code: exact.
    const QuantizeResult ref = QuantizeFp8E4M3Reference(x.Values(), m, kN);
    EXPECT_TRUE(AllClose(scale, ref.scale, Exact()));
    EXPECT_TRUE(AllClose(xq, ref.q, Exact()));
  }

  void RunStencil(const Bindings& fixed, Mn s) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n);
    KILN_E2E_LOAD(kernel, "stencil_blur.tile", "stencil_blur", fixed);
    HostTensor x = Random(DType::kF32, {s.m, s.n}, -1, 1);
    HostTensor taps = Random(DType::kF32, {5}, 0, 1);
    HostTensor y(DType::kF32, {s.m, s.n});
    ASSERT_TRUE(Launch().In(x).In(taps).Out(y).Run(*kernel));
    EXPECT_TRUE(
        AllClose(y, StencilBlurReference(x.Values(), taps.Values(), s.m, s.n),
                 OutputTolerance(DType::kF32, 5)));
  }

  void RunTranspose(const Bindings& fixed, Mn s) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n);
    KILN_E2E_LOAD(kernel, "transpose.tile", "transpose", fixed);
    HostTensor in = Random(DType::kBF16, {s.m, s.n}, -100, 100);
    HostTensor out(DType::kBF16, {s.n, s.m});
    ASSERT_TRUE(Launch().In(in).Out(out).Run(*kernel));
    EXPECT_TRUE(
        AllClose(out, TransposeReference(in.Values(), s.m, s.n), Exact()));
  }

  // Even rows take values from a coarse grid, so that they have ties (the
  // lowest index must win); odd rows are continuous.
  void RunTopK(const Bindings& fixed, int64_t t, bool normalize) {
    constexpr int64_t kExperts = 64, kK = 8;
    SCOPED_TRACE(::testing::Message()
                 << "T=" << t << " normalize=" << normalize);
    KILN_E2E_LOAD(kernel, "topk.tile", "topk", fixed);
    HostTensor logits(DType::kF32, {t, kExperts});
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t j = 0; j < kExperts; ++j) {
        const double u = rng().Uniform(-3, 3);
        logits.Set(i * kExperts + j, i % 2 == 0 ? std::round(u * 2) / 2 : u);
      }
    }
    HostTensor values(DType::kF32, {t, kK});
    HostTensor indices(DType::kI32, {t, kK});
    HostTensor selected(DType::kBool, {t, kExperts});
    ASSERT_TRUE(Launch()
                    .In(logits)
                    .Out(values)
                    .Out(indices)
                    .Out(selected)
                    .Scalar(ArgValue::Bool(normalize))
                    .Run(*kernel));
    const TopKResult ref =
        TopKReference(logits.Values(), t, kExperts, normalize);
    EXPECT_TRUE(AllClose(indices, ref.indices, Exact()));
    EXPECT_TRUE(AllClose(selected, ref.selected, Exact()));
    EXPECT_TRUE(
        AllClose(values, ref.values,
                 normalize ? OutputTolerance(DType::kF32, kK) : Exact()));
  }
};

// Distinct slots for `t` tokens in a cache of `slots` slots, every fourth
// token padding (-1) (a partial Fisher-Yates shuffle).
HostTensor DistinctSlots(Rng& rng, int64_t t, int64_t slots) {
  std::vector<int64_t> free_slots(slots);
  for (int64_t i = 0; i < slots; ++i) free_slots[i] = i;
  HostTensor out(DType::kI32, {t});
  for (int64_t i = 0; i < t; ++i) {
    const int64_t j = rng.UniformInt(i, slots - 1);
    std::swap(free_slots[i], free_slots[j]);
    out.Set(i, i % 4 == 3 ? -1 : static_cast<double>(free_slots[i]));
  }
  return out;
}

// Tokens scattered into a paged cache by slot: distinct slots, every fourth
// token padding (-1), a ragged last block of tokens; every cache element not
// named by a slot keeps its value, and nothing outside the caches is
// written (the harness's guard pages).
TEST_F(ElementwiseE2eTest, KvCacheWriteScattersTokensIntoTheirSlots) {
  for (int64_t bt : {16, 32}) {
    SCOPED_TRACE(::testing::Message() << "BT=" << bt);
    KILN_E2E_LOAD(kernel, "kv_cache_write.tile", "kv_cache_write",
                  {{"BT", bt}});
    const int64_t t = 37, h = 2, pages = 5, page = 16, d = 128;
    HostTensor k = Random(DType::kBF16, {t, h, d}, -1, 1);
    HostTensor v = Random(DType::kBF16, {t, h, d}, -1, 1);
    HostTensor slots = DistinctSlots(rng(), t, pages * page);
    HostTensor kc = Random(DType::kBF16, {pages, page, h, d}, -1, 1);
    HostTensor vc = Random(DType::kBF16, {pages, page, h, d}, -1, 1);
    std::vector<double> kref = kc.Values(), vref = vc.Values();
    const std::vector<double> kv = k.Values(), vv = v.Values();
    for (int64_t i = 0; i < t; ++i) {
      const int64_t slot = static_cast<int64_t>(slots.Get(i));
      if (slot < 0) continue;
      for (int64_t e = 0; e < h * d; ++e) {
        kref[slot * h * d + e] = kv[i * h * d + e];
        vref[slot * h * d + e] = vv[i * h * d + e];
      }
    }
    ASSERT_TRUE(
        Launch().In(k).In(v).In(slots).InOut(kc).InOut(vc).Run(*kernel));
    EXPECT_TRUE(AllClose(kc, kref, Exact()));
    EXPECT_TRUE(AllClose(vc, vref, Exact()));
  }
}

// RoPE (rotate-half) fused with the cache write: the query heads rotated
// into QOut, the rotated keys and the values scattered by slot; a ragged
// last block of tokens, an odd group size, padding tokens, and positions
// outside the cos/sin table (-1 and MAXPOS), whose rotation reads zeros.
// Every cache element no slot names keeps its value.
TEST_F(ElementwiseE2eTest, RopeKvCacheWriteRotatesAndScatters) {
  for (int64_t bt : {16, 32}) {
    SCOPED_TRACE(::testing::Message() << "BT=" << bt);
    KILN_E2E_LOAD(kernel, "kv_cache_write.tile", "rope_kv_cache_write",
                  {{"BT", bt}});
    const int64_t t = 37, h = 2, g = 3, pages = 5, page = 16, d = 128,
                  half = 64, maxpos = 100;
    HostTensor q = Random(DType::kBF16, {t, h, g, d}, -1, 1);
    HostTensor k = Random(DType::kBF16, {t, h, d}, -1, 1);
    HostTensor v = Random(DType::kBF16, {t, h, d}, -1, 1);
    HostTensor pos(DType::kI32, {t});
    for (int64_t i = 0; i < t; ++i) {
      pos.Set(i, static_cast<double>(rng().UniformInt(0, maxpos - 1)));
    }
    pos.Set(5, -1);
    pos.Set(6, static_cast<double>(maxpos));
    HostTensor cos_sin(DType::kF32, {maxpos, d});
    for (int64_t p = 0; p < maxpos; ++p) {
      for (int64_t j = 0; j < half; ++j) {
        const double angle =
            static_cast<double>(p) * std::pow(10000.0, -2.0 * j / d);
        cos_sin.Set(p * d + j, std::cos(angle));
        cos_sin.Set(p * d + half + j, std::sin(angle));
      }
    }
    HostTensor slots = DistinctSlots(rng(), t, pages * page);
    HostTensor kc = Random(DType::kBF16, {pages, page, h, d}, -1, 1);
    HostTensor vc = Random(DType::kBF16, {pages, page, h, d}, -1, 1);
    HostTensor q_out(DType::kBF16, {t, h, g, d});
    const std::vector<double> qv = q.Values(), kv = k.Values(), vv = v.Values(),
                              cs = cos_sin.Values();
    // Rotates the head at x[base .. base + d) for token i into out.
    auto rotate = [&](const std::vector<double>& x, int64_t base, int64_t i,
                      std::vector<double>& out, int64_t out_base) {
      const int64_t p = static_cast<int64_t>(pos.Get(i));
      const bool in_table = p >= 0 && p < maxpos;
      for (int64_t j = 0; j < half; ++j) {
        const double c = in_table ? cs[p * d + j] : 0;
        const double sn = in_table ? cs[p * d + half + j] : 0;
        const double x1 = x[base + j], x2 = x[base + half + j];
        out[out_base + j] = x1 * c - x2 * sn;
        out[out_base + half + j] = x2 * c + x1 * sn;
      }
    };
    std::vector<double> qref(t * h * g * d);
    std::vector<double> kref = kc.Values(), vref = vc.Values();
    for (int64_t i = 0; i < t; ++i) {
      for (int64_t e = 0; e < h * g; ++e) {
        rotate(qv, (i * h * g + e) * d, i, qref, (i * h * g + e) * d);
      }
      const int64_t slot = static_cast<int64_t>(slots.Get(i));
      if (slot < 0) continue;
      for (int64_t e = 0; e < h; ++e) {
        rotate(kv, (i * h + e) * d, i, kref, (slot * h + e) * d);
        for (int64_t j = 0; j < d; ++j) {
          vref[(slot * h + e) * d + j] = vv[(i * h + e) * d + j];
        }
      }
    }
    ASSERT_TRUE(Launch()
                    .In(q)
                    .In(k)
                    .In(v)
                    .In(pos)
                    .In(cos_sin)
                    .In(slots)
                    .Out(q_out)
                    .InOut(kc)
                    .InOut(vc)
                    .Run(*kernel));
    EXPECT_TRUE(AllClose(q_out, qref, OutputTolerance(DType::kBF16, 2)));
    EXPECT_TRUE(AllClose(kc, kref, OutputTolerance(DType::kBF16, 2)));
    EXPECT_TRUE(AllClose(vc, vref, Exact()));
  }
}

TEST_F(ElementwiseE2eTest, AdamStep) {
  RunAdam({}, 3000);
  RunAdam({}, 1);
}

TEST_F(ElementwiseE2eTest, AdamStepWideTiles) {
  RunAdam({{"BN", 2048}}, 4096);
  RunAdam({{"BN", 2048}}, 7);
}

TEST_F(ElementwiseE2eTest, DequantI4) {
  RunDequantI4({}, {70, 256});
  RunDequantI4({}, {1, 128});
}

TEST_F(ElementwiseE2eTest, DequantI4TallTiles) {
  RunDequantI4({{"BN", 128}}, {130, 384});
}

TEST_F(ElementwiseE2eTest, UnpackI4Bytes) {
  RunUnpackI4Bytes({}, {70, 384});
  RunUnpackI4Bytes({}, {1, 128});
}

TEST_F(ElementwiseE2eTest, UnpackI4BytesWideTiles) {
  RunUnpackI4Bytes({{"BN", 128}, {"BK", 256}}, {130, 512});
}

// K = 384 is ragged against BK = 256 (and satisfies the kernel's
// assumptions). The program reads Scales[n, (bx * BK + k) / 128] for every k
// of the tile, also for the columns past K that it does not store: group 3
// of a G = 3 tensor, one element past the end for the last row.
// The launch runs in a child process (a death-test child that must exit
// normally), so that a fault in a guard page fails this test only.
TEST_F(ElementwiseE2eTest, UnpackI4BytesRaggedKAgainstWideTiles) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        RunUnpackI4Bytes({{"BN", 128}, {"BK", 256}}, {33, 384});
        std::exit(HasFailure() ? 1 : 0);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST_F(ElementwiseE2eTest, DropoutTraining) {
  RunDropout({}, {50, 300}, 0.3f, true);
  RunDropout({}, {1, 7}, 0.5f, true);
  RunDropout({}, {16, 128}, 0.0f, true);
}

TEST_F(ElementwiseE2eTest, DropoutInferencePassesThrough) {
  RunDropout({}, {50, 300}, 0.5f, false);
}

TEST_F(ElementwiseE2eTest, DropoutLargeTiles) {
  RunDropout({{"BM", 32}, {"BN", 256}}, {33, 1000}, 0.1f, true);
}

TEST_F(ElementwiseE2eTest, ElementwiseBroadcastRelu) {
  RunBroadcast({}, {70, 100}, 0);
  RunBroadcast({}, {1, 1}, 0);
}

TEST_F(ElementwiseE2eTest, ElementwiseBroadcastGeluTanh) {
  RunBroadcast({}, {70, 100}, 1);
}

TEST_F(ElementwiseE2eTest, ElementwiseBroadcastSilu) {
  RunBroadcast({}, {70, 100}, 2);
  RunBroadcast({}, {32, 64}, 7);
}

TEST_F(ElementwiseE2eTest, ElementwiseBroadcastLargeTiles) {
  RunBroadcast({{"BM", 64}, {"BN", 128}}, {129, 257}, 1);
}

TEST_F(ElementwiseE2eTest, QuantizeFp8E4M3) {
  RunQuantizeE4M3({}, 3);
  RunQuantizeE4M3({}, 1);
}

TEST_F(ElementwiseE2eTest, QuantizeFp8E4M3TwoRows) {
  RunQuantizeE4M3({{"BM", 2}}, 5);
}

// Values past e5m2's largest finite value (57344) overflow to infinity.
TEST_F(ElementwiseE2eTest, QuantizeFp8E5M2) {
  KILN_E2E_LOAD(kernel, "quantize.tile", "quantize_fp8_e5m2");
  for (Mn s : {Mn{70, 130}, Mn{1, 1}, Mn{64, 128}}) {
    SCOPED_TRACE(::testing::Message() << "M=" << s.m << " N=" << s.n);
    HostTensor g = Random(DType::kF16, {s.m, s.n}, -1000, 1000);
    HostTensor gq(DType::kF8E5M2, {s.m, s.n});
    const float inv_scale = 64.0f;
    ASSERT_TRUE(
        Launch().In(g).Out(gq).Scalar(ArgValue::F32(inv_scale)).Run(*kernel));
    EXPECT_TRUE(
        AllClose(gq, QuantizeFp8E5M2Reference(g.Values(), inv_scale), Exact()));
  }
}

// Inputs past [-1, 1] saturate.
TEST_F(ElementwiseE2eTest, QuantizeQ15) {
  KILN_E2E_LOAD(kernel, "quantize.tile", "quantize_q15");
  for (int64_t n : {3000, 1, 1024}) {
    SCOPED_TRACE(::testing::Message() << "N=" << n);
    HostTensor x = Random(DType::kF32, {n}, -1.2, 1.2);
    HostTensor y(DType::kI16, {n});
    ASSERT_TRUE(Launch().In(x).Out(y).Run(*kernel));
    EXPECT_TRUE(AllClose(y, QuantizeQ15Reference(x.Values()), Exact()));
  }
}

TEST_F(ElementwiseE2eTest, StencilBlur) {
  for (Mn s : {Mn{20, 300}, Mn{1, 1}, Mn{8, 128}, Mn{3, 4}}) RunStencil({}, s);
}

TEST_F(ElementwiseE2eTest, StencilBlurLargeTiles) {
  RunStencil({{"BM", 16}, {"BN", 256}}, {33, 600});
}

TEST_F(ElementwiseE2eTest, Transpose) {
  for (Mn s : {Mn{70, 45}, Mn{1, 1}, Mn{64, 32}, Mn{1, 33}}) {
    RunTranspose({}, s);
  }
}

TEST_F(ElementwiseE2eTest, TransposeLargeTiles) {
  RunTranspose({{"TILE", 64}}, {130, 65});
}

TEST_F(ElementwiseE2eTest, TopK) {
  RunTopK({}, 37, false);
  RunTopK({}, 1, false);
}

TEST_F(ElementwiseE2eTest, TopKNormalized) { RunTopK({}, 37, true); }

TEST_F(ElementwiseE2eTest, TopKLargeTiles) {
  RunTopK({{"BM", 64}}, 130, false);
  RunTopK({{"BM", 64}}, 130, true);
}

}  // namespace
}  // namespace kiln::e2e
