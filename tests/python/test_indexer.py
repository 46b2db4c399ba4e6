"""A sparse-attention indexer as a TileLang port writes it (DeepSeek-V3.2's
"lightning indexer" shape): each query token's logits over a window of key
tokens are sum_h relu(q_h . k) * w_h * k_scale. It uses T.reshape twice (the
query heads flattened into GEMM rows, the GEMM's fragment seen as [n, q,
h] for the weighting and the sum over heads), T.alloc_var running minima
and maxima in serial loops, a T.Pipelined loop whose trip count is read
from memory, and masked element stores into the output. Checked on the CPU
target against NumPy with ragged shapes (f16 stands in for FP8, which NumPy
lacks); tests/gpu runs it in FP8 against torch."""

import numpy as np
import pytest

import kiln
import kiln.language as T

S = T.symbolic("S")  # query tokens
L = T.symbolic("L")  # key tokens


@kiln.jit
def indexer_logits(heads=4, dim=32, block_q=4, block_n=32, stages=2,
                   threads=128, dtype="float16"):
    @T.prim_func
    def main(Q: T.Tensor((S, heads, dim), dtype),
             K: T.Tensor((L, dim), dtype),
             KScale: T.Tensor((L,), "float32"),
             W: T.Tensor((S, heads), "float32"),
             Start: T.Tensor((S,), "int32"),
             End: T.Tensor((S,), "int32"),
             Logits: T.Tensor((S, L), "float32")):
        q_rows = T.reshape(Q, (S * heads, dim))
        with T.Kernel(T.ceildiv(S, block_q), threads=threads) as bx:
            q_s = T.alloc_shared((block_q * heads, dim), dtype)
            k_s = T.alloc_shared((block_n, dim), dtype)
            scale = T.alloc_fragment((block_n,), "float32")
            s = T.alloc_fragment((block_n, block_q * heads), "float32")
            s_nqh = T.reshape(s, (block_n, block_q, heads))
            w = T.alloc_fragment((block_q, heads), "float32")
            logits = T.alloc_fragment((block_n, block_q), "float32")
            lo = T.alloc_var("int32")
            hi = T.alloc_var("int32")
            q0 = bx * block_q
            lo = 2147483647
            hi = 0
            for i in T.serial(block_q):
                lo = T.min(lo, T.min(Start[q0 + i], L))
            for i in T.serial(block_q):
                hi = T.max(hi, T.min(End[q0 + i], L))
            T.copy(q_rows[q0 * heads, 0], q_s)
            T.copy(W[q0, 0], w)
            for kb in T.Pipelined(T.ceildiv(hi - lo, block_n),
                                  num_stages=stages):
                k0 = lo + kb * block_n
                T.copy(K[k0, 0], k_s)
                T.copy(KScale[k0], scale)
                T.gemm(k_s, q_s, s, transpose_B=True, clear_accum=True)
                for n, q, h in T.Parallel(block_n, block_q, heads):
                    s_nqh[n, q, h] = T.max(s_nqh[n, q, h], 0) * w[q, h] * \
                        scale[n]
                T.reduce_sum(s_nqh, logits, dim=-1)
                for q, n in T.Parallel(block_q, block_n):
                    t = k0 + n
                    if t >= Start[q0 + q] and t < End[q0 + q]:
                        Logits[q0 + q, t] = logits[n, q]
    return main


def indexer_reference(q, k, k_scale, w, start, end):
    """logits[s, t] = sum_h relu(q[s, h] . k[t]) * w[s, h] * k_scale[t]
    for start[s] <= t < end[s]; -inf elsewhere."""
    dots = np.einsum("shd,td->sht", q.astype(np.float64),
                     k.astype(np.float64))
    out = np.einsum("sht,sh->st", np.maximum(dots, 0), w) * k_scale[None, :]
    t = np.arange(k.shape[0])[None, :]
    inside = (t >= start[:, None]) & (t < end[:, None])
    return np.where(inside, out, -np.inf)


def indexer_case(rng, queries, keys, heads=4, dim=32):
    """Causal-like windows: query s sees keys [s / 2 - 20, s / 2 + 17), cut
    to the keys there are (some empty, some past the end)."""
    q = rng.integers(-3, 4, (queries, heads, dim)).astype(np.float16)
    k = rng.integers(-3, 4, (keys, dim)).astype(np.float16)
    k_scale = rng.uniform(0.5, 2, keys).astype(np.float32)
    w = rng.standard_normal((queries, heads)).astype(np.float32)
    mid = np.arange(queries) // 2
    start = np.clip(mid - 20, 0, None).astype(np.int32)
    end = (mid + 17).astype(np.int32)
    end[::7] = start[::7]  # empty windows
    return q, k, k_scale, w, start, end


@pytest.mark.parametrize("block_q,block_n", [(4, 32), (2, 64)])
def test_indexer_logits_match_numpy(backend, rng, block_q, block_n):
    kernel = indexer_logits(block_q=block_q, block_n=block_n)
    assert "alloc fragment s_nqh" in kernel.ir  # (the reduce takes it)
    queries = 37 + int(rng.integers(0, 9))
    keys = 29 + int(rng.integers(0, 9))
    q, k, k_scale, w, start, end = indexer_case(rng, queries, keys)
    out = np.full((queries, keys), -np.inf, np.float32)
    kernel(q, k, k_scale, w, start, end, out)
    want = indexer_reference(q, k, k_scale, w, start, np.minimum(end, keys))
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-4)
