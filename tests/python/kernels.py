"""Kernels written the way TileLang users write them, shared by the tests."""

import numpy as np

import kiln
import kiln.language as T
from kiln.layout import make_swizzled_layout

# exp(x) == exp2(x * _LOG2E): the attention kernels fold it into their
# score scale and run the softmax on T.exp2.
_LOG2E = 1.44269504


def _swizzled(*tiles):
    """The T.annotate_layout map giving each shared tile the swizzled
    layout."""
    return {tile: make_swizzled_layout(tile) for tile in tiles}


@T.macro
def _fold_in_block(scores, probs, acc, row_max, prev_max, rescale,
                   block_sum, denom, scale):
    """One key block of a forward attention's base-2 online softmax, the
    block's raw scores in `scores`: the row maxima move up to cover it, the
    scores become exp2 weights against them (and, in the input dtype,
    `probs`, the A operand of the P @ V gemm that follows), and the running
    denominators and output rows are rescaled from the old maxima."""
    T.copy(row_max, prev_max)
    T.fill(row_max, -T.infinity(row_max.dtype))
    T.reduce_max(scores, row_max, dim=1, clear=False)
    for r in T.Parallel(scores.shape[0]):
        row_max[r] = T.max(row_max[r], prev_max[r])
    for r in T.Parallel(scores.shape[0]):
        rescale[r] = T.exp2(prev_max[r] * scale - row_max[r] * scale)
    for r, c in T.Parallel(*scores.shape):
        scores[r, c] = T.exp2(scores[r, c] * scale - row_max[r] * scale)
    T.reduce_sum(scores, block_sum, dim=1)
    for r in T.Parallel(scores.shape[0]):
        denom[r] = denom[r] * rescale[r] + block_sum[r]
    T.copy(scores, probs)
    for r, c in T.Parallel(*acc.shape):
        acc[r, c] *= rescale[r]


@kiln.jit(out_idx=[-1])
def matmul(M, N, K, block_M, block_N, block_K, num_stages=2, threads=128,
           dtype="float16", accum_dtype="float"):
    """C = A @ B (f16 in, f32 accumulate), with swizzled shared tiles."""
    # The tiles and the loop carry the names of tests/codegen/phrasings/gemm:
    # the plans of those spellings and of this one must be equal, and a plan
    # names its tiles and loops.
    a_block, b_block = (block_M, block_K), (block_K, block_N)
    c_block = (block_M, block_N)
    k_steps = T.ceildiv(K, block_K)

    @T.prim_func
    def gemm(
            A: T.Tensor((M, K), dtype),
            B: T.Tensor((K, N), dtype),
            C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=threads) as (nb, mb):
            A_shared = T.alloc_shared(a_block, dtype)
            B_shared = T.alloc_shared(b_block, dtype)
            C_local = T.alloc_fragment(c_block, accum_dtype)
            T.annotate_layout(_swizzled(A_shared, B_shared))
            T.use_swizzle(panel_size=8)
            T.clear(C_local)
            for k in T.Pipelined(k_steps, num_stages=num_stages):
                T.copy(A[mb * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, nb * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[mb * block_M, nb * block_N])

    return gemm


@kiln.jit(out_idx=[3])
def flashattn(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64,
              num_stages=1, threads=128):
    """FlashAttention-2 forward, BSHD layout, base-2 online softmax."""
    scale = (1.0 / dim) ** 0.5 * _LOG2E
    shape = (batch, seq_len, heads, dim)
    dtype = "float16"
    accum_dtype = "float"

    def attends(q_pos, k_pos):
        # Causal: a query sees the keys up to its own position; otherwise
        # every key that exists (the last block may run past seq_len).
        return q_pos >= k_pos if is_causal else k_pos < seq_len

    @T.prim_func
    def mha_fwd(
            Q: T.Tensor(shape, dtype),
            K: T.Tensor(shape, dtype),
            V: T.Tensor(shape, dtype),
            Output: T.Tensor(shape, dtype),
    ):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch,
                      threads=threads) as (qb, h, b):
            q_tile = T.alloc_shared((block_M, dim), dtype)
            k_tile = T.alloc_shared((block_N, dim), dtype)
            v_tile = T.alloc_shared((block_N, dim), dtype)
            o_tile = T.alloc_shared((block_M, dim), dtype)
            scores = T.alloc_fragment((block_M, block_N), accum_dtype)
            probs = T.alloc_fragment((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M, dim), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            prev_max = T.alloc_fragment((block_M,), accum_dtype)
            rescale = T.alloc_fragment((block_M,), accum_dtype)
            block_sum = T.alloc_fragment((block_M,), accum_dtype)
            denom = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(Q[b, qb * block_M:(qb + 1) * block_M, h, :], q_tile)
            T.fill(acc, 0)
            T.fill(denom, 0)
            T.fill(row_max, -T.infinity(accum_dtype))

            # Causal blocks stop at the diagonal.
            kv_blocks = (T.ceildiv((qb + 1) * block_M, block_N) if is_causal
                         else T.ceildiv(seq_len, block_N))

            for kb in T.Pipelined(kv_blocks, num_stages=num_stages):
                T.copy(K[b, kb * block_N:(kb + 1) * block_N, h, :], k_tile)
                # The mask goes in first; the gemm adds the scores to it.
                for m, n in T.Parallel(block_M, block_N):
                    scores[m, n] = T.if_then_else(
                        attends(qb * block_M + m, kb * block_N + n), 0,
                        -T.infinity(accum_dtype))
                T.gemm(q_tile, k_tile, scores, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
                _fold_in_block(scores, probs, acc, row_max, prev_max,
                               rescale, block_sum, denom, scale)
                T.copy(V[b, kb * block_N:(kb + 1) * block_N, h, :], v_tile)
                T.gemm(probs, v_tile, acc, policy=T.GemmWarpPolicy.FullRow)
            for r, c in T.Parallel(block_M, dim):
                acc[r, c] /= denom[r]
            T.copy(acc, o_tile)
            T.copy(o_tile, Output[b, qb * block_M:(qb + 1) * block_M, h, :])

    return mha_fwd


@kiln.jit(out_idx=[1])
def softmax(M, N, block_M=4, block_N=256, dtype="float16"):
    """Row softmax over any N: an online max/sum pass, then a write pass."""
    # Tile names as in tests/codegen/phrasings/softmax (the plans compare).
    accum_dtype = "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as rb:
            xs = T.alloc_fragment((block_M, block_N), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            tile_max = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)
            T.fill(row_max, -T.infinity(accum_dtype))
            T.clear(row_sum)
            for t in T.Serial(T.ceildiv(N, block_N)):
                T.copy(X[rb * block_M, t * block_N], xs)
                for r, c in T.Parallel(block_M, block_N):
                    if t * block_N + c >= N:
                        xs[r, c] = -T.infinity(accum_dtype)
                T.reduce_max(xs, tile_max, dim=1)
                for r in T.Parallel(block_M):
                    new_max = T.max(row_max[r], tile_max[r])
                    row_sum[r] = row_sum[r] * T.exp(row_max[r] - new_max)
                    row_max[r] = new_max
                for r, c in T.Parallel(block_M, block_N):
                    xs[r, c] = T.exp(xs[r, c] - row_max[r])
                T.reduce_sum(xs, row_sum, dim=1, clear=False)
            for t in T.Serial(T.ceildiv(N, block_N)):
                T.copy(X[rb * block_M, t * block_N], xs)
                for r, c in T.Parallel(block_M, block_N):
                    xs[r, c] = T.exp(xs[r, c] - row_max[r]) / row_sum[r]
                T.copy(xs, Y[rb * block_M, t * block_N])

    return main


@kiln.jit(out_idx=[2])
def rms_norm(M, N, block_M=2, block_N=512, eps=1e-6, dtype="bfloat16"):
    """Y = X * rsqrt(mean(X^2) + eps) * W, f32 statistics."""
    # Tile names as in tests/codegen/phrasings/rmsnorm (the plans compare).

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=256) as rb:
            xs = T.alloc_fragment((block_M, block_N), "float32")
            sq = T.alloc_fragment((block_M, block_N), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            T.clear(ss)
            for t in T.Serial(T.ceildiv(N, block_N)):
                T.copy(X[rb * block_M, t * block_N], xs)
                for r, c in T.Parallel(block_M, block_N):
                    sq[r, c] = xs[r, c] * xs[r, c]
                T.reduce_sum(sq, ss, dim=1, clear=False)
            for r in T.Parallel(block_M):
                ss[r] = T.rsqrt(ss[r] / N + eps)
            for t in T.Serial(T.ceildiv(N, block_N)):
                T.copy(X[rb * block_M, t * block_N], xs)
                for r, c in T.Parallel(block_M, block_N):
                    col = t * block_N + c
                    if col < N:
                        xs[r, c] = xs[r, c] * ss[r] * W[col]
                T.copy(xs, Y[rb * block_M, t * block_N])

    return main


@kiln.jit(out_idx=[-1])
def rms_norm_row(M, N, blk_m=1, threads=128, dtype="float"):
    """TileLang's one-pass RMSNorm example, step for step (no weight; its
    `rsqrt(ms) + 1e-12` kept): the whole row staged in shared memory, copied
    into a fragment, squared into a second fragment, reduced, scaled."""
    rows = (M, N)

    @T.prim_func
    def main(A: T.Tensor(rows, dtype), B: T.Tensor(rows, dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=threads) as rb:
            staged = T.alloc_shared((blk_m, N), dtype)
            squares = T.alloc_fragment((blk_m, N), dtype)
            vals = T.alloc_fragment((blk_m, N), dtype)
            # Each row's sum of squares, then the factor that scales it.
            factor = T.alloc_fragment((blk_m,), dtype)
            T.copy(A[rb * blk_m:(rb + 1) * blk_m, :], staged)
            T.copy(staged, vals)
            for r, c in T.Parallel(blk_m, N):
                squares[r, c] = vals[r, c] * vals[r, c]
            T.reduce_sum(squares, factor, dim=1)
            for r in T.Parallel(blk_m):
                factor[r] = T.rsqrt(factor[r] / N) + 1e-12
            for r, c in T.Parallel(blk_m, N):
                vals[r, c] *= factor[r]
            T.copy(vals, B[rb * blk_m:(rb + 1) * blk_m, :])

    return main


@kiln.jit(out_idx=[-1])
def elementwise_add(M, N, block_M=32, block_N=32, threads=128,
                    in_dtype="float32", out_dtype="float32"):
    """C = A + B as TileLang's element-wise example writes it: both inputs
    staged through shared tiles, the sum made in a fragment, staged out
    through a third shared tile."""
    @T.prim_func
    def main(A: T.Tensor((M, N), in_dtype), B: T.Tensor((M, N), in_dtype),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=threads) as (bx, by):
            a_s = T.alloc_shared((block_M, block_N), in_dtype)
            b_s = T.alloc_shared((block_M, block_N), in_dtype)
            c_f = T.alloc_fragment((block_M, block_N), out_dtype)
            c_s = T.alloc_shared((block_M, block_N), out_dtype)
            T.copy(A[by * block_M, bx * block_N], a_s)
            T.copy(B[by * block_M, bx * block_N], b_s)
            for y, x in T.Parallel(block_M, block_N):
                c_f[y, x] = a_s[y, x] + b_s[y, x]
            T.copy(c_f, c_s)
            T.copy(c_s, C[by * block_M, bx * block_N])

    return main


@kiln.jit(out_idx=[-3, -2, -1])
def layer_norm_fwd(N, D, eps=1e-5, blk_m=1, threads=256,
                   in_dtype="bfloat16", out_dtype="bfloat16"):
    """TileLang's LayerNorm forward example, step for step: X, gamma and
    beta staged in shared memory, f32 statistics from two row sums, Mean
    and Rstd stored element by element, Y written back through X's tile."""
    accum = "float"

    @T.prim_func
    def main(X: T.Tensor((N, D), in_dtype), gamma: T.Tensor((D,), in_dtype),
             beta: T.Tensor((D,), in_dtype), Y: T.Tensor((N, D), out_dtype),
             Mean: T.Tensor((N,), accum), Rstd: T.Tensor((N,), accum)):
        with T.Kernel(T.ceildiv(N, blk_m), threads=threads) as rb:
            x_stage = T.alloc_shared((blk_m, D), in_dtype)
            g_stage = T.alloc_shared((D,), in_dtype)
            b_stage = T.alloc_shared((D,), in_dtype)
            xf = T.alloc_fragment((blk_m, D), accum)
            xf_sq = T.alloc_fragment((blk_m, D), accum)
            total = T.alloc_fragment((blk_m,), accum)
            total_sq = T.alloc_fragment((blk_m,), accum)
            mu = T.alloc_fragment((blk_m,), accum)
            rstd = T.alloc_fragment((blk_m,), accum)
            T.copy(X[rb * blk_m, 0], x_stage)
            T.copy(gamma, g_stage)
            T.copy(beta, b_stage)
            for r, c in T.Parallel(blk_m, D):
                xf[r, c] = T.Cast(accum, x_stage[r, c])
            for r, c in T.Parallel(blk_m, D):
                xf_sq[r, c] = xf[r, c] * xf[r, c]
            T.reduce_sum(xf, total, dim=1)
            T.reduce_sum(xf_sq, total_sq, dim=1)
            # Var = E[x^2] - E[x]^2, both means taken as sums times 1 / D.
            inv_width = T.float32(1.0) / T.Cast(accum, D)
            for r in T.Parallel(blk_m):
                mu[r] = total[r] * inv_width
                rstd[r] = T.rsqrt(total_sq[r] * inv_width - mu[r] * mu[r] +
                                  T.Cast(accum, eps))
                Mean[rb * blk_m + r] = mu[r]
                Rstd[rb * blk_m + r] = rstd[r]
            for r, c in T.Parallel(blk_m, D):
                centred = (xf[r, c] - mu[r]) * rstd[r]
                x_stage[r, c] = T.Cast(out_dtype,
                                       centred * T.Cast(accum, g_stage[c]) +
                                       T.Cast(accum, b_stage[c]))
            T.copy(x_stage, Y[rb * blk_m, 0])

    return main


@kiln.jit(out_idx=[1])
def online_softmax(M, N, dtype="float16"):
    """TileLang's online-softmax example, step for step: chunks of the next
    power of two of N (at most 8192), a base-2 log-sum-exp pass, then a
    write pass; the running log-sum-exp is a one-element fragment updated
    outside any T.Parallel."""
    width = min(kiln.next_power_of_2(N), 8192)
    n_chunks = kiln.cdiv(N, width)
    accum = "float"

    @T.prim_func
    def main(X: T.Tensor([M, N], dtype), Y: T.Tensor([M, N], dtype)):
        with T.Kernel(M, threads=128) as r:
            chunk = T.alloc_fragment([width], dtype)
            probs = T.alloc_fragment([width], dtype)
            run_lse = T.alloc_fragment([1], accum)
            peak = T.alloc_fragment([1], dtype)
            w = T.alloc_fragment([width], accum)
            w_sum = T.alloc_fragment([1], accum)
            T.fill(run_lse, -T.infinity(accum))
            for c in T.Pipelined(0, n_chunks):
                T.copy(X[r, c * width:(c + 1) * width], chunk)
                T.reduce_max(chunk, peak, dim=0, clear=True)
                for e in T.Parallel(width):
                    w[e] = T.if_then_else(
                        e + c * width < N,
                        T.exp2(chunk[e] * _LOG2E - peak[0] * _LOG2E), 0)
                T.reduce_sum(w, w_sum, dim=0, clear=True)
                # log2(2^lse + sum) with the chunk's peak factored out.
                run_lse[0] = peak[0] * _LOG2E + T.log2(
                    T.exp2(run_lse[0] - peak[0] * _LOG2E) + w_sum[0])
            for c in T.Pipelined(0, n_chunks):
                T.copy(X[r, c * width:(c + 1) * width], chunk)
                for e in T.Parallel(width):
                    if e + c * width < N:
                        probs[e] = T.exp2(chunk[e] * _LOG2E - run_lse[0])
                T.copy(probs, Y[r, c * width:(c + 1) * width])

    return main


@kiln.jit(out_idx=[2])
def scale_add(block=1024, dtype="float32"):
    """Y = alpha * X + Bias[n % 4] over a flat symbolic length N."""
    N = T.symbolic("N")

    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Bias: T.Tensor((4,), dtype),
             Y: T.Tensor((N,), dtype), alpha: T.float32):
        with T.Kernel(T.ceildiv(N, block), threads=256) as bx:
            xs = T.alloc_fragment((block,), dtype)
            T.copy(X[bx * block], xs)
            for i in T.Parallel(block):
                xs[i] = alpha * xs[i] + Bias[(bx * block + i) % 4]
            T.copy(xs, Y[bx * block])

    return main


def tuned_flashattn():
    """flashattn under kiln.autotune: integer configs become tunables."""
    configs = [
        {"block_M": m, "block_N": n, "num_stages": s, "threads": 128}
        for m in (64, 128) for n in (32, 64) for s in (1, 2)
    ]
    return kiln.autotune(configs=configs, warmup=1, rep=2)(flashattn)


@kiln.jit(out_idx=[1])
def double(block=128, num_stages=2):
    """B = 2 * A in blocks of `block`, loaded through a pipelined loop
    (num_stages=9 does not compile: too many stages)."""
    N = T.symbolic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=128) as blk:
            a = T.alloc_fragment((block,), "float32")
            for k in T.Pipelined(1, num_stages=num_stages):
                T.copy(A[blk * block], a)
            for i in T.Parallel(block):
                a[i] = a[i] * 2
            T.copy(a, B[blk * block])

    return main


def flashattn_tilelang(batch, heads, seq_len, dim, is_causal, **tiles):
    """FlashAttention forward worded as TileLang's example is (macros, the
    causal bound as T.min of T.ceildivs bound to a Python name): the
    example's own kernel (client/python/examples/flash_attention.py), every
    tunable given (so not tuned). The corpus program spelled otherwise
    (tests/codegen/phrasings)."""
    return _example("flash_attention").flashattn(
        batch, heads, seq_len, dim, is_causal, **tiles)


def _example(name):
    """A module of client/python/examples, loaded by path."""
    import importlib.util
    import os
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                        "..", "client", "python", "examples", name + ".py")
    spec = importlib.util.spec_from_file_location("kiln_example_" + name, path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    return example


@kiln.jit(out_idx=[-1])
def paged_decode(batch, heads, kv_heads, dim, page_size, max_pages,
                 num_pages, num_split=1, block_N=None, block_H=64,
                 num_stages=2, dtype="bfloat16", accum_dtype="float"):
    """Decode attention over a paged KV cache (vLLM's layout), grouped
    query heads, split-KV (flash decoding): one T.Kernel per split writes
    a partial output and its log-sum-exp into T.alloc_global tensors, a
    second combines them. Keys stream in block_N-token chunks of a page."""
    group = heads // kv_heads
    block_N = block_N or min(page_size, 64)
    assert heads % kv_heads == 0 and group <= block_H
    assert page_size % block_N == 0, "block_N must divide the page size"
    chunks = page_size // block_N
    scale = (1.0 / dim) ** 0.5 * _LOG2E

    @T.macro
    def split_kv(Q, KC, VC, BT, L, O_part, Lse_part):
        with T.Kernel(kv_heads, batch, num_split, threads=128) as (h, b, z):
            Q_s = T.alloc_shared([block_H, dim], dtype)
            K_s = T.alloc_shared([block_N, dim], dtype)
            V_s = T.alloc_shared([block_N, dim], dtype)
            logits = T.alloc_fragment([block_H, block_N], accum_dtype)
            p16 = T.alloc_fragment([block_H, block_N], dtype)
            o_acc = T.alloc_fragment([block_H, dim], accum_dtype)
            m = T.alloc_fragment([block_H], accum_dtype)
            m_prev = T.alloc_fragment([block_H], accum_dtype)
            alpha = T.alloc_fragment([block_H], accum_dtype)
            row_sum = T.alloc_fragment([block_H], accum_dtype)
            l = T.alloc_fragment([block_H], accum_dtype)
            # Rows past the group belong to the next KV head: computed,
            # never stored.
            T.copy(Q[b, h * group:h * group + block_H, :], Q_s)
            T.fill(o_acc, 0)
            T.fill(l, 0)
            T.fill(m, -T.infinity(accum_dtype))
            length = L[b]
            total = T.ceildiv(length, block_N)
            per = T.ceildiv(total, num_split)
            lo = T.min(z * per, total)
            hi = T.min(lo + per, total)
            for c in T.Pipelined(lo, hi, num_stages=num_stages):
                page = BT[b, c // chunks]
                off = c % chunks * block_N
                T.copy(KC[page, off:off + block_N, h, :], K_s)
                T.clear(logits)
                T.gemm(Q_s, K_s, logits, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
                for g, t in T.Parallel(block_H, block_N):
                    logits[g, t] = T.if_then_else(c * block_N + t < length,
                                                  logits[g, t],
                                                  -T.infinity(accum_dtype))
                T.copy(m, m_prev)
                T.reduce_max(logits, m, dim=1, clear=False)
                for g in T.Parallel(block_H):
                    alpha[g] = T.exp2((m_prev[g] - m[g]) * scale)
                for g, t in T.Parallel(block_H, block_N):
                    logits[g, t] = T.exp2((logits[g, t] - m[g]) * scale)
                T.reduce_sum(logits, row_sum, dim=1)
                for g in T.Parallel(block_H):
                    l[g] = l[g] * alpha[g] + row_sum[g]
                T.copy(logits, p16)
                for g, d in T.Parallel(block_H, dim):
                    o_acc[g, d] *= alpha[g]
                T.copy(VC[page, off:off + block_N, h, :], V_s)
                T.gemm(p16, V_s, o_acc, policy=T.GemmWarpPolicy.FullRow)
            for g, d in T.Parallel(block_H, dim):
                if g < group:
                    O_part[b, h * group + g, z, d] = T.if_then_else(
                        l[g] > 0, o_acc[g, d] / l[g], 0)
            for g in T.Parallel(block_H):
                if g < group:
                    Lse_part[b, h * group + g, z] = T.if_then_else(
                        l[g] > 0, T.log2(l[g]) + m[g] * scale,
                        -T.infinity(accum_dtype))

    @T.macro
    def combine(O_part, Lse_part, Out):
        with T.Kernel(heads, batch, threads=128) as (hq, b):
            o = T.alloc_fragment([dim], accum_dtype)
            lse_max = T.alloc_var(accum_dtype)
            weight_sum = T.alloc_var(accum_dtype)
            lse_max = -T.infinity(accum_dtype)
            weight_sum = 0
            for z in T.serial(num_split):
                lse_max = T.max(lse_max, Lse_part[b, hq, z])
            T.clear(o)
            for z in T.serial(num_split):
                lse = Lse_part[b, hq, z]
                w = T.if_then_else(lse == -T.infinity(accum_dtype), 0,
                                   T.exp2(lse - lse_max))
                weight_sum += w
                for d in T.Parallel(dim):
                    o[d] += w * O_part[b, hq, z, d]
            for d in T.Parallel(dim):
                Out[b, hq, d] = T.if_then_else(weight_sum > 0,
                                               o[d] / weight_sum, 0)

    @T.prim_func
    def main(Q: T.Tensor([batch, heads, dim], dtype),
             K_cache: T.Tensor([num_pages, page_size, kv_heads, dim], dtype),
             V_cache: T.Tensor([num_pages, page_size, kv_heads, dim], dtype),
             block_table: T.Tensor([batch, max_pages], "int32"),
             seq_lens: T.Tensor([batch], "int32"),
             Out: T.Tensor([batch, heads, dim], dtype)):
        O_part = T.alloc_global([batch, heads, num_split, dim], accum_dtype)
        Lse_part = T.alloc_global([batch, heads, num_split], accum_dtype)
        split_kv(Q, K_cache, V_cache, block_table, seq_lens, O_part,
                 Lse_part)
        combine(O_part, Lse_part, Out)

    # A variant defined and not returned (TileLang examples keep one per
    # configuration): never translated.
    @T.prim_func
    def unused(Q: T.Tensor([batch, heads, dim], dtype)):
        T.thread_binding(0, 128, "threadIdx.x")

    return main


@kiln.jit(out_idx=[])
def scatter_add(rows, dim, tokens, block=16, dtype="float32"):
    """Embedding-gradient style scatter: Grad[Index[t], :] += dY[t, :] for
    every token, indices repeating (element-wise T.atomic_add)."""

    @T.prim_func
    def main(dY: T.Tensor((tokens, dim), dtype),
             Index: T.Tensor((tokens,), "int32"),
             Grad: T.Tensor((rows, dim), dtype)):
        with T.Kernel(T.ceildiv(tokens, block), threads=128) as bx:
            idx = T.alloc_fragment((block,), "int32")
            dy = T.alloc_fragment((block, dim), dtype)
            T.copy(Index[bx * block], idx)
            T.copy(dY[bx * block, 0], dy)
            for i, d in T.Parallel(block, dim):
                if bx * block + i < tokens:
                    T.atomic_add(Grad[idx[i], d], dy[i, d])
    return main


@kiln.jit(out_idx=[-1])
def split_combine(batch, heads, num_split, dim=128, dtype="float16",
                  accum_dtype="float"):
    """TileLang's flash-decoding combine step as its examples write it:
    one-element fragments (and fragment elements) read and written outside
    T.Parallel, a serial loop over the splits."""

    @T.prim_func
    def main(Lse: T.Tensor([batch, heads, num_split], accum_dtype),
             O_part: T.Tensor([batch, heads, num_split, dim], accum_dtype),
             Out: T.Tensor([batch, heads, dim], dtype)):
        with T.Kernel(heads, batch, threads=128) as (h, b):
            po = T.alloc_fragment([dim], accum_dtype)
            o = T.alloc_fragment([dim], accum_dtype)
            lse_split = T.alloc_fragment([1], accum_dtype)
            lse_sum = T.alloc_fragment([1], accum_dtype)
            lse_max = T.alloc_fragment([1], accum_dtype)
            scale = T.alloc_fragment([1], accum_dtype)
            T.clear(lse_sum)
            T.clear(o)
            lse_max[0] = -T.infinity(accum_dtype)
            for k in T.serial(num_split):
                lse_max[0] = T.max(lse_max[0], Lse[b, h, k])
            for k in T.serial(num_split):
                lse_split[0] = Lse[b, h, k]
                lse_sum[0] += T.exp2(lse_split[0] - lse_max[0])
            lse_sum[0] = T.log2(lse_sum[0]) + lse_max[0]
            for k in T.serial(num_split):
                T.copy(O_part[b, h, k, :], po)
                scale[0] = T.exp2(Lse[b, h, k] - lse_sum[0])
                for i in T.Parallel(dim):
                    o[i] += po[i] * scale[0]
            for i in T.Parallel(dim):
                Out[b, h, i] = o[i]
    return main


@kiln.jit(out_idx=[-1])
def moe_gemm(num_experts, N, K, block_M=128, block_N=256, block_K=64,
             num_stages=3, threads=256, dtype="bfloat16",
             accum_dtype="float"):
    """Grouped GEMM of a mixture of experts as a TileLang author writes it:
    routed tokens sorted by expert (expert e owns rows offsets[e] up to
    offsets[e + 1]), one weight [N, K] per expert, and a tile map (expert,
    first row) per block_M-row tile, so that the grid is sized from data.
    Rows past a tile's segment are computed and not stored."""
    M = T.symbolic("M")
    num_tiles = T.symbolic("num_tiles")

    @T.prim_func
    def main(A: T.Tensor((M, K), dtype),
             W: T.Tensor((num_experts, N, K), dtype),
             offsets: T.Tensor((num_experts + 1,), "int32"),
             tiles: T.Tensor((num_tiles, 2), "int32"),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(N, block_N), num_tiles,
                      threads=threads) as (nb, tile):
            x_blk = T.alloc_shared((block_M, block_K), dtype)
            w_blk = T.alloc_shared((block_N, block_K), dtype)
            y_acc = T.alloc_fragment((block_M, block_N), accum_dtype)
            expert = tiles[tile, 0]
            row0 = tiles[tile, 1]
            rows = offsets[expert + 1] - row0
            T.use_swizzle(panel_size=8)
            T.clear(y_acc)
            for k in T.Pipelined(T.ceildiv(K, block_K),
                                 num_stages=num_stages):
                T.copy(A[row0, k * block_K], x_blk)
                T.copy(W[expert, nb * block_N, k * block_K], w_blk)
                T.gemm(x_blk, w_blk, y_acc, transpose_B=True)
            for r, c in T.Parallel(block_M, block_N):
                if r < rows:
                    Y[row0 + r, nb * block_N + c] = y_acc[r, c]

    return main


def moe_tile_map(offsets, block_M):
    """The (expert, first row) of every block_M-row tile of the segments
    that `offsets` (NumPy, num_experts + 1 entries) delimits, in order."""
    tiles = [(e, r) for e in range(len(offsets) - 1)
             for r in range(int(offsets[e]), int(offsets[e + 1]), block_M)]
    return np.array(tiles, np.int32).reshape(-1, 2)


@kiln.jit(out_idx=[-1])
def fp8_blockwise_gemm(N, K, block_M=128, num_stages=3, threads=256,
                       out_dtype="bfloat16", accum_dtype="float32",
                       in_dtype="float8_e4m3"):
    """DeepSeek-V3's block-scaled FP8 GEMM in the shape of TileLang's
    example: a_scale is [M, ceil(K / 128)] (one scale per row per 128
    columns), b_scale [ceil(N / 128), ceil(K / 128)] (one per 128 x 128
    block of B); each 128-column step's product lands in a fresh
    accumulator and is added, scaled, into the running one. M is symbolic
    (the token count); in_dtype is a parameter so that NumPy, which has no
    FP8, can drive it."""
    group_size = 128
    block_N = block_K = group_size
    M = T.symbolic("M")
    groups_k = T.ceildiv(K, group_size)

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype),
             B: T.Tensor((N, K), in_dtype),
             a_scale: T.Tensor((M, groups_k), "float32"),
             b_scale: T.Tensor((T.ceildiv(N, group_size), groups_k),
                               "float32"),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=threads) as (nb, mb):
            a_q = T.alloc_shared((block_M, block_K), in_dtype)
            b_q = T.alloc_shared((block_N, block_K), in_dtype)
            c_out = T.alloc_shared((block_M, block_N), out_dtype)
            row_scale = T.alloc_fragment((block_M,), accum_dtype)
            step = T.alloc_fragment((block_M, block_N), accum_dtype)
            total = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(step)
            T.clear(total)
            for k in T.Pipelined(T.ceildiv(K, block_K),
                                 num_stages=num_stages):
                T.copy(A[mb * block_M, k * block_K], a_q)
                T.copy(B[nb * block_N, k * block_K], b_q)
                # One B scale for the whole tile: block_N is a group.
                b_group = b_scale[nb * block_N // group_size, k]
                for r in T.Parallel(block_M):
                    row_scale[r] = a_scale[mb * block_M + r, k] * b_group
                T.gemm(a_q, b_q, step, transpose_B=True)
                for r, c in T.Parallel(block_M, block_N):
                    total[r, c] += step[r, c] * row_scale[r]
                T.clear(step)
            T.copy(total, c_out)
            T.copy(c_out, C[mb * block_M, nb * block_N])

    return main


@kiln.jit(out_idx=[6])
def flashattn_varlen(batch, groups, total_q, total_kv, heads, dim, is_causal,
                     block_M=64, block_N=64, num_stages=1, threads=128,
                     dtype="float16", accum_dtype="float"):
    """Variable-length (packed) GQA prefill in the manner of TileLang's
    varlen example: sequences packed along the token axis, cu_seqlens_q/k
    give each sequence's first token (batch + 1 entries), `groups` query
    heads share a KV head, one block per (query tile, head, sequence) of a
    grid sized by max_seqlen_q (a scalar argument). The causal mask is
    aligned at the top left, as flash-attn's is for equal lengths; query
    rows past a sequence's end are computed and not stored."""
    scale = (1.0 / dim) ** 0.5 * _LOG2E
    kv_heads = heads // groups

    @T.prim_func
    def main(Q_unpad: T.Tensor((total_q, heads, dim), dtype),
             K_unpad: T.Tensor((total_kv, kv_heads, dim), dtype),
             V_unpad: T.Tensor((total_kv, kv_heads, dim), dtype),
             cu_seqlens_q: T.Tensor((batch + 1,), "int32"),
             cu_seqlens_k: T.Tensor((batch + 1,), "int32"),
             max_seqlen_q: T.int32,
             Output_unpad: T.Tensor((total_q, heads, dim), dtype)):
        with T.Kernel(T.ceildiv(max_seqlen_q, block_M), heads, batch,
                      threads=threads) as (qb, h, s):
            q_tile = T.alloc_shared((block_M, dim), dtype)
            k_tile = T.alloc_shared((block_N, dim), dtype)
            v_tile = T.alloc_shared((block_N, dim), dtype)
            o_tile = T.alloc_shared((block_M, dim), dtype)
            scores = T.alloc_fragment((block_M, block_N), accum_dtype)
            probs = T.alloc_fragment((block_M, block_N), dtype)
            acc = T.alloc_fragment((block_M, dim), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            prev_max = T.alloc_fragment((block_M,), accum_dtype)
            rescale = T.alloc_fragment((block_M,), accum_dtype)
            block_sum = T.alloc_fragment((block_M,), accum_dtype)
            denom = T.alloc_fragment((block_M,), accum_dtype)
            T.annotate_layout(_swizzled(q_tile, o_tile))

            kv_head = h // groups
            q0 = cu_seqlens_q[s]
            kv0 = cu_seqlens_k[s]
            q_len = cu_seqlens_q[s + 1] - q0
            kv_len = cu_seqlens_k[s + 1] - kv0

            T.copy(Q_unpad[q0 + qb * block_M:q0 + (qb + 1) * block_M, h, :],
                   q_tile)
            T.fill(acc, 0)
            T.fill(denom, 0)
            T.fill(row_max, -T.infinity(accum_dtype))

            kv_blocks = (
                T.min(T.ceildiv((qb + 1) * block_M, block_N),
                      T.ceildiv(kv_len, block_N))
                if is_causal else T.ceildiv(kv_len, block_N))

            for kb in T.Pipelined(kv_blocks, num_stages=num_stages):
                T.copy(K_unpad[kv0 + kb * block_N:kv0 + (kb + 1) * block_N,
                               kv_head, :], k_tile)
                # Masked entries start at -1e9 (not -inf): a padding row
                # that sees no key keeps finite weights.
                if is_causal:
                    for m, n in T.Parallel(block_M, block_N):
                        scores[m, n] = T.if_then_else(
                            (qb * block_M + m < kb * block_N + n)
                            or (qb * block_M + m >= q_len
                                or kb * block_N + n >= kv_len),
                            -1e9, 0)
                else:
                    for m, n in T.Parallel(block_M, block_N):
                        scores[m, n] = T.if_then_else(
                            qb * block_M + m >= q_len
                            or kb * block_N + n >= kv_len, -1e9, 0)
                T.gemm(q_tile, k_tile, scores, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
                _fold_in_block(scores, probs, acc, row_max, prev_max,
                               rescale, block_sum, denom, scale)
                T.copy(V_unpad[kv0 + kb * block_N:kv0 + (kb + 1) * block_N,
                               kv_head, :], v_tile)
                T.gemm(probs, v_tile, acc, policy=T.GemmWarpPolicy.FullRow)
            for r, c in T.Parallel(block_M, dim):
                acc[r, c] /= denom[r]
            T.copy(acc, o_tile)
            for r, c in T.Parallel(block_M, dim):
                if qb * block_M + r < q_len:
                    Output_unpad[q0 + qb * block_M + r, h, c] = o_tile[r, c]

    return main


@kiln.jit(out_idx=[-1])
def mla_decode_paged(batch, h_q, max_seqlen_pad, d, dpe, block_size,
                     num_pages, block_N=64, block_H=64, num_split=1,
                     num_stages=2, dtype="bfloat16", accum_dtype="float"):
    """DeepSeek MLA decode over a paged latent cache, shaped like TileLang's
    paged MLA example: one latent KV head shared by every query head, the
    cache flattened to tokens ([pages * block_size, 1, d] latent values
    and [.., 1, dpe] RoPE keys), a token's row found through the block
    table; the chunks walked last first so the one partial chunk is the
    first iteration, masked under `with T.If(kr == 0), T.Then():`; split-KV
    partials in T.alloc_global tensors, then the combine kernel."""
    scale = (1.0 / (d + dpe)) ** 0.5 * _LOG2E
    heads_per_block = min(block_H, h_q)
    assert block_size % block_N == 0, "block_N must divide the page size"
    tokens = num_pages * block_size

    @T.macro
    def split_kv(Q, Q_pe, KV, K_pe, BLOCK_TABLE, CACHE_SEQLENS, glse,
                 Output_partial):
        with T.Kernel(batch, h_q // heads_per_block, num_split,
                      threads=256) as (b, hb, z):
            q_lat = T.alloc_shared([block_H, d], dtype)
            q_rope = T.alloc_shared([block_H, dpe], dtype)
            kv_lat = T.alloc_shared([block_N, d], dtype)
            k_rope = T.alloc_shared([block_N, dpe], dtype)
            logits = T.alloc_fragment([block_H, block_N], accum_dtype)
            weights = T.alloc_fragment([block_H, block_N], dtype)
            out = T.alloc_fragment([block_H, d], accum_dtype)
            m_new = T.alloc_fragment([block_H], accum_dtype)
            m_old = T.alloc_fragment([block_H], accum_dtype)
            shrink = T.alloc_fragment([block_H], accum_dtype)
            chunk_sum = T.alloc_fragment([block_H], accum_dtype)
            l_run = T.alloc_fragment([block_H], accum_dtype)

            T.copy(Q[b, hb * heads_per_block:(hb + 1) * heads_per_block, :],
                   q_lat)
            T.copy(Q_pe[b, hb * heads_per_block:
                        (hb + 1) * heads_per_block, :], q_rope)
            T.fill(out, 0)
            T.fill(l_run, 0)
            T.fill(m_new, -T.infinity(accum_dtype))

            seqlen = CACHE_SEQLENS[b]
            total = T.ceildiv(seqlen, block_N)
            per = T.ceildiv(total, num_split)
            lo = T.min(z * per, total)
            hi = T.min(lo + per, total)
            for kr in T.Pipelined(hi - lo, num_stages=num_stages):
                chunk = hi - 1 - kr
                tok0 = BLOCK_TABLE[b, (chunk * block_N) // block_size] * \
                    block_size + (chunk * block_N) % block_size
                T.copy(KV[tok0:tok0 + block_N, 0, :], kv_lat)
                T.copy(K_pe[tok0:tok0 + block_N, 0, :], k_rope)
                T.clear(logits)
                # Latent and RoPE parts add into one score.
                T.gemm(q_lat, kv_lat, logits, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullCol)
                T.gemm(q_rope, k_rope, logits, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullCol)
                T.copy(m_new, m_old)
                T.fill(m_new, -T.infinity(accum_dtype))
                with T.If(kr == 0), T.Then():
                    for g, t in T.Parallel(block_H, block_N):
                        logits[g, t] = T.if_then_else(
                            chunk * block_N + t >= seqlen,
                            -T.infinity(accum_dtype), logits[g, t])
                T.reduce_max(logits, m_new, dim=1, clear=False)
                for g in T.Parallel(block_H):
                    m_new[g] = T.max(m_new[g], m_old[g])
                for g in T.Parallel(block_H):
                    shrink[g] = T.exp2(m_old[g] * scale - m_new[g] * scale)
                for g, t in T.Parallel(block_H, block_N):
                    logits[g, t] = T.exp2(logits[g, t] * scale -
                                          m_new[g] * scale)
                T.reduce_sum(logits, chunk_sum, dim=1)
                T.copy(logits, weights)
                for g in T.Parallel(block_H):
                    l_run[g] = l_run[g] * shrink[g] + chunk_sum[g]
                for g, c in T.Parallel(block_H, d):
                    out[g, c] *= shrink[g]
                T.gemm(weights, kv_lat, out, policy=T.GemmWarpPolicy.FullCol)
            # An empty split (a short sequence) has no weight in the combine.
            for g, c in T.Parallel(block_H, d):
                out[g, c] = T.if_then_else(l_run[g] > 0,
                                           out[g, c] / l_run[g], 0)
            for g in T.Parallel(block_H):
                l_run[g] = T.if_then_else(
                    l_run[g] > 0, T.log2(l_run[g]) + m_new[g] * scale,
                    -T.infinity(accum_dtype))
            T.copy(l_run, glse[b, hb * heads_per_block:
                               (hb + 1) * heads_per_block, z])
            T.copy(out, Output_partial[b, hb * heads_per_block:
                                       (hb + 1) * heads_per_block, z, :])

    @T.macro
    def combine(glse, Output_partial, Output):
        with T.Kernel(h_q, batch, threads=128) as (h, b):
            o_sum = T.alloc_fragment([d], accum_dtype)
            top = T.alloc_var(accum_dtype)
            weight_sum = T.alloc_var(accum_dtype)
            top = -T.infinity(accum_dtype)
            weight_sum = 0
            T.clear(o_sum)
            for z in T.serial(num_split):
                top = T.max(top, glse[b, h, z])
            for z in T.serial(num_split):
                weight_sum += T.if_then_else(
                    glse[b, h, z] == -T.infinity(accum_dtype), 0,
                    T.exp2(glse[b, h, z] - top))
            for z in T.serial(num_split):
                w = T.if_then_else(
                    glse[b, h, z] == -T.infinity(accum_dtype), 0,
                    T.exp2(glse[b, h, z] - top) / weight_sum)
                for c in T.Parallel(d):
                    o_sum[c] += Output_partial[b, h, z, c] * w
            for c in T.Parallel(d):
                Output[b, h, c] = o_sum[c]

    @T.prim_func
    def main(Q: T.Tensor((batch, h_q, d), dtype),
             Q_pe: T.Tensor((batch, h_q, dpe), dtype),
             KV: T.Tensor((tokens, 1, d), dtype),
             K_pe: T.Tensor((tokens, 1, dpe), dtype),
             block_table: T.Tensor((batch, max_seqlen_pad // block_size),
                                   "int32"),
             cache_seqlens: T.Tensor((batch,), "int32"),
             Output: T.Tensor((batch, h_q, d), dtype)):
        glse = T.alloc_global([batch, h_q, num_split], accum_dtype)
        Output_partial = T.alloc_global([batch, h_q, num_split, d],
                                        accum_dtype)
        split_kv(Q, Q_pe, KV, K_pe, block_table, cache_seqlens, glse,
                 Output_partial)
        combine(glse, Output_partial, Output)

    return main


@kiln.jit(out_idx=[])
def rope_kv_cache_write(num_heads, num_kv_heads, head_size=128,
                        rotary_dim=None, is_neox=True, block_T=16,
                        threads=128, dtype="bfloat16",
                        index_dtype="int32", cos_sin_dtype="float32"):
    """vLLM's rotary_embedding and reshape_and_cache in one pass: the query
    heads rotated in place, the keys rotated and, with the values, written
    into the paged cache ([num_blocks, block_size, kv_heads, head_size]) at
    slot_mapping (-1: a padding token, not stored). cos_sin_cache[p] holds
    rotary_dim / 2 cosines then as many sines; rotate-half pairs (GPT-NeoX,
    Llama) or interleaved ones (GPT-J); dims past rotary_dim pass through."""
    rot = head_size if rotary_dim is None else rotary_dim
    assert num_heads % num_kv_heads == 0 and rot % 2 == 0 and rot <= head_size
    half = rot // 2
    group = num_heads // num_kv_heads
    num_tokens = T.symbolic("num_tokens")
    num_blocks = T.symbolic("num_blocks")
    block_size = T.symbolic("block_size")
    max_position = T.symbolic("max_position")

    @T.macro
    def load_pairs(src, t0, head, x1, x2):
        # The rotated pairs of head `head` of the block's tokens: the two
        # halves (NeoX) or the even and odd dims (GPT-J).
        if is_neox:
            T.copy(src[t0:t0 + block_T, head, 0:half], x1)
            T.copy(src[t0:t0 + block_T, head, half:rot], x2)
        else:
            for i, j in T.Parallel(block_T, half):
                x1[i, j] = src[t0 + i, head, 2 * j]
                x2[i, j] = src[t0 + i, head, 2 * j + 1]

    @T.prim_func
    def main(positions: T.Tensor((num_tokens,), index_dtype),
             query: T.Tensor((num_tokens, num_heads, head_size), dtype),
             key: T.Tensor((num_tokens, num_kv_heads, head_size), dtype),
             value: T.Tensor((num_tokens, num_kv_heads, head_size), dtype),
             cos_sin_cache: T.Tensor((max_position, rot), cos_sin_dtype),
             slot_mapping: T.Tensor((num_tokens,), index_dtype),
             key_cache: T.Tensor(
                 (num_blocks, block_size, num_kv_heads, head_size), dtype),
             value_cache: T.Tensor(
                 (num_blocks, block_size, num_kv_heads, head_size), dtype)):
        with T.Kernel(T.ceildiv(num_tokens, block_T), num_kv_heads,
                      threads=threads) as (bx, h):
            pos = T.alloc_fragment((block_T,), index_dtype)
            slot = T.alloc_fragment((block_T,), index_dtype)
            cos = T.alloc_fragment((block_T, half), "float32")
            sin = T.alloc_fragment((block_T, half), "float32")
            x1 = T.alloc_fragment((block_T, half), dtype)
            x2 = T.alloc_fragment((block_T, half), dtype)
            r1 = T.alloc_fragment((block_T, half), dtype)
            r2 = T.alloc_fragment((block_T, half), dtype)
            v = T.alloc_fragment((block_T, head_size), dtype)
            t0 = bx * block_T
            T.copy(positions[t0:t0 + block_T], pos)
            T.copy(slot_mapping[t0:t0 + block_T], slot)
            for i, j in T.Parallel(block_T, half):
                cos[i, j] = cos_sin_cache[pos[i], j]
                sin[i, j] = cos_sin_cache[pos[i], half + j]

            # Keys: rotated, then stored at their slots.
            load_pairs(key, t0, h, x1, x2)
            for i, j in T.Parallel(block_T, half):
                s = slot[i]
                if t0 + i < num_tokens and s >= 0:
                    lo = x1[i, j] * cos[i, j] - x2[i, j] * sin[i, j]
                    hi = x2[i, j] * cos[i, j] + x1[i, j] * sin[i, j]
                    if is_neox:
                        key_cache[s // block_size, s % block_size, h, j] = lo
                        key_cache[s // block_size, s % block_size, h,
                                  half + j] = hi
                    else:
                        key_cache[s // block_size, s % block_size, h,
                                  2 * j] = lo
                        key_cache[s // block_size, s % block_size, h,
                                  2 * j + 1] = hi
            if rot < head_size:
                rest = T.alloc_fragment((block_T, head_size - rot), dtype)
                T.copy(key[t0:t0 + block_T, h, rot:head_size], rest)
                for i, j in T.Parallel(block_T, head_size - rot):
                    s = slot[i]
                    if t0 + i < num_tokens and s >= 0:
                        key_cache[s // block_size, s % block_size, h,
                                  rot + j] = rest[i, j]

            # Values: stored as they are.
            T.copy(value[t0:t0 + block_T, h, :], v)
            for i, d in T.Parallel(block_T, head_size):
                s = slot[i]
                if t0 + i < num_tokens and s >= 0:
                    value_cache[s // block_size, s % block_size, h, d] = v[i, d]

            # The query heads of this KV head, rotated in place.
            for g in T.serial(group):
                qh = h * group + g
                load_pairs(query, t0, qh, x1, x2)
                for i, j in T.Parallel(block_T, half):
                    r1[i, j] = x1[i, j] * cos[i, j] - x2[i, j] * sin[i, j]
                    r2[i, j] = x2[i, j] * cos[i, j] + x1[i, j] * sin[i, j]
                if is_neox:
                    T.copy(r1, query[t0:t0 + block_T, qh, 0:half])
                    T.copy(r2, query[t0:t0 + block_T, qh, half:rot])
                else:
                    for i, j in T.Parallel(block_T, half):
                        if t0 + i < num_tokens:
                            query[t0 + i, qh, 2 * j] = r1[i, j]
                            query[t0 + i, qh, 2 * j + 1] = r2[i, j]

    return main


# --- FlashAttention backward in the style of TileLang's example_mha_bwd ----
# (dQ re-laid out by a T.Layout index map and un-permuted by a tensor-to-
# tensor T.copy, T.floordiv for the causal start, a two-bound T.Pipelined,
# element atomics into dQ). The forward with Lse is kiln.ops.attention's.

def _dq_layout(dQ):
    """TileLang's trick: dQ stored in the MMA fragment's order so its
    atomics vectorise (Kiln keeps tensors logical; kiln.layout.IndexMap)."""
    return T.Layout(dQ.shape, lambda b, l, h, d: [
        b, l // 8, h, d // 8, d % 2, 4 * (l % 8) + (d % 8) // 2])


@kiln.jit(out_idx=[2])
def mha_bwd_prep(batch, heads, seq_len, dim, blk=32):
    """Delta = rowsum(O * dO), per (batch, head, position), in f32."""
    dtype, accum_dtype = "float16", "float32"
    shape = [batch, seq_len, heads, dim]
    square = [blk, blk]

    @T.prim_func
    def prep(O: T.Tensor(shape, dtype), dO: T.Tensor(shape, dtype),
             Delta: T.Tensor([batch, heads, seq_len], accum_dtype)):
        with T.Kernel(heads, T.ceildiv(seq_len, blk), batch) as (h, sb, b):
            o_part = T.alloc_fragment(square, dtype)
            do_part = T.alloc_fragment(square, dtype)
            prods = T.alloc_fragment(square, accum_dtype)
            dots = T.alloc_fragment([blk], accum_dtype)
            T.clear(prods)
            # dim in blk-wide slices (a Python loop: unrolled).
            for s in range(T.ceildiv(dim, blk)):
                T.copy(O[b, sb * blk:(sb + 1) * blk, h,
                         s * blk:(s + 1) * blk], o_part)
                T.copy(dO[b, sb * blk:(sb + 1) * blk, h,
                          s * blk:(s + 1) * blk], do_part)
                for p, c in T.Parallel(blk, blk):
                    prods[p, c] += o_part[p, c] * do_part[p, c]
            T.reduce_sum(prods, dots, 1)
            T.copy(dots, Delta[b, h, sb * blk:(sb + 1) * blk])

    return prep


@kiln.jit(out_idx=[1])
def mha_bwd_post(batch, heads, seq_len, dim, blk=64):
    """dQ, accumulated in f32 under _dq_layout, as f16."""
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def post(dQ: T.Tensor(shape, "float32"),
             dQ_out: T.Tensor(shape, "float16")):
        with T.Kernel(T.ceildiv(seq_len, blk), heads, batch,
                      threads=128) as (sb, h, b):
            T.annotate_layout({dQ: _dq_layout(dQ)})
            T.copy(dQ[b, sb * blk:(sb + 1) * blk, h, :],
                   dQ_out[b, sb * blk:(sb + 1) * blk, h, :])

    return post


@kiln.jit()
def mha_bwd(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=32,
            num_stages=2):
    """dK and dV of one block_M-key block, computed transposed (keys on
    rows) over the query blocks that see it; each query block's dQ share is
    atomically added into dQ (f32, zeroed by the caller)."""
    sm_scale = (1.0 / dim) ** 0.5
    scale = sm_scale * _LOG2E
    shape = [batch, seq_len, heads, dim]
    per_row = [batch, heads, seq_len]  # lse and Delta
    keys, queries = [block_M, dim], [block_N, dim]
    pairs = [block_M, block_N]  # (key, query)
    dtype, accum_dtype = "float16", "float32"

    @T.prim_func
    def bwd(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype),
            V: T.Tensor(shape, dtype), dO: T.Tensor(shape, dtype),
            lse: T.Tensor(per_row, accum_dtype),
            Delta: T.Tensor(per_row, accum_dtype),
            dQ: T.Tensor(shape, accum_dtype), dK: T.Tensor(shape, dtype),
            dV: T.Tensor(shape, dtype)):
        with T.Kernel(heads, T.ceildiv(seq_len, block_M), batch,
                      threads=128) as (h, kb, b):
            k_tile = T.alloc_shared(keys, dtype)
            v_tile = T.alloc_shared(keys, dtype)
            q_tile = T.alloc_shared(queries, dtype)
            do_tile = T.alloc_shared(queries, dtype)
            ds_tile = T.alloc_shared(pairs, dtype)
            lse_q = T.alloc_shared([block_N], accum_dtype)
            delta_q = T.alloc_shared([block_N], accum_dtype)
            p_t = T.alloc_fragment(pairs, accum_dtype)
            dp_t = T.alloc_fragment(pairs, accum_dtype)
            p_t16 = T.alloc_fragment(pairs, dtype)
            ds_t16 = T.alloc_fragment(pairs, dtype)
            dv_acc = T.alloc_fragment(keys, accum_dtype)
            dk_acc = T.alloc_fragment(keys, accum_dtype)
            dq_part = T.alloc_fragment(queries, accum_dtype)
            dv_out = T.alloc_shared(keys, dtype)
            dk_out = T.alloc_shared(keys, dtype)
            T.annotate_layout({dQ: _dq_layout(dQ)})
            T.copy(K[b, kb * block_M:(kb + 1) * block_M, h, :], k_tile)
            T.copy(V[b, kb * block_M:(kb + 1) * block_M, h, :], v_tile)
            T.clear(dv_acc)
            T.clear(dk_acc)
            # Causal: query blocks wholly before this key block see none of
            # it.
            first = T.floordiv(kb * block_M, block_N) if is_causal else 0
            stop = T.ceildiv(seq_len, block_N)
            for qb in T.Pipelined(first, stop, num_stages=num_stages):
                T.copy(Q[b, qb * block_N:(qb + 1) * block_N, h, :], q_tile)
                # P^T = exp2(K Q^T * scale - lse), lse already in base 2.
                T.clear(p_t)
                T.gemm(k_tile, q_tile, p_t, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
                T.copy(lse[b, h, qb * block_N:(qb + 1) * block_N], lse_q)
                for ki, qi in T.Parallel(block_M, block_N):
                    p_t[ki, qi] = T.exp2(p_t[ki, qi] * scale - lse_q[qi])
                if is_causal:
                    for ki, qi in T.Parallel(block_M, block_N):
                        p_t[ki, qi] = T.if_then_else(
                            kb * block_M + ki <= qb * block_N + qi,
                            p_t[ki, qi], 0)
                # dP^T = V dO^T; dV += P^T dO.
                T.copy(dO[b, qb * block_N:(qb + 1) * block_N, h, :], do_tile)
                T.clear(dp_t)
                T.gemm(v_tile, do_tile, dp_t, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
                T.copy(p_t, p_t16)
                T.gemm(p_t16, do_tile, dv_acc,
                       policy=T.GemmWarpPolicy.FullRow)
                # dS^T = P^T * (dP^T - Delta) * sm_scale; dK += dS^T Q.
                T.copy(Delta[b, h, qb * block_N:(qb + 1) * block_N], delta_q)
                for ki, qi in T.Parallel(block_M, block_N):
                    ds_t16[ki, qi] = p_t[ki, qi] * (
                        dp_t[ki, qi] - delta_q[qi]) * sm_scale
                T.gemm(ds_t16, q_tile, dk_acc,
                       policy=T.GemmWarpPolicy.FullRow)
                # This query block's dQ = dS K, added into dQ.
                T.copy(ds_t16, ds_tile)
                T.clear(dq_part)
                T.gemm(ds_tile, k_tile, dq_part, transpose_A=True)
                for qi, c in T.Parallel(block_N, dim):
                    T.atomic_add(dQ[b, qb * block_N + qi, h, c],
                                 dq_part[qi, c])
            T.copy(dv_acc, dv_out)
            T.copy(dk_acc, dk_out)
            T.copy(dv_out, dV[b, kb * block_M:(kb + 1) * block_M, h, :])
            T.copy(dk_out, dK[b, kb * block_M:(kb + 1) * block_M, h, :])

    return bwd


def attention_grads_reference(q, k, v, do, causal, sm_scale=None):
    """O, dQ, dK, dV in float64 NumPy; K, V may have fewer heads (GQA)."""
    q, k, v, do = (np.asarray(x, np.float64) for x in (q, k, v, do))
    groups = q.shape[2] // k.shape[2]
    ke, ve = np.repeat(k, groups, 2), np.repeat(v, groups, 2)
    s_len = q.shape[1]
    sm = q.shape[3] ** -0.5 if sm_scale is None else sm_scale
    s = np.einsum("bqhd,bkhd->bhqk", q, ke) * sm
    if causal:
        s = np.where(np.tril(np.ones((s_len, s_len), bool)), s, -np.inf)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    o = np.einsum("bhqk,bkhd->bqhd", p, ve)
    dp = np.einsum("bqhd,bkhd->bhqk", do, ve)
    ds = p * (dp - (p * dp).sum(-1, keepdims=True)) * sm
    dq = np.einsum("bhqk,bkhd->bqhd", ds, ke)
    dk = np.einsum("bhqk,bqhd->bkhd", ds, q)
    dv = np.einsum("bhqk,bqhd->bkhd", p, do)
    b, _, h, d = q.shape
    fold = (b, s_len, h // groups, groups, d)
    return o, dq, dk.reshape(fold).sum(3), dv.reshape(fold).sum(3)
