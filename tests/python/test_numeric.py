"""Kernels on the CPU target against NumPy, on fresh random data with ragged
shapes. Each test runs on two backends (conftest.backend): the `kiln` CLI
stand-in, and libkiln itself when it is built (skipped otherwise).
"""

import numpy as np
import pytest

import kiln
import kiln.language as T

import kernels

M, N, K = T.symbolic("M"), T.symbolic("N"), T.symbolic("K")


def ragged(rng, low, high, avoid=16):
    """A size in [low, high) that is not a multiple of ``avoid``."""
    while True:
        n = int(rng.integers(low, high))
        if n % avoid:
            return n


def test_gemm(backend, rng):
    kernel = kernels.matmul(M, N, K, 64, 64, 32)
    for _ in range(2):  # one compile serves every shape
        m, n, k = ragged(rng, 1, 150), ragged(rng, 1, 150), ragged(rng, 1, 100)
        a = rng.standard_normal((m, k)).astype(np.float16)
        b = rng.standard_normal((k, n)).astype(np.float16)
        c = kernel(a, b)
        assert c.shape == (m, n) and c.dtype == np.float16
        ref = a.astype(np.float32) @ b.astype(np.float32)
        np.testing.assert_allclose(c.astype(np.float32), ref, rtol=1e-2,
                                   atol=1e-2 * np.sqrt(k))


def test_gemm_with_constant_dims_smaller_than_the_block(backend, rng):
    # As TileLang allows: a 64x64x32 block over a 40x24x20 problem written
    # with constant dims; the tile overhangs every tensor edge.
    kernel = kernels.matmul(40, 24, 20, 64, 64, 32)
    a = rng.standard_normal((40, 20)).astype(np.float16)
    b = rng.standard_normal((20, 24)).astype(np.float16)
    c = kernel(a, b)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=1e-2,
                               atol=1e-2 * np.sqrt(20))


def attention_reference(q, k, v, causal):
    q, k, v = (t.astype(np.float64) for t in (q, k, v))
    s = np.einsum("bshd,bthd->bhst", q, k) / np.sqrt(q.shape[-1])
    if causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhst,bthd->bshd", p, v)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_forward(backend, rng, causal):
    batch, heads, dim = 2, 3, 64
    # Constant dims must hold a whole block (tile-ir.md rule 9): seq >= 64.
    seq = ragged(rng, 65, 200)
    kernel = kernels.flashattn(batch, heads, seq, dim, causal)
    q, k, v = (rng.standard_normal((batch, seq, heads, dim)).astype(np.float16)
               for _ in range(3))
    out = kernel(q, k, v)
    assert out.shape == q.shape and out.dtype == np.float16
    np.testing.assert_allclose(out.astype(np.float64),
                               attention_reference(q, k, v, causal),
                               rtol=2e-2, atol=5e-3)


def test_softmax(backend, rng):
    kernel = kernels.softmax(M, N)
    m, n = ragged(rng, 1, 30, 4), ragged(rng, 300, 900, 256)
    x = (rng.standard_normal((m, n)) * 3).astype(np.float16)
    y = kernel(x)
    xf = x.astype(np.float64)
    e = np.exp(xf - xf.max(1, keepdims=True))
    np.testing.assert_allclose(y.astype(np.float64),
                               e / e.sum(1, keepdims=True),
                               rtol=1e-2, atol=1e-4)


def test_rms_norm(backend, rng):
    kernel = kernels.rms_norm(M, N, dtype="float16")
    m, n = ragged(rng, 1, 20, 2), ragged(rng, 100, 1500, 512)
    x = rng.standard_normal((m, n)).astype(np.float16)
    w = rng.standard_normal(n).astype(np.float16)
    y = kernel(x, w)
    xf = x.astype(np.float64)
    ref = xf / np.sqrt((xf ** 2).mean(1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=1e-2,
                               atol=1e-2)


@pytest.mark.parametrize("blk_m", [1, 4])
def test_tilelang_rms_norm_example(backend, rng, blk_m):
    # TileLang's one-pass example: the whole row in a fragment; a ragged
    # last block of rows when blk_m > 1.
    m, n = ragged(rng, 5, 40, 4), 256 * int(rng.integers(1, 4))
    kernel = kernels.rms_norm_row(m, n, blk_m=blk_m)
    x = rng.standard_normal((m, n)).astype(np.float32)
    y = kernel(x)
    xf = x.astype(np.float64)
    ref = xf * (1 / np.sqrt((xf ** 2).mean(1, keepdims=True)) + 1e-12)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_tilelang_layer_norm_example(backend, rng):
    m, d = ragged(rng, 3, 30), 128 * int(rng.integers(2, 9))
    kernel = kernels.layer_norm_fwd(m, d, threads=128, in_dtype="float16",
                                    out_dtype="float16")
    x = (rng.standard_normal((m, d)) * 2 + 0.5).astype(np.float16)
    g, b = (rng.standard_normal(d).astype(np.float16) for _ in range(2))
    y, mean, rstd = kernel(x, g, b)
    xf = x.astype(np.float64)
    mu = xf.mean(1)
    rs = 1 / np.sqrt(xf.var(1) + 1e-5)
    np.testing.assert_allclose(mean, mu, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(rstd, rs, rtol=1e-3)
    ref = (xf - mu[:, None]) * rs[:, None] * g + b
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=2e-2,
                               atol=2e-2)


@pytest.mark.parametrize("n", [1000, 4096, 9000])
def test_tilelang_online_softmax_example(backend, rng, n):
    # N = 1000 masks a 1024-wide tile; N = 9000 takes two 8192-wide tiles,
    # the second mostly past the row end.
    m = ragged(rng, 2, 12)
    kernel = kernels.online_softmax(m, n)
    x = (rng.standard_normal((m, n)) * 3).astype(np.float16)
    y = kernel(x)
    xf = x.astype(np.float64)
    e = np.exp(xf - xf.max(1, keepdims=True))
    np.testing.assert_allclose(y.astype(np.float64),
                               e / e.sum(1, keepdims=True),
                               rtol=1e-2, atol=1e-4)


def test_elementwise_symbolic_dim_and_scalar(backend, rng):
    kernel = kernels.scale_add()
    n = ragged(rng, 1, 5000)
    x = rng.standard_normal(n).astype(np.float32)
    bias = rng.standard_normal(4).astype(np.float32)
    alpha = float(rng.standard_normal())
    y = kernel(x, bias, alpha)
    np.testing.assert_allclose(y, np.float32(alpha) * x + bias[np.arange(n) % 4],
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("block_M,block_N,threads",
                         [(32, 32, 128), (128, 128, 128)])
def test_tilelang_elementwise_add(backend, rng, block_M, block_N, threads):
    # TileLang's example at its own tile and at one whose staging tiles
    # hold 128 elements per thread; ragged edges on both dims.
    m, n = ragged(rng, 1, 300), ragged(rng, 1, 300)
    a = rng.standard_normal((m, n)).astype(np.float32)
    b = rng.standard_normal((m, n)).astype(np.float32)
    c = kernels.elementwise_add(m, n, block_M, block_N, threads)(a, b)
    np.testing.assert_allclose(c, a + b, rtol=1e-6, atol=1e-6)


def test_caller_provided_outputs(backend, rng):
    """Without out_idx every tensor is passed in and written in place."""
    prim = kernels.scale_add.func()
    kernel = __import__("kiln").compile(prim)
    n = ragged(rng, 1, 3000)
    x = rng.standard_normal(n).astype(np.float32)
    bias = np.zeros(4, np.float32)
    y = np.full(n, np.nan, np.float32)
    assert kernel(x, bias, y, 2.0) is None
    np.testing.assert_allclose(y, 2 * x, rtol=1e-6)


@kiln.jit(out_idx=[1, 2, 3])
def nan_row_stats(M, N, block_M=4, dtype="float32"):
    """Per row: max, absmax, and the number of NaNs; TileLang's wording."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Max: T.Tensor((M,), dtype),
             AbsMax: T.Tensor((M,), dtype), Nans: T.Tensor((M,), "int32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as blk:
            x = T.alloc_fragment((block_M, N), dtype)
            mx = T.alloc_fragment((block_M,), dtype)
            am = T.alloc_fragment((block_M,), dtype)
            flags = T.alloc_fragment((block_M, N), "int32")
            cnt = T.alloc_fragment((block_M,), "int32")
            T.copy(X[blk * block_M, 0], x)
            T.reduce_max(x, mx, dim=1)
            T.reduce_absmax(x, am, dim=1)
            for i, j in T.Parallel(block_M, N):
                flags[i, j] = T.if_then_else(T.isnan(x[i, j]), 1, 0)
            T.reduce_sum(flags, cnt, dim=1)
            T.copy(mx, Max[blk * block_M])
            T.copy(am, AbsMax[blk * block_M])
            T.copy(cnt, Nans[blk * block_M])

    return main


def test_reductions_propagate_nan_as_numpy_does(backend, rng):
    m, n = 9, 64
    x = rng.standard_normal((m, n)).astype(np.float32)
    x[1, 0] = np.nan            # first
    x[2, n - 1] = np.nan        # last
    x[3, :] = np.nan            # all
    x[4, 3], x[4, 7], x[4, 9] = np.inf, np.nan, -np.inf
    x[5, :] = -np.inf           # no NaN: the max is -inf
    x[6, 2] = np.inf
    mx, am, nans = nan_row_stats(m, n)(x)
    np.testing.assert_array_equal(mx, np.max(x, axis=1))
    np.testing.assert_array_equal(am, np.max(np.abs(x), axis=1))
    np.testing.assert_array_equal(nans, np.isnan(x).sum(axis=1))
    assert np.isnan(mx[[1, 2, 3, 4]]).all() and mx[5] == -np.inf
