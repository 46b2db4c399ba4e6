"""Kernels written the way TileLang users write them, shared by the tests."""

import numpy as np

import kiln
import kiln.language as T
from kiln.layout import make_swizzled_layout


@kiln.jit(out_idx=[-1])
def matmul(M, N, K, block_M, block_N, block_K, num_stages=2, threads=128,
           dtype="float16", accum_dtype="float"):
    """C = A @ B (f16 in, f32 accumulate), with swizzled shared tiles."""

    @T.prim_func
    def gemm(
            A: T.Tensor((M, K), dtype),
            B: T.Tensor((K, N), dtype),
            C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.annotate_layout({
                A_shared: make_swizzled_layout(A_shared),
                B_shared: make_swizzled_layout(B_shared),
            })
            T.use_swizzle(panel_size=8)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            T.copy(C_local, C[by * block_M, bx * block_N])

    return gemm


@kiln.jit(out_idx=[3])
def flashattn(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=64,
              num_stages=1, threads=128):
    """FlashAttention-2 forward, BSHD layout, base-2 online softmax."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e)
    shape = (batch, seq_len, heads, dim)
    dtype = "float16"
    accum_dtype = "float"

    @T.prim_func
    def mha_fwd(
            Q: T.Tensor(shape, dtype),
            K: T.Tensor(shape, dtype),
            V: T.Tensor(shape, dtype),
            Output: T.Tensor(shape, dtype),
    ):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch,
                      threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared((block_M, dim), dtype)
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            O_shared = T.alloc_shared((block_M, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum_dtype)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum_dtype)
            scores_max = T.alloc_fragment((block_M,), accum_dtype)
            scores_max_prev = T.alloc_fragment((block_M,), accum_dtype)
            scores_scale = T.alloc_fragment((block_M,), accum_dtype)
            scores_sum = T.alloc_fragment((block_M,), accum_dtype)
            logsum = T.alloc_fragment((block_M,), accum_dtype)

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            loop_range = (
                T.ceildiv((bx + 1) * block_M, block_N) if is_causal
                else T.ceildiv(seq_len, block_N))

            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K[bz, k * block_N:(k + 1) * block_N, by, :], K_shared)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(
                            bx * block_M + i >= k * block_N + j, 0,
                            -T.infinity(acc_s.dtype))
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(
                            k * block_N + j < seq_len, 0,
                            -T.infinity(acc_s.dtype))
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum_dtype))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale -
                                             scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale -
                                         scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V[bz, k * block_N:(k + 1) * block_N, by, :], V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o,
                       policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            T.copy(O_shared, Output[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return mha_fwd


@kiln.jit(out_idx=[1])
def softmax(M, N, block_M=4, block_N=256, dtype="float16"):
    """Row softmax over any N: an online max/sum pass, then a write pass."""
    accum_dtype = "float32"

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
            xs = T.alloc_fragment((block_M, block_N), accum_dtype)
            row_max = T.alloc_fragment((block_M,), accum_dtype)
            tile_max = T.alloc_fragment((block_M,), accum_dtype)
            row_sum = T.alloc_fragment((block_M,), accum_dtype)
            T.fill(row_max, -T.infinity(accum_dtype))
            T.clear(row_sum)
            for t in T.Serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, t * block_N], xs)
                for i, j in T.Parallel(block_M, block_N):
                    if t * block_N + j >= N:
                        xs[i, j] = -T.infinity(accum_dtype)
                T.reduce_max(xs, tile_max, dim=1)
                for i in T.Parallel(block_M):
                    new_max = T.max(row_max[i], tile_max[i])
                    row_sum[i] = row_sum[i] * T.exp(row_max[i] - new_max)
                    row_max[i] = new_max
                for i, j in T.Parallel(block_M, block_N):
                    xs[i, j] = T.exp(xs[i, j] - row_max[i])
                T.reduce_sum(xs, row_sum, dim=1, clear=False)
            for t in T.Serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, t * block_N], xs)
                for i, j in T.Parallel(block_M, block_N):
                    xs[i, j] = T.exp(xs[i, j] - row_max[i]) / row_sum[i]
                T.copy(xs, Y[bx * block_M, t * block_N])

    return main


@kiln.jit(out_idx=[2])
def rms_norm(M, N, block_M=2, block_N=512, eps=1e-6, dtype="bfloat16"):
    """Y = X * rsqrt(mean(X^2) + eps) * W, f32 statistics."""

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), dtype),
             Y: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, block_M), threads=256) as bx:
            xs = T.alloc_fragment((block_M, block_N), "float32")
            sq = T.alloc_fragment((block_M, block_N), "float32")
            ss = T.alloc_fragment((block_M,), "float32")
            T.clear(ss)
            for t in T.Serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, t * block_N], xs)
                for i, j in T.Parallel(block_M, block_N):
                    sq[i, j] = xs[i, j] * xs[i, j]
                T.reduce_sum(sq, ss, dim=1, clear=False)
            for i in T.Parallel(block_M):
                ss[i] = T.rsqrt(ss[i] / N + eps)
            for t in T.Serial(T.ceildiv(N, block_N)):
                T.copy(X[bx * block_M, t * block_N], xs)
                for i, j in T.Parallel(block_M, block_N):
                    col = t * block_N + j
                    if col < N:
                        xs[i, j] = xs[i, j] * ss[i] * W[col]
                T.copy(xs, Y[bx * block_M, t * block_N])

    return main


@kiln.jit(out_idx=[-1])
def rms_norm_row(M, N, blk_m=1, threads=128, dtype="float"):
    """TileLang's one-pass RMSNorm example as written (no weight; its
    `rsqrt(ms) + 1e-12` kept): the whole row staged in shared memory, copied
    into a fragment, squared into a second fragment, reduced, scaled."""

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=threads) as bx:
            A_shared = T.alloc_shared((blk_m, N), dtype)
            A_pow_local = T.alloc_fragment((blk_m, N), dtype)
            A_local = T.alloc_fragment((blk_m, N), dtype)
            A_powsum = T.alloc_fragment((blk_m,), dtype)
            T.copy(A[bx * blk_m:(bx + 1) * blk_m, :], A_shared)
            T.copy(A_shared, A_local)
            for i, j in T.Parallel(blk_m, N):
                A_pow_local[i, j] = A_local[i, j] * A_local[i, j]
            T.reduce_sum(A_pow_local, A_powsum, dim=1)
            for i in T.Parallel(blk_m):
                A_powsum[i] = T.rsqrt(A_powsum[i] / N) + 1e-12
            for i, j in T.Parallel(blk_m, N):
                A_local[i, j] *= A_powsum[i]
            T.copy(A_local, B[bx * blk_m:(bx + 1) * blk_m, :])

    return main


@kiln.jit(out_idx=[-3, -2, -1])
def layer_norm_fwd(N, D, eps=1e-5, blk_m=1, threads=256,
                   in_dtype="bfloat16", out_dtype="bfloat16"):
    """TileLang's LayerNorm forward example as written: X, gamma and beta
    staged in shared memory, f32 statistics from two row sums, Mean and
    Rstd stored element by element, Y written back through X's tile."""
    accum = "float"

    @T.prim_func
    def main(X: T.Tensor((N, D), in_dtype), gamma: T.Tensor((D,), in_dtype),
             beta: T.Tensor((D,), in_dtype), Y: T.Tensor((N, D), out_dtype),
             Mean: T.Tensor((N,), accum), Rstd: T.Tensor((N,), accum)):
        with T.Kernel(T.ceildiv(N, blk_m), threads=threads) as bx:
            X_smem = T.alloc_shared((blk_m, D), in_dtype)
            G_smem = T.alloc_shared((D,), in_dtype)
            B_smem = T.alloc_shared((D,), in_dtype)
            X_local = T.alloc_fragment((blk_m, D), accum)
            X_sq_local = T.alloc_fragment((blk_m, D), accum)
            sum_row = T.alloc_fragment((blk_m,), accum)
            sumsq_row = T.alloc_fragment((blk_m,), accum)
            mean_row = T.alloc_fragment((blk_m,), accum)
            rstd_row = T.alloc_fragment((blk_m,), accum)
            T.copy(X[bx * blk_m, 0], X_smem)
            T.copy(gamma, G_smem)
            T.copy(beta, B_smem)
            for i, j in T.Parallel(blk_m, D):
                X_local[i, j] = T.Cast(accum, X_smem[i, j])
            for i, j in T.Parallel(blk_m, D):
                X_sq_local[i, j] = X_local[i, j] * X_local[i, j]
            T.reduce_sum(X_local, sum_row, dim=1)
            T.reduce_sum(X_sq_local, sumsq_row, dim=1)
            inv_d = T.float32(1.0) / T.Cast(accum, D)
            for i in T.Parallel(blk_m):
                mean_row[i] = sum_row[i] * inv_d
                rstd_row[i] = T.rsqrt(sumsq_row[i] * inv_d -
                                      mean_row[i] * mean_row[i] +
                                      T.Cast(accum, eps))
                Mean[bx * blk_m + i] = mean_row[i]
                Rstd[bx * blk_m + i] = rstd_row[i]
            for i, j in T.Parallel(blk_m, D):
                norm = (X_local[i, j] - mean_row[i]) * rstd_row[i]
                X_smem[i, j] = T.Cast(out_dtype,
                                      norm * T.Cast(accum, G_smem[j]) +
                                      T.Cast(accum, B_smem[j]))
            T.copy(X_smem, Y[bx * blk_m, 0])

    return main


@kiln.jit(out_idx=[1])
def online_softmax(M, N, dtype="float16"):
    """TileLang's online-softmax example as written: BN the next power of
    two of N (at most 8192), a base-2 log-sum-exp pass, then a write pass;
    the running lse updated element-wise outside any T.Parallel."""
    BN = min(kiln.next_power_of_2(N), 8192)
    NN = kiln.cdiv(N, BN)
    accum = "float"
    log2e = 1.44269504

    @T.prim_func
    def main(X: T.Tensor([M, N], dtype), Y: T.Tensor([M, N], dtype)):
        with T.Kernel(M, threads=128) as (i_m):
            x = T.alloc_fragment([BN], dtype)
            y = T.alloc_fragment([BN], dtype)
            lse = T.alloc_fragment([1], accum)
            max_x = T.alloc_fragment([1], dtype)
            exp_x = T.alloc_fragment([BN], accum)
            sum_exp_x = T.alloc_fragment([1], accum)
            T.fill(lse, -T.infinity(accum))
            for i_n in T.Pipelined(0, NN):
                T.copy(X[i_m, i_n * BN:(i_n + 1) * BN], x)
                T.reduce_max(x, max_x, dim=0, clear=True)
                for j in T.Parallel(BN):
                    exp_x[j] = T.if_then_else(
                        j + i_n * BN < N,
                        T.exp2(x[j] * log2e - max_x[0] * log2e), 0)
                T.reduce_sum(exp_x, sum_exp_x, dim=0, clear=True)
                lse[0] = max_x[0] * log2e + T.log2(
                    T.exp2(lse[0] - max_x[0] * log2e) + sum_exp_x[0])
            for i_n in T.Pipelined(0, NN):
                T.copy(X[i_m, i_n * BN:(i_n + 1) * BN], x)
                for j in T.Parallel(BN):
                    if j + i_n * BN < N:
                        y[j] = T.exp2(x[j] * log2e - lse[0])
                T.copy(y, Y[i_m, i_n * BN:(i_n + 1) * BN])

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
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            a = T.alloc_fragment((block,), "float32")
            for k in T.Pipelined(1, num_stages=num_stages):
                T.copy(A[bx * block], a)
            for i in T.Parallel(block):
                a[i] = a[i] * 2
            T.copy(a, B[bx * block])

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
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


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
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e)

    @T.macro
    def split_kv(Q, KC, VC, BT, L, O_part, Lse_part):
        with T.Kernel(kv_heads, batch, num_split, threads=128) as (h, b, z):
            Q_s = T.alloc_shared([block_H, dim], dtype)
            K_s = T.alloc_shared([block_N, dim], dtype)
            V_s = T.alloc_shared([block_N, dim], dtype)
            acc_s = T.alloc_fragment([block_H, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_H, block_N], dtype)
            acc_o = T.alloc_fragment([block_H, dim], accum_dtype)
            m = T.alloc_fragment([block_H], accum_dtype)
            m_prev = T.alloc_fragment([block_H], accum_dtype)
            alpha = T.alloc_fragment([block_H], accum_dtype)
            row_sum = T.alloc_fragment([block_H], accum_dtype)
            l = T.alloc_fragment([block_H], accum_dtype)
            # Rows past the group belong to the next KV head: computed,
            # never stored.
            T.copy(Q[b, h * group:h * group + block_H, :], Q_s)
            T.fill(acc_o, 0)
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
                T.clear(acc_s)
                T.gemm(Q_s, K_s, acc_s, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.if_then_else(c * block_N + j < length,
                                                 acc_s[i, j],
                                                 -T.infinity(accum_dtype))
                T.copy(m, m_prev)
                T.reduce_max(acc_s, m, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    alpha[i] = T.exp2((m_prev[i] - m[i]) * scale)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.exp2((acc_s[i, j] - m[i]) * scale)
                T.reduce_sum(acc_s, row_sum, dim=1)
                for i in T.Parallel(block_H):
                    l[i] = l[i] * alpha[i] + row_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_H, dim):
                    acc_o[i, j] *= alpha[i]
                T.copy(VC[page, off:off + block_N, h, :], V_s)
                T.gemm(acc_s_cast, V_s, acc_o, policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_H, dim):
                if i < group:
                    O_part[b, h * group + i, z, j] = T.if_then_else(
                        l[i] > 0, acc_o[i, j] / l[i], 0)
            for i in T.Parallel(block_H):
                if i < group:
                    Lse_part[b, h * group + i, z] = T.if_then_else(
                        l[i] > 0, T.log2(l[i]) + m[i] * scale,
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
        with T.Kernel(heads, batch, threads=128) as (by, bz):
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
                lse_max[0] = T.max(lse_max[0], Lse[bz, by, k])
            for k in T.serial(num_split):
                lse_split[0] = Lse[bz, by, k]
                lse_sum[0] += T.exp2(lse_split[0] - lse_max[0])
            lse_sum[0] = T.log2(lse_sum[0]) + lse_max[0]
            for k in T.serial(num_split):
                T.copy(O_part[bz, by, k, :], po)
                scale[0] = T.exp2(Lse[bz, by, k] - lse_sum[0])
                for i in T.Parallel(dim):
                    o[i] += po[i] * scale[0]
            for i in T.Parallel(dim):
                Out[bz, by, i] = o[i]
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
                      threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            W_shared = T.alloc_shared((block_N, block_K), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            expert = tiles[by, 0]
            row0 = tiles[by, 1]
            rows = offsets[expert + 1] - row0
            T.use_swizzle(panel_size=8)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K),
                                 num_stages=num_stages):
                T.copy(A[row0, k * block_K], A_shared)
                T.copy(W[expert, bx * block_N, k * block_K], W_shared)
                T.gemm(A_shared, W_shared, C_local, transpose_B=True)
            for i, j in T.Parallel(block_M, block_N):
                if i < rows:
                    Y[row0 + i, bx * block_N + j] = C_local[i, j]

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
    """DeepSeek-V3's block-scaled FP8 GEMM as TileLang's example writes it:
    a_scale is [M, ceil(K / 128)] (one scale per row per 128 columns),
    b_scale [ceil(N / 128), ceil(K / 128)] (one per 128 x 128 block of B);
    every 128-column step is multiplied into C_local and promoted into
    C_local_accum with its scales. M is symbolic (the token count); in_dtype
    is a parameter so that NumPy, which has no FP8, can drive it."""
    group_size = 128
    block_N = block_K = group_size
    M = T.symbolic("M")

    @T.prim_func
    def main(A: T.Tensor((M, K), in_dtype),
             B: T.Tensor((N, K), in_dtype),
             a_scale: T.Tensor((M, T.ceildiv(K, group_size)), "float32"),
             b_scale: T.Tensor((T.ceildiv(N, group_size),
                                T.ceildiv(K, group_size)), "float32"),
             C: T.Tensor((M, N), out_dtype)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=threads) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), in_dtype)
            B_shared = T.alloc_shared((block_N, block_K), in_dtype)
            C_shared = T.alloc_shared((block_M, block_N), out_dtype)
            C_scale = T.alloc_fragment((block_M,), accum_dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)
            C_local_accum = T.alloc_fragment((block_M, block_N), accum_dtype)
            T.clear(C_local)
            T.clear(C_local_accum)
            for k in T.Pipelined(T.ceildiv(K, block_K),
                                 num_stages=num_stages):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[bx * block_N, k * block_K], B_shared)
                B_scale = b_scale[bx * block_N // group_size, k]
                for i in T.Parallel(block_M):
                    C_scale[i] = a_scale[by * block_M + i, k] * B_scale
                T.gemm(A_shared, B_shared, C_local, transpose_B=True)
                for i, j in T.Parallel(block_M, block_N):
                    C_local_accum[i, j] += C_local[i, j] * C_scale[i]
                T.clear(C_local)
            T.copy(C_local_accum, C_shared)
            T.copy(C_shared, C[by * block_M, bx * block_N])

    return main


@kiln.jit(out_idx=[6])
def flashattn_varlen(batch, groups, total_q, total_kv, heads, dim, is_causal,
                     block_M=64, block_N=64, num_stages=1, threads=128,
                     dtype="float16", accum_dtype="float"):
    """Variable-length (packed) GQA prefill as TileLang's varlen example
    writes it: sequences packed along the token axis, cu_seqlens_q/k give
    each sequence's first token (batch + 1 entries), `groups` query heads
    share a KV head, one block per (query tile, head, sequence) of a grid
    sized by max_seqlen_q (a scalar argument). The causal mask is aligned
    at the top left, as flash-attn's is for equal lengths; query rows past a
    sequence's end are computed and not stored."""
    scale = (1.0 / dim) ** 0.5 * 1.44269504  # log2(e)
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
                      threads=threads) as (bx, by, bz):
            Q_shared = T.alloc_shared((block_M, dim), dtype)
            K_shared = T.alloc_shared((block_N, dim), dtype)
            V_shared = T.alloc_shared((block_N, dim), dtype)
            O_shared = T.alloc_shared((block_M, dim), dtype)
            acc_s = T.alloc_fragment((block_M, block_N), accum_dtype)
            acc_s_cast = T.alloc_fragment((block_M, block_N), dtype)
            acc_o = T.alloc_fragment((block_M, dim), accum_dtype)
            scores_max = T.alloc_fragment((block_M,), accum_dtype)
            scores_max_prev = T.alloc_fragment((block_M,), accum_dtype)
            scores_scale = T.alloc_fragment((block_M,), accum_dtype)
            scores_sum = T.alloc_fragment((block_M,), accum_dtype)
            logsum = T.alloc_fragment((block_M,), accum_dtype)
            T.annotate_layout({
                Q_shared: make_swizzled_layout(Q_shared),
                O_shared: make_swizzled_layout(O_shared),
            })

            kv_head = by // groups
            q_start = cu_seqlens_q[bz]
            kv_start = cu_seqlens_k[bz]
            q_len = cu_seqlens_q[bz + 1] - q_start
            kv_len = cu_seqlens_k[bz + 1] - kv_start

            T.copy(Q_unpad[q_start + bx * block_M:
                           q_start + (bx + 1) * block_M, by, :], Q_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            loop_range = (
                T.min(T.ceildiv((bx + 1) * block_M, block_N),
                      T.ceildiv(kv_len, block_N))
                if is_causal else T.ceildiv(kv_len, block_N))

            for k in T.Pipelined(loop_range, num_stages=num_stages):
                T.copy(K_unpad[kv_start + k * block_N:
                               kv_start + (k + 1) * block_N, kv_head, :],
                       K_shared)
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(
                            (bx * block_M + i < k * block_N + j)
                            or (bx * block_M + i >= q_len
                                or k * block_N + j >= kv_len),
                            -1e9, 0)
                else:
                    for i, j in T.Parallel(block_M, block_N):
                        acc_s[i, j] = T.if_then_else(
                            bx * block_M + i >= q_len
                            or k * block_N + j >= kv_len, -1e9, 0)
                T.gemm(Q_shared, K_shared, acc_s, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum_dtype))
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(block_M):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale -
                                             scores_max[i] * scale)
                for i, j in T.Parallel(block_M, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale -
                                         scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                for i in T.Parallel(block_M):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                T.copy(acc_s, acc_s_cast)
                for i, j in T.Parallel(block_M, dim):
                    acc_o[i, j] *= scores_scale[i]
                T.copy(V_unpad[kv_start + k * block_N:
                               kv_start + (k + 1) * block_N, kv_head, :],
                       V_shared)
                T.gemm(acc_s_cast, V_shared, acc_o,
                       policy=T.GemmWarpPolicy.FullRow)
            for i, j in T.Parallel(block_M, dim):
                acc_o[i, j] /= logsum[i]
            T.copy(acc_o, O_shared)
            for i, d in T.Parallel(block_M, dim):
                if bx * block_M + i < q_len:
                    Output_unpad[q_start + bx * block_M + i, by, d] = \
                        O_shared[i, d]

    return main


@kiln.jit(out_idx=[-1])
def mla_decode_paged(batch, h_q, max_seqlen_pad, d, dpe, block_size,
                     num_pages, block_N=64, block_H=64, num_split=1,
                     num_stages=2, dtype="bfloat16", accum_dtype="float"):
    """DeepSeek MLA decode over a paged latent cache as TileLang's paged
    MLA example writes it: one latent KV head shared by every query head,
    the cache flattened to tokens ([pages * block_size, 1, d] latent values
    and [.., 1, dpe] RoPE keys), a token's row found through the block
    table; the chunks walked last first so the one partial chunk is the
    first iteration, masked under `with T.If(kr == 0), T.Then():`; split-KV
    partials in T.alloc_global tensors, then the combine kernel."""
    scale = (1.0 / (d + dpe)) ** 0.5 * 1.44269504  # log2(e)
    VALID_BLOCK_H = min(block_H, h_q)
    assert block_size % block_N == 0, "block_N must divide the page size"
    tokens = num_pages * block_size

    @T.macro
    def split_kv(Q, Q_pe, KV, K_pe, BLOCK_TABLE, CACHE_SEQLENS, glse,
                 Output_partial):
        with T.Kernel(batch, h_q // VALID_BLOCK_H, num_split,
                      threads=256) as (bx, by, bz):
            Q_shared = T.alloc_shared([block_H, d], dtype)
            Q_pe_shared = T.alloc_shared([block_H, dpe], dtype)
            KV_shared = T.alloc_shared([block_N, d], dtype)
            K_pe_shared = T.alloc_shared([block_N, dpe], dtype)
            acc_s = T.alloc_fragment([block_H, block_N], accum_dtype)
            acc_s_cast = T.alloc_fragment([block_H, block_N], dtype)
            acc_o = T.alloc_fragment([block_H, d], accum_dtype)
            scores_max = T.alloc_fragment([block_H], accum_dtype)
            scores_max_prev = T.alloc_fragment([block_H], accum_dtype)
            scores_scale = T.alloc_fragment([block_H], accum_dtype)
            scores_sum = T.alloc_fragment([block_H], accum_dtype)
            logsum = T.alloc_fragment([block_H], accum_dtype)

            T.copy(Q[bx, by * VALID_BLOCK_H:(by + 1) * VALID_BLOCK_H, :],
                   Q_shared)
            T.copy(Q_pe[bx, by * VALID_BLOCK_H:(by + 1) * VALID_BLOCK_H, :],
                   Q_pe_shared)
            T.fill(acc_o, 0)
            T.fill(logsum, 0)
            T.fill(scores_max, -T.infinity(accum_dtype))

            seqlen = CACHE_SEQLENS[bx]
            total = T.ceildiv(seqlen, block_N)
            per = T.ceildiv(total, num_split)
            lo = T.min(bz * per, total)
            hi = T.min(lo + per, total)
            for kr in T.Pipelined(hi - lo, num_stages=num_stages):
                k = hi - 1 - kr
                kv_start = BLOCK_TABLE[bx, (k * block_N) // block_size] * \
                    block_size + (k * block_N) % block_size
                T.copy(KV[kv_start:kv_start + block_N, 0, :], KV_shared)
                T.copy(K_pe[kv_start:kv_start + block_N, 0, :], K_pe_shared)
                T.clear(acc_s)
                T.gemm(Q_shared, KV_shared, acc_s, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullCol)
                T.gemm(Q_pe_shared, K_pe_shared, acc_s, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullCol)
                T.copy(scores_max, scores_max_prev)
                T.fill(scores_max, -T.infinity(accum_dtype))
                with T.If(kr == 0), T.Then():
                    for i, j in T.Parallel(block_H, block_N):
                        acc_s[i, j] = T.if_then_else(
                            k * block_N + j >= seqlen,
                            -T.infinity(accum_dtype), acc_s[i, j])
                T.reduce_max(acc_s, scores_max, dim=1, clear=False)
                for i in T.Parallel(block_H):
                    scores_max[i] = T.max(scores_max[i], scores_max_prev[i])
                for i in T.Parallel(block_H):
                    scores_scale[i] = T.exp2(scores_max_prev[i] * scale -
                                             scores_max[i] * scale)
                for i, j in T.Parallel(block_H, block_N):
                    acc_s[i, j] = T.exp2(acc_s[i, j] * scale -
                                         scores_max[i] * scale)
                T.reduce_sum(acc_s, scores_sum, dim=1)
                T.copy(acc_s, acc_s_cast)
                for i in T.Parallel(block_H):
                    logsum[i] = logsum[i] * scores_scale[i] + scores_sum[i]
                for i, j in T.Parallel(block_H, d):
                    acc_o[i, j] *= scores_scale[i]
                T.gemm(acc_s_cast, KV_shared, acc_o,
                       policy=T.GemmWarpPolicy.FullCol)
            # An empty split (a short sequence) has no weight in the combine.
            for i, j in T.Parallel(block_H, d):
                acc_o[i, j] = T.if_then_else(logsum[i] > 0,
                                             acc_o[i, j] / logsum[i], 0)
            for i in T.Parallel(block_H):
                logsum[i] = T.if_then_else(
                    logsum[i] > 0, T.log2(logsum[i]) + scores_max[i] * scale,
                    -T.infinity(accum_dtype))
            T.copy(logsum, glse[bx, by * VALID_BLOCK_H:
                                (by + 1) * VALID_BLOCK_H, bz])
            T.copy(acc_o, Output_partial[bx, by * VALID_BLOCK_H:
                                         (by + 1) * VALID_BLOCK_H, bz, :])

    @T.macro
    def combine(glse, Output_partial, Output):
        with T.Kernel(h_q, batch, threads=128) as (by, bz):
            o_accum = T.alloc_fragment([d], accum_dtype)
            lse_max = T.alloc_var(accum_dtype)
            lse_logsum = T.alloc_var(accum_dtype)
            lse_max = -T.infinity(accum_dtype)
            lse_logsum = 0
            T.clear(o_accum)
            for k in T.serial(num_split):
                lse_max = T.max(lse_max, glse[bz, by, k])
            for k in T.serial(num_split):
                lse_logsum += T.if_then_else(
                    glse[bz, by, k] == -T.infinity(accum_dtype), 0,
                    T.exp2(glse[bz, by, k] - lse_max))
            for k in T.serial(num_split):
                w = T.if_then_else(
                    glse[bz, by, k] == -T.infinity(accum_dtype), 0,
                    T.exp2(glse[bz, by, k] - lse_max) / lse_logsum)
                for i in T.Parallel(d):
                    o_accum[i] += Output_partial[bz, by, k, i] * w
            for i in T.Parallel(d):
                Output[bz, by, i] = o_accum[i]

    @T.prim_func
    def main(Q: T.Tensor([batch, h_q, d], dtype),
             Q_pe: T.Tensor([batch, h_q, dpe], dtype),
             KV: T.Tensor([tokens, 1, d], dtype),
             K_pe: T.Tensor([tokens, 1, dpe], dtype),
             block_table: T.Tensor([batch, max_seqlen_pad // block_size],
                                   "int32"),
             cache_seqlens: T.Tensor([batch], "int32"),
             Output: T.Tensor([batch, h_q, d], dtype)):
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


# --- FlashAttention backward as TileLang's example_mha_bwd writes it -------
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
    dtype, accum_dtype = "float16", "float32"
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def prep(O: T.Tensor(shape, dtype), dO: T.Tensor(shape, dtype),
             Delta: T.Tensor([batch, heads, seq_len], accum_dtype)):
        with T.Kernel(heads, T.ceildiv(seq_len, blk), batch) as (bx, by, bz):
            o = T.alloc_fragment([blk, blk], dtype)
            do = T.alloc_fragment([blk, blk], dtype)
            acc = T.alloc_fragment([blk, blk], accum_dtype)
            delta = T.alloc_fragment([blk], accum_dtype)
            T.clear(acc)
            for kk in range(T.ceildiv(dim, blk)):
                T.copy(O[bz, by * blk:(by + 1) * blk, bx,
                         kk * blk:(kk + 1) * blk], o)
                T.copy(dO[bz, by * blk:(by + 1) * blk, bx,
                          kk * blk:(kk + 1) * blk], do)
                for i, j in T.Parallel(blk, blk):
                    acc[i, j] += o[i, j] * do[i, j]
            T.reduce_sum(acc, delta, 1)
            T.copy(delta, Delta[bz, bx, by * blk:(by + 1) * blk])

    return prep


@kiln.jit(out_idx=[1])
def mha_bwd_post(batch, heads, seq_len, dim, blk=64):
    shape = [batch, seq_len, heads, dim]

    @T.prim_func
    def post(dQ: T.Tensor(shape, "float32"),
             dQ_out: T.Tensor(shape, "float16")):
        with T.Kernel(T.ceildiv(seq_len, blk), heads, batch,
                      threads=128) as (bx, by, bz):
            T.annotate_layout({dQ: _dq_layout(dQ)})
            T.copy(dQ[bz, bx * blk:(bx + 1) * blk, by, :],
                   dQ_out[bz, bx * blk:(bx + 1) * blk, by, :])

    return post


@kiln.jit()
def mha_bwd(batch, heads, seq_len, dim, is_causal, block_M=64, block_N=32,
            num_stages=2):
    sm_scale = (1.0 / dim) ** 0.5
    scale = sm_scale * 1.44269504
    shape = [batch, seq_len, heads, dim]
    dtype, accum_dtype = "float16", "float32"

    @T.prim_func
    def bwd(Q: T.Tensor(shape, dtype), K: T.Tensor(shape, dtype),
            V: T.Tensor(shape, dtype), dO: T.Tensor(shape, dtype),
            lse: T.Tensor([batch, heads, seq_len], accum_dtype),
            Delta: T.Tensor([batch, heads, seq_len], accum_dtype),
            dQ: T.Tensor(shape, accum_dtype), dK: T.Tensor(shape, dtype),
            dV: T.Tensor(shape, dtype)):
        with T.Kernel(heads, T.ceildiv(seq_len, block_M), batch,
                      threads=128) as (bx, by, bz):
            K_shared = T.alloc_shared([block_M, dim], dtype)
            V_shared = T.alloc_shared([block_M, dim], dtype)
            q = T.alloc_shared([block_N, dim], dtype)
            do = T.alloc_shared([block_N, dim], dtype)
            dsT_shared = T.alloc_shared([block_M, block_N], dtype)
            lse_shared = T.alloc_shared([block_N], accum_dtype)
            delta = T.alloc_shared([block_N], accum_dtype)
            qkT = T.alloc_fragment([block_M, block_N], accum_dtype)
            dsT = T.alloc_fragment([block_M, block_N], accum_dtype)
            qkT_cast = T.alloc_fragment([block_M, block_N], dtype)
            dsT_cast = T.alloc_fragment([block_M, block_N], dtype)
            dv = T.alloc_fragment([block_M, dim], accum_dtype)
            dk = T.alloc_fragment([block_M, dim], accum_dtype)
            dq = T.alloc_fragment([block_N, dim], accum_dtype)
            dv_shared = T.alloc_shared([block_M, dim], dtype)
            dk_shared = T.alloc_shared([block_M, dim], dtype)
            T.annotate_layout({dQ: _dq_layout(dQ)})
            T.copy(K[bz, by * block_M:(by + 1) * block_M, bx, :], K_shared)
            T.copy(V[bz, by * block_M:(by + 1) * block_M, bx, :], V_shared)
            T.clear(dv)
            T.clear(dk)
            loop_st = T.floordiv(by * block_M, block_N) if is_causal else 0
            loop_ed = T.ceildiv(seq_len, block_N)
            for k in T.Pipelined(loop_st, loop_ed, num_stages=num_stages):
                T.copy(Q[bz, k * block_N:(k + 1) * block_N, bx, :], q)
                T.clear(qkT)
                T.gemm(K_shared, q, qkT, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
                T.copy(lse[bz, bx, k * block_N:(k + 1) * block_N], lse_shared)
                for i, j in T.Parallel(block_M, block_N):
                    qkT[i, j] = T.exp2(qkT[i, j] * scale - lse_shared[j])
                if is_causal:
                    for i, j in T.Parallel(block_M, block_N):
                        qkT[i, j] = T.if_then_else(
                            by * block_M + i <= k * block_N + j, qkT[i, j], 0)
                T.copy(dO[bz, k * block_N:(k + 1) * block_N, bx, :], do)
                T.clear(dsT)
                T.gemm(V_shared, do, dsT, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
                T.copy(qkT, qkT_cast)
                T.gemm(qkT_cast, do, dv, policy=T.GemmWarpPolicy.FullRow)
                T.copy(Delta[bz, bx, k * block_N:(k + 1) * block_N], delta)
                for i, j in T.Parallel(block_M, block_N):
                    dsT_cast[i, j] = qkT[i, j] * (dsT[i, j] - delta[j]) * \
                        sm_scale
                T.gemm(dsT_cast, q, dk, policy=T.GemmWarpPolicy.FullRow)
                T.copy(dsT_cast, dsT_shared)
                T.clear(dq)
                T.gemm(dsT_shared, K_shared, dq, transpose_A=True)
                for i, j in T.Parallel(block_N, dim):
                    T.atomic_add(dQ[bz, k * block_N + i, bx, j], dq[i, j])
            T.copy(dv, dv_shared)
            T.copy(dk, dk_shared)
            T.copy(dv_shared, dV[bz, by * block_M:(by + 1) * block_M, bx, :])
            T.copy(dk_shared, dK[bz, by * block_M:(by + 1) * block_M, bx, :])

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
