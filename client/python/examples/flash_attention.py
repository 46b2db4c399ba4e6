"""FlashAttention forward over BSHD tensors, in TileLang's dialect.

The kernel below sticks to TileLang's API; only the imports say Kiln, each
under the name TileLang's own would give it. With TileLang they read:

    import tilelang
    import tilelang.language as T
    from tilelang.autotuner import autotune

Each block takes block_M query rows of one (batch, head) and streams the
keys and values past them in block_N-row chunks, keeping a running softmax
in base 2 (log2(e) is folded into the score scale, so T.exp2 does the
work of exp).

Run: python3 examples/flash_attention.py [--causal]  (needs libkiln:
KILN_LIBRARY=.../libkiln.so). With torch and CUDA it runs on the GPU,
otherwise on the CPU target with NumPy.
"""

import argparse
import itertools

import kiln as tilelang
import kiln.language as T
from kiln.autotuner import autotune

LOG2_E = 1.44269504


def search_space():
    """The tile choices the autotuner times, eight in all."""
    return [dict(block_M=bm, block_N=bn, num_stages=stages, threads=128)
            for bm, bn, stages in itertools.product((64, 128), (32, 64),
                                                    (1, 2))]


@autotune(configs=search_space(), warmup=10, rep=10)
@tilelang.jit(out_idx=[3], pass_configs={
    tilelang.PassConfigKey.TL_ENABLE_FAST_MATH: True})
def flashattn(batch, heads, seq_len, dim, is_causal, block_M=64,
              block_N=64, num_stages=1, threads=128):
    """softmax(Q K^T / sqrt(dim)) V, float16 in and out, float32 inside.
    Output is the fourth argument, so the kernel returns it."""
    bshd = [batch, seq_len, heads, dim]
    dtype, accum_dtype = "float16", "float"
    # 1/sqrt(dim) times log2(e): exp2(x * scale) == exp(x / sqrt(dim)).
    scale = (1.0 / dim) ** 0.5 * LOG2_E
    minus_inf = -T.infinity(accum_dtype)
    by_row = T.GemmWarpPolicy.FullRow
    # Tile shapes: query (and output) rows, key (and value) rows, the
    # scores between the two, one number per query row.
    q_tile, kv_tile = (block_M, dim), (block_N, dim)
    s_tile, per_row = (block_M, block_N), (block_M,)

    @T.macro
    def start(Q, q_s, o, denom, m, q_blk, head, b):
        """Loads this block's queries; the output and the running sum start
        at 0, the running max at -inf."""
        T.copy(Q[b, q_blk * block_M:(q_blk + 1) * block_M, head, :], q_s)
        T.fill(o, 0)
        T.fill(denom, 0)
        T.fill(m, minus_inf)

    @T.macro
    def scores(K, q_s, k_s, s, step, q_blk, head, b):
        """s = (this block's queries) x (key chunk `step`)^T, on top of
        -inf wherever a key is out of bounds or out of sight."""
        T.copy(K[b, step * block_N:(step + 1) * block_N, head, :], k_s)
        if is_causal:
            # Query row r sees keys 0..r: in the rows that get stored
            # (r < seq_len) no key past seq_len gets through.
            for i, j in T.Parallel(*s_tile):
                s[i, j] = T.if_then_else(
                    q_blk * block_M + i >= step * block_N + j, 0, minus_inf)
        else:
            # The copy zero-filled any rows past seq_len: hide them.
            for i, j in T.Parallel(*s_tile):
                s[i, j] = T.if_then_else(step * block_N + j < seq_len, 0,
                                         minus_inf)
        T.gemm(q_s, k_s, s, transpose_B=True, policy=by_row)

    @T.macro
    def online_softmax(s, p, m, m_old, alpha, chunk_sum, denom):
        """Turns scores s into unnormalised probabilities p, moving the row
        max m forward; alpha is what earlier chunks get multiplied by."""
        T.copy(m, m_old)
        T.fill(m, minus_inf)
        T.reduce_max(s, m, dim=1, clear=False)
        for i in T.Parallel(*per_row):
            m[i] = T.max(m[i], m_old[i])
        for i in T.Parallel(*per_row):
            alpha[i] = T.exp2(m_old[i] * scale - m[i] * scale)
        for i, j in T.Parallel(*s_tile):
            s[i, j] = T.exp2(s[i, j] * scale - m[i] * scale)
        T.reduce_sum(s, chunk_sum, dim=1)
        for i in T.Parallel(*per_row):
            denom[i] = denom[i] * alpha[i] + chunk_sum[i]
        T.copy(s, p)

    @T.macro
    def accumulate(V, v_s, p, o, alpha, step, head, b):
        """o = alpha * o + p @ (value chunk `step`)."""
        for i, j in T.Parallel(*q_tile):
            o[i, j] *= alpha[i]
        T.copy(V[b, step * block_N:(step + 1) * block_N, head, :], v_s)
        T.gemm(p, v_s, o, policy=by_row)

    @T.macro
    def finish(o, o_s, denom, Output, q_blk, head, b):
        """Divides by the softmax denominators and stores the rows."""
        for i, j in T.Parallel(*q_tile):
            o[i, j] /= denom[i]
        T.copy(o, o_s)
        T.copy(o_s,
               Output[b, q_blk * block_M:(q_blk + 1) * block_M, head, :])

    @T.prim_func
    def main(
            Q: T.Tensor(bshd, dtype),
            K: T.Tensor(bshd, dtype),
            V: T.Tensor(bshd, dtype),
            Output: T.Tensor(bshd, dtype),
    ):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch,
                      threads=threads) as (bx, by, bz):
            # Staging tiles in shared memory.
            Q_shared = T.alloc_shared(q_tile, dtype)
            K_shared = T.alloc_shared(kv_tile, dtype)
            V_shared = T.alloc_shared(kv_tile, dtype)
            O_shared = T.alloc_shared(q_tile, dtype)
            # Register tiles: scores, their float16 copy, the output.
            acc_s = T.alloc_fragment(s_tile, accum_dtype)
            acc_s_cast = T.alloc_fragment(s_tile, dtype)
            acc_o = T.alloc_fragment(q_tile, accum_dtype)
            # Softmax state, one value per query row.
            scores_max = T.alloc_fragment(per_row, accum_dtype)
            scores_max_prev = T.alloc_fragment(per_row, accum_dtype)
            scores_scale = T.alloc_fragment(per_row, accum_dtype)
            scores_sum = T.alloc_fragment(per_row, accum_dtype)
            logsum = T.alloc_fragment(per_row, accum_dtype)

            start(Q, Q_shared, acc_o, logsum, scores_max, bx, by, bz)
            # Causal blocks stop at the chunk holding their last query.
            loop_range = (
                T.min(T.ceildiv(seq_len, block_N),
                      T.ceildiv((bx + 1) * block_M, block_N))
                if is_causal else T.ceildiv(seq_len, block_N))
            for k in T.Pipelined(loop_range, num_stages=num_stages):
                scores(K, Q_shared, K_shared, acc_s, k, bx, by, bz)
                online_softmax(acc_s, acc_s_cast, scores_max,
                               scores_max_prev, scores_scale, scores_sum,
                               logsum)
                accumulate(V, V_shared, acc_s_cast, acc_o, scores_scale,
                           k, by, bz)
            finish(acc_o, O_shared, logsum, Output, bx, by, bz)

    return main


def reference(q, k, v, is_causal):
    """Attention in float64 NumPy."""
    import numpy as np
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    s = np.einsum("bshd,bthd->bhst", q, k) / np.sqrt(q.shape[-1])
    if is_causal:
        n = q.shape[1]
        s = np.where(np.tril(np.ones((n, n), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return np.einsum("bhst,bthd->bshd", p, v)


def main(batch=1, heads=4, seq_len=200, dim=64, is_causal=False):
    tuned = flashattn(batch, heads, seq_len, dim, is_causal)
    print(tuned.ir)
    try:
        import torch
        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    shape = (batch, seq_len, heads, dim)
    if cuda:
        q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16)
                   for _ in range(3))
        out = tuned(q, k, v).float().cpu().numpy()
        q, k, v = (t.float().cpu().numpy() for t in (q, k, v))
    else:
        import numpy as np
        rng = np.random.default_rng()
        q, k, v = (rng.standard_normal(shape).astype(np.float16)
                   for _ in range(3))
        out = tuned(q, k, v)
    import numpy as np
    np.testing.assert_allclose(out, reference(q, k, v, is_causal),
                               rtol=2e-2, atol=5e-3)
    print(f"flash attention matches the reference; best config "
          f"{tuned.config}")


if __name__ == "__main__":
    cli = argparse.ArgumentParser(
        description="Tune, run and check the FlashAttention example.")
    for flag, default, what in (("batch", 1, "sequences per batch"),
                                ("heads", 4, "attention heads"),
                                ("seq_len", 200, "tokens per sequence"),
                                ("dim", 64, "head dimension")):
        cli.add_argument(f"--{flag}", type=int, default=default, help=what)
    cli.add_argument("--causal", action="store_true",
                     help="mask keys that come after the query")
    opts = cli.parse_args()
    main(opts.batch, opts.heads, opts.seq_len, opts.dim, opts.causal)
