"""RMSNorm, LayerNorm, softmax and cross-entropy in the DSL, forward and
backward, and the autograd functions that tie them together:
``rms_norm``, ``layer_norm``, ``softmax`` (last dim) and ``cross_entropy``.

Every kernel works on rows: the input is flattened to ``[M, N]`` (M
symbolic, so one compile serves every batch), one row per block. Where the
row fits (``N`` up to 32 elements per thread of at most 1024 threads) the
whole row is held in a thread-owned fragment (registers on GPUs) between
its load and its store, as TileLang's RMSNorm and LayerNorm examples do: X
is read once and Y written once, statistics come from row reductions of
registers. The fragment is ``BN`` wide, N rounded up so that every thread
owns whole 16-byte chunks; the columns past N read zero (out-of-range
loads) and are never stored, and are masked where a zero would be wrong
(LayerNorm's centred values, softmax's max). Wider rows (a vocabulary of
128k) loop over ``BN``-wide chunks with an online max / sum, as TileLang's
online-softmax example does, kept per fragment element so that the loop
has no reduction (and no barrier) in it; exponentials are base 2
(``exp2`` is one instruction on GPUs, ``exp`` several).

Statistics and accumulation are f32 (f64 for f64 inputs, which is for
``torch.autograd.gradcheck`` on the CPU target). RMSNorm writes the
per-row ``rstd``, LayerNorm ``mean`` and ``rstd``, cross-entropy the
per-row log-sum-exp, all f32, for the backward.

dW / dB: the backward kernels are two ``T.Kernel`` blocks in one
``@T.prim_func``, launched in order. The first runs ``parts`` blocks, each
walking a contiguous range of rows: it writes dX row by row and
accumulates its rows' share of dW (and dB) in registers, stored once into
a ``[parts, N]`` f32 ``T.alloc_global`` tensor. The second sums those
partials over ``parts`` per column in a fixed order. This is deterministic
(the same bits on every run, unlike ``T.atomic_add`` into f32, whose
order of additions varies from run to run) and costs ``2 * parts * N * 4``
extra bytes, small beside the ``3 * M * N`` elements the backward moves.
``parts`` is at most 256: the row kernel holds X, dY, W and dW in
registers, so two 256-thread blocks fit an SM, and 256 blocks are one wave
on 132 SMs (H100, 16k x 4k bf16: 256 parts 0.87x of copy, 128 0.67x, 384
0.76x, 1024 0.80x).

Measured on an H100 (CUDA graphs, against a device copy of the bytes each
kernel must move; bf16 16384 x 4096 norms, f16 softmax, 4096 x 128256
cross-entropy): RMSNorm forward 0.99x (torch eager 0.69x, torch.compile
0.98x), backward 0.87x; LayerNorm forward 0.88x (eager 0.73x, compile
0.87x), backward 0.80x; softmax 0.99x / 1.02x at N = 4096, 0.76x / 0.62x
at N = 32768 (read twice); cross-entropy forward 0.89x, backward 0.94x,
forward + backward through the autograd function 0.88x (eager 0.34x,
torch.compile 0.71x).
"""

from typing import Any, Tuple

import kiln
import kiln.language as T

_ITEMSIZE = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8}
# A thread-owned fragment is kept in registers up to 32 elements per
# thread (the GPU planner's budget); wider ones go to shared memory.
_MAX_PER_THREAD = 32
MAX_WHOLE_ROW = _MAX_PER_THREAD * 1024
LOG2E = 1.4426950408889634
LN2 = 0.6931471805599453
# A finite value below any logit, per accumulator type.
_LOWEST = {"float32": -3.0e38, "float64": -1.0e308}


@T.macro
def _online_logsumexp2(src, row, n, chunks, block, ninf, x, mx, acc, m, s):
    """Row `row` of `src` (n wide) in `chunks` chunks of `block`: each
    fragment element keeps its own running max `mx` and sum `acc` of
    exp2(v - mx) over v = x * log2(e) (one exp2 per element, no reduction
    inside the loop); then m = the row's max and s = sum exp2(v - m).
    The caller fills mx with the lowest finite value and clears acc."""
    for c in T.serial(chunks):
        T.copy(src[row, c * block], x)
        for i, j in T.Parallel(1, block):
            v = T.if_then_else(c * block + j < n, x[i, j] * LOG2E, ninf)
            d = v - mx[i, j]
            e = T.exp2(-T.abs(d))
            acc[i, j] = T.if_then_else(d > 0, acc[i, j] * e + 1, acc[i, j] + e)
            mx[i, j] = T.max(mx[i, j], v)
    T.reduce_max(mx, m, dim=1)
    for i, j in T.Parallel(1, block):
        acc[i, j] = acc[i, j] * T.exp2(mx[i, j] - m[i])
    T.reduce_sum(acc, s, dim=1)


def _accum(dtype: str) -> str:
    return "float64" if dtype == "float64" else "float32"


def _itemsize(dtype: str) -> int:
    if dtype not in _ITEMSIZE:
        raise kiln.KilnArgumentError(
            f"kiln.ops.norms: unsupported dtype {dtype!r} (float16, "
            "bfloat16, float32, float64)")
    return _ITEMSIZE[dtype]


def _round_up(n: int, m: int) -> int:
    return -(-n // m) * m


def row_tile(n: int, dtype: str, per_thread: int = 16) -> Tuple[int, int]:
    """(threads, BN) for one row of ``n`` elements held whole in a
    thread-owned fragment: each thread owns 16-byte chunks (8 halves, 4
    floats), about ``per_thread`` elements and at most 32; among the
    thread counts (multiples of 32) that allow it, the least padding past
    ``n``, then the nearest to ``per_thread`` elements per thread."""
    vec = 16 // _itemsize(dtype)
    best = None
    for threads in range(32, 1025, 32):
        per = -(-n // threads)
        per = _round_up(per, vec) if per >= vec else \
            1 << (per - 1).bit_length()
        if per > _MAX_PER_THREAD:
            continue
        if threads & (threads - 1) and per % vec:
            continue  # (partial chunks only on power-of-two blocks)
        key = (per * threads, abs(per - per_thread), -threads)
        if best is None or key < best[0]:
            best = (key, threads, per * threads)
    if best is None:
        raise kiln.KilnArgumentError(
            f"kiln.ops.norms: rows of {n} elements do not fit one block "
            f"(at most {MAX_WHOLE_ROW})")
    return best[1], best[2]


def chunk_tile(n: int, dtype: str, whole_max: int = 4096,
               threads: int = 256, per_thread: int = 16
               ) -> Tuple[int, int, int]:
    """(threads, BN, chunks): a row of up to ``whole_max`` elements whole
    (``row_tile``), a wider one walked in ``threads * per_thread``-wide
    chunks."""
    if n <= whole_max:
        t, bn = row_tile(n, dtype, per_thread)
        return t, bn, 1
    bn = threads * per_thread
    return threads, bn, -(-n // bn)


# Softmax rows up to this width are loaded once and kept in registers
# (wider ones are read twice: the max / sum pass, then the write pass).
SOFTMAX_WHOLE_MAX = 16384


def _parts_tile(parts: int) -> Tuple[int, int, int]:
    """(BP, BC, threads) of the column-sum kernel: BP partials by BC
    columns per step (few steps: the loads of a step are all in flight
    at once), about 16 per thread."""
    bp = min(parts, 128)
    if parts % bp:
        raise kiln.KilnArgumentError(
            f"kiln.ops.norms: parts ({parts}) must be a multiple of 128 or "
            "less than 128")
    bc = 32
    threads = max(32, min(256, bp * bc // 16))
    return bp, bc, threads


def default_parts(m: int) -> int:
    """How many blocks share the rows of a backward (dW partials): about
    16 rows each, at most 256 (two blocks per SM of an H100 / H200), a
    power of two so that few distinct kernels are built."""
    want = max(1, min(256, -(-m // 16)))
    return 1 << (want - 1).bit_length()


# --- RMSNorm ---------------------------------------------------------------

@kiln.jit(out_idx=[2, 3])
def rms_norm_fwd(N, eps=1e-6, dtype="bfloat16", weight_dtype=None,
                 threads=None, block_N=None):
    """Y = X * rstd * W, rstd = rsqrt(mean(X^2) + eps) per row (also
    stored, f32). One row per block, the whole row in registers."""
    weight_dtype = weight_dtype or dtype
    if threads is None:
        threads, block_N = row_tile(N, dtype)
    BN = block_N
    accum = _accum(dtype)
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), weight_dtype),
             Y: T.Tensor((M, N), dtype), Rstd: T.Tensor((M,), accum)):
        with T.Kernel(M, threads=threads) as row:
            x = T.alloc_fragment((1, BN), accum)
            sq = T.alloc_fragment((1, BN), accum)
            w = T.alloc_fragment((BN,), accum)
            rstd = T.alloc_fragment((1,), accum)
            T.copy(X[row, 0], x)
            T.copy(W[0], w)
            for i, j in T.Parallel(1, BN):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(1):
                rstd[i] = T.rsqrt(rstd[i] / N + eps)
                Rstd[row + i] = rstd[i]
            for i, j in T.Parallel(1, BN):
                x[i, j] = x[i, j] * rstd[i] * w[j]
            T.copy(x, Y[row, 0])

    return main


@kiln.jit(out_idx=[4, 5])
def rms_norm_bwd(N, parts, dtype="bfloat16", weight_dtype=None,
                 threads=None, block_N=None, weight_regs=True):
    """dX = rstd * (dY * W - X * rstd^2 * mean(dY * W * X)) per row, and
    dW = sum over rows of dY * X * rstd (partials per block, then a
    column sum: see the module's note). ``weight_regs``: W held in a
    register fragment by each block (H100: 0.87x of copy, against 0.81x
    reading ``W[j]`` where used)."""
    weight_dtype = weight_dtype or dtype
    if threads is None:
        threads, block_N = row_tile(N, dtype)
    BN = block_N
    BP, BC, CT = _parts_tile(parts)
    accum = _accum(dtype)
    M = T.symbolic("M")

    @T.prim_func
    def main(DY: T.Tensor((M, N), dtype), X: T.Tensor((M, N), dtype),
             W: T.Tensor((N,), weight_dtype), Rstd: T.Tensor((M,), accum),
             DX: T.Tensor((M, N), dtype),
             DW: T.Tensor((N,), weight_dtype)):
        DW_part = T.alloc_global((parts, N), accum)
        with T.Kernel(parts, threads=threads) as bx:
            x = T.alloc_fragment((1, BN), accum)
            dy = T.alloc_fragment((1, BN), accum)
            gx = T.alloc_fragment((1, BN), accum)
            dw = T.alloc_fragment((BN,), accum)
            dot = T.alloc_fragment((1,), accum)
            if weight_regs:
                w = T.alloc_fragment((BN,), accum)
                T.copy(W[0], w)
            T.clear(dw)
            per = T.ceildiv(M, parts)
            lo = T.min(bx * per, M)
            hi = T.min(lo + per, M)
            for r in T.serial(hi - lo):
                row = lo + r
                rstd = Rstd[row]
                T.copy(X[row, 0], x)
                T.copy(DY[row, 0], dy)
                for i, j in T.Parallel(1, BN):
                    gx[i, j] = dy[i, j] * (w[j] if weight_regs else
                                           T.Cast(accum, W[j])) * x[i, j]
                T.reduce_sum(gx, dot, dim=1)
                for i, j in T.Parallel(1, BN):
                    dw[j] += dy[i, j] * x[i, j] * rstd
                    x[i, j] = rstd * (dy[i, j] * (w[j] if weight_regs else
                                                  T.Cast(accum, W[j])) -
                                      x[i, j] * (rstd * rstd * dot[i] / N))
                T.copy(x, DX[row, 0])
            T.copy(dw, DW_part[bx, 0])

        with T.Kernel(T.ceildiv(N, BC), threads=CT) as cx:
            acc = T.alloc_fragment((BP, BC), accum)
            part = T.alloc_fragment((BP, BC), accum)
            col = T.alloc_fragment((BC,), accum)
            T.clear(acc)
            for k in T.serial(parts // BP):
                T.copy(DW_part[k * BP, cx * BC], part)
                for i, j in T.Parallel(BP, BC):
                    acc[i, j] += part[i, j]
            T.reduce_sum(acc, col, dim=0)
            T.copy(col, DW[cx * BC])

    return main


# --- LayerNorm -------------------------------------------------------------

@kiln.jit(out_idx=[3, 4, 5])
def layer_norm_fwd(N, eps=1e-5, dtype="bfloat16", weight_dtype=None,
                   threads=None, block_N=None, weight_regs=False):
    """Y = (X - mean) * rstd * W + B per row; mean and rstd (f32) stored.
    The variance is the mean of the centred squares, taken from the row
    already in registers (no E[x^2] - mean^2 cancellation). W and B are
    read where used (``weight_regs=False``): held in registers across the
    two reductions they cost occupancy (H100: 0.88x of copy, against
    0.76x)."""
    weight_dtype = weight_dtype or dtype
    if threads is None:
        threads, block_N = row_tile(N, dtype)
    BN = block_N
    accum = _accum(dtype)
    M = T.symbolic("M")

    @T.prim_func
    def main(X: T.Tensor((M, N), dtype), W: T.Tensor((N,), weight_dtype),
             B: T.Tensor((N,), weight_dtype), Y: T.Tensor((M, N), dtype),
             Mean: T.Tensor((M,), accum), Rstd: T.Tensor((M,), accum)):
        with T.Kernel(M, threads=threads) as row:
            x = T.alloc_fragment((1, BN), accum)
            sq = T.alloc_fragment((1, BN), accum)
            mean = T.alloc_fragment((1,), accum)
            rstd = T.alloc_fragment((1,), accum)
            T.copy(X[row, 0], x)
            if weight_regs:
                w = T.alloc_fragment((BN,), accum)
                b = T.alloc_fragment((BN,), accum)
                T.copy(W[0], w)
                T.copy(B[0], b)
            T.reduce_sum(x, mean, dim=1)
            for i in T.Parallel(1):
                mean[i] = mean[i] / N
            for i, j in T.Parallel(1, BN):
                x[i, j] = T.if_then_else(j < N, x[i, j] - mean[i], 0)
            for i, j in T.Parallel(1, BN):
                sq[i, j] = x[i, j] * x[i, j]
            T.reduce_sum(sq, rstd, dim=1)
            for i in T.Parallel(1):
                rstd[i] = T.rsqrt(rstd[i] / N + eps)
                Mean[row + i] = mean[i]
                Rstd[row + i] = rstd[i]
            for i, j in T.Parallel(1, BN):
                if weight_regs:
                    x[i, j] = x[i, j] * rstd[i] * w[j] + b[j]
                else:
                    x[i, j] = x[i, j] * rstd[i] * T.Cast(accum, W[j]) + \
                        T.Cast(accum, B[j])
            T.copy(x, Y[row, 0])

    return main


@kiln.jit(out_idx=[5, 6, 7])
def layer_norm_bwd(N, parts, dtype="bfloat16", weight_dtype=None,
                   threads=None, block_N=None, weight_regs=True):
    """With xhat = (X - mean) * rstd and g = dY * W:
    dX = rstd * (g - mean(g) - xhat * mean(g * xhat)) per row;
    dW = sum over rows of dY * xhat, dB = sum of dY (partials per block,
    then a column sum: see the module's note). ``weight_regs`` as for
    ``rms_norm_bwd`` (0.80x of copy, against 0.66x)."""
    weight_dtype = weight_dtype or dtype
    if threads is None:
        threads, block_N = row_tile(N, dtype)
    BN = block_N
    BP, BC, CT = _parts_tile(parts)
    accum = _accum(dtype)
    M = T.symbolic("M")

    @T.prim_func
    def main(DY: T.Tensor((M, N), dtype), X: T.Tensor((M, N), dtype),
             W: T.Tensor((N,), weight_dtype), Mean: T.Tensor((M,), accum),
             Rstd: T.Tensor((M,), accum), DX: T.Tensor((M, N), dtype),
             DW: T.Tensor((N,), weight_dtype),
             DB: T.Tensor((N,), weight_dtype)):
        DW_part = T.alloc_global((parts, N), accum)
        DB_part = T.alloc_global((parts, N), accum)
        with T.Kernel(parts, threads=threads) as bx:
            x = T.alloc_fragment((1, BN), accum)
            dy = T.alloc_fragment((1, BN), accum)
            tmp = T.alloc_fragment((1, BN), accum)
            dw = T.alloc_fragment((BN,), accum)
            db = T.alloc_fragment((BN,), accum)
            sum_g = T.alloc_fragment((1,), accum)
            sum_gx = T.alloc_fragment((1,), accum)
            if weight_regs:
                w = T.alloc_fragment((BN,), accum)
                T.copy(W[0], w)
            T.clear(dw)
            T.clear(db)
            per = T.ceildiv(M, parts)
            lo = T.min(bx * per, M)
            hi = T.min(lo + per, M)
            for r in T.serial(hi - lo):
                row = lo + r
                mean = Mean[row]
                rstd = Rstd[row]
                T.copy(X[row, 0], x)
                T.copy(DY[row, 0], dy)
                # Each product is made where its reduction reads it (the
                # planner fuses a reduction with the parallel writing its
                # source), so tmp never lives whole.
                for i, j in T.Parallel(1, BN):
                    tmp[i, j] = dy[i, j] * (w[j] if weight_regs else
                                            T.Cast(accum, W[j]))
                T.reduce_sum(tmp, sum_g, dim=1)
                for i, j in T.Parallel(1, BN):
                    x[i, j] = (x[i, j] - mean) * rstd  # xhat
                for i, j in T.Parallel(1, BN):
                    tmp[i, j] = dy[i, j] * (w[j] if weight_regs else
                                            T.Cast(accum, W[j])) * x[i, j]
                T.reduce_sum(tmp, sum_gx, dim=1)
                for i, j in T.Parallel(1, BN):
                    dw[j] += dy[i, j] * x[i, j]
                    db[j] += dy[i, j]
                    x[i, j] = rstd * (dy[i, j] * (w[j] if weight_regs else
                                                  T.Cast(accum, W[j])) -
                                      sum_g[i] / N -
                                      x[i, j] * (sum_gx[i] / N))
                T.copy(x, DX[row, 0])
            T.copy(dw, DW_part[bx, 0])
            T.copy(db, DB_part[bx, 0])

        with T.Kernel(T.ceildiv(N, BC), threads=CT) as cx:
            acc_w = T.alloc_fragment((BP, BC), accum)
            acc_b = T.alloc_fragment((BP, BC), accum)
            part = T.alloc_fragment((BP, BC), accum)
            col = T.alloc_fragment((BC,), accum)
            T.clear(acc_w)
            T.clear(acc_b)
            for k in T.serial(parts // BP):
                T.copy(DW_part[k * BP, cx * BC], part)
                for i, j in T.Parallel(BP, BC):
                    acc_w[i, j] += part[i, j]
                T.copy(DB_part[k * BP, cx * BC], part)
                for i, j in T.Parallel(BP, BC):
                    acc_b[i, j] += part[i, j]
            T.reduce_sum(acc_w, col, dim=0)
            T.copy(col, DW[cx * BC])
            T.reduce_sum(acc_b, col, dim=0)
            T.copy(col, DB[cx * BC])

    return main


# --- softmax ---------------------------------------------------------------

@kiln.jit(out_idx=[1])
def softmax_fwd(N, dtype="float16", threads=None, block_N=None):
    """Y = softmax(X) along each row. A row that fits is loaded once and
    kept in registers; a wider one takes two passes over BN-wide chunks:
    an online max / sum (TileLang's online softmax), then the write."""
    if threads is None:
        threads, block_N, _ = chunk_tile(N, dtype, SOFTMAX_WHOLE_MAX)
    BN = block_N
    NC = -(-N // BN)
    accum = _accum(dtype)
    ninf = -T.infinity(accum)
    lowest = _LOWEST[accum]
    M = T.symbolic("M")

    @T.prim_func
    def whole(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=threads) as row:
            x = T.alloc_fragment((1, BN), accum)
            m = T.alloc_fragment((1,), accum)
            s = T.alloc_fragment((1,), accum)
            T.copy(X[row, 0], x)
            if BN > N:
                for i, j in T.Parallel(1, BN):
                    x[i, j] = T.if_then_else(j < N, x[i, j], ninf)
            T.reduce_max(x, m, dim=1)
            for i, j in T.Parallel(1, BN):
                x[i, j] = T.exp2(x[i, j] * LOG2E - m[i] * LOG2E)
            T.reduce_sum(x, s, dim=1)
            for i in T.Parallel(1):
                s[i] = 1 / s[i]
            for i, j in T.Parallel(1, BN):
                x[i, j] = x[i, j] * s[i]
            T.copy(x, Y[row, 0])

    @T.prim_func
    def chunked(X: T.Tensor((M, N), dtype), Y: T.Tensor((M, N), dtype)):
        # Pass 1 keeps an online max / sum per fragment element, as
        # cross_entropy_fwd does (base 2); pass 2 writes.
        with T.Kernel(M, threads=threads) as row:
            x = T.alloc_fragment((1, BN), accum)
            mx = T.alloc_fragment((1, BN), accum)
            acc = T.alloc_fragment((1, BN), accum)
            m = T.alloc_fragment((1,), accum)
            s = T.alloc_fragment((1,), accum)
            T.fill(mx, lowest)
            T.clear(acc)
            _online_logsumexp2(X, row, N, NC, BN, ninf, x, mx, acc, m, s)
            for i in T.Parallel(1):
                s[i] = 1 / s[i]
            for c in T.serial(NC):
                T.copy(X[row, c * BN], x)
                for i, j in T.Parallel(1, BN):
                    x[i, j] = T.exp2(x[i, j] * LOG2E - m[i]) * s[i]
                T.copy(x, Y[row, c * BN])

    return whole if NC == 1 else chunked


@kiln.jit(out_idx=[2])
def softmax_bwd(N, dtype="float16", threads=None, block_N=None):
    """dX = Y * (dY - sum(dY * Y)) along each row (in registers when the
    row fits, else a sum pass and a write pass over chunks)."""
    if threads is None:
        threads, block_N, _ = chunk_tile(N, dtype, SOFTMAX_WHOLE_MAX)
    BN = block_N
    NC = -(-N // BN)
    accum = _accum(dtype)
    M = T.symbolic("M")

    @T.prim_func
    def whole(Y: T.Tensor((M, N), dtype), DY: T.Tensor((M, N), dtype),
              DX: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=threads) as row:
            y = T.alloc_fragment((1, BN), accum)
            dy = T.alloc_fragment((1, BN), accum)
            p = T.alloc_fragment((1, BN), accum)
            dot = T.alloc_fragment((1,), accum)
            T.copy(Y[row, 0], y)
            T.copy(DY[row, 0], dy)
            for i, j in T.Parallel(1, BN):
                p[i, j] = y[i, j] * dy[i, j]
            T.reduce_sum(p, dot, dim=1)
            for i, j in T.Parallel(1, BN):
                y[i, j] = y[i, j] * (dy[i, j] - dot[i])
            T.copy(y, DX[row, 0])

    @T.prim_func
    def chunked(Y: T.Tensor((M, N), dtype), DY: T.Tensor((M, N), dtype),
                DX: T.Tensor((M, N), dtype)):
        with T.Kernel(M, threads=threads) as row:
            y = T.alloc_fragment((1, BN), accum)
            dy = T.alloc_fragment((1, BN), accum)
            p = T.alloc_fragment((1, BN), accum)
            dot = T.alloc_fragment((1,), accum)
            T.clear(dot)
            for c in T.serial(NC):
                T.copy(Y[row, c * BN], y)
                T.copy(DY[row, c * BN], dy)
                for i, j in T.Parallel(1, BN):
                    p[i, j] = y[i, j] * dy[i, j]
                T.reduce_sum(p, dot, dim=1, clear=False)
            for c in T.serial(NC):
                T.copy(Y[row, c * BN], y)
                T.copy(DY[row, c * BN], dy)
                for i, j in T.Parallel(1, BN):
                    y[i, j] = y[i, j] * (dy[i, j] - dot[i])
                T.copy(y, DX[row, c * BN])

    return whole if NC == 1 else chunked


# --- cross-entropy ---------------------------------------------------------

@kiln.jit(out_idx=[2, 3])
def cross_entropy_fwd(V, ignore_index=-100, dtype="bfloat16",
                      index_dtype="int64", threads=None, block_V=None):
    """Per row: Lse = logsumexp(logits) (f32, one read of the row) and
    Loss = Lse - logits[target], 0 where target == ignore_index.

    The row is walked in BV-wide chunks with an online max / sum kept per
    fragment element (each thread's own running max ``mx`` and sum ``acc``
    of ``exp(x - mx)``: one exponential per logit, ``exp(-|x - mx|)``, and
    no reduction, so no barrier, inside the loop); the per-element states
    are combined by one max and one sum reduction at the end."""
    if threads is None:
        # 8 per thread (not 16): fewer registers, more rows in flight (H100:
        # 0.89x of copy against 0.82x for 256 x 16).
        threads, block_V, _ = chunk_tile(V, dtype, threads=512, per_thread=8)
    BV = block_V
    NC = -(-V // BV)
    accum = _accum(dtype)
    ninf = -T.infinity(accum)
    lowest = _LOWEST[accum]  # finite: (-inf) - (-inf) would be NaN
    M = T.symbolic("M")

    @T.prim_func
    def main(Logits: T.Tensor((M, V), dtype),
             Target: T.Tensor((M,), index_dtype),
             Loss: T.Tensor((M,), accum), Lse: T.Tensor((M,), accum)):
        with T.Kernel(M, threads=threads) as row:
            x = T.alloc_fragment((1, BV), accum)
            mx = T.alloc_fragment((1, BV), accum)
            acc = T.alloc_fragment((1, BV), accum)
            m = T.alloc_fragment((1,), accum)
            s = T.alloc_fragment((1,), accum)
            T.fill(mx, lowest)
            T.clear(acc)
            _online_logsumexp2(Logits, row, V, NC, BV, ninf, x, mx, acc, m,
                               s)
            target = Target[row]
            for i in T.Parallel(1):
                lse = (m[i] + T.log2(s[i])) * LN2
                Lse[row + i] = lse
                Loss[row + i] = T.if_then_else(
                    target == ignore_index, 0,
                    lse - T.Cast(accum, Logits[row, target]))

    return main


@kiln.jit(out_idx=[4])
def cross_entropy_bwd(V, ignore_index=-100, dtype="bfloat16",
                      index_dtype="int64", threads=None, block_V=None):
    """dLogits = (exp(logits - Lse) - onehot(target)) * dLoss per row, 0
    where target == ignore_index: one read and one write of the row."""
    if threads is None:
        threads, block_V, _ = chunk_tile(V, dtype)
    BV = block_V
    NC = -(-V // BV)
    accum = _accum(dtype)
    M = T.symbolic("M")

    @T.prim_func
    def main(Logits: T.Tensor((M, V), dtype),
             Target: T.Tensor((M,), index_dtype),
             Lse: T.Tensor((M,), accum), DLoss: T.Tensor((M,), accum),
             DLogits: T.Tensor((M, V), dtype)):
        with T.Kernel(M, threads=threads) as row:
            x = T.alloc_fragment((1, BV), accum)
            target = Target[row]
            lse2 = Lse[row] * LOG2E
            g = T.if_then_else(target == ignore_index, T.Cast(accum, 0),
                               DLoss[row])
            for c in T.serial(NC):
                T.copy(Logits[row, c * BV], x)
                for i, j in T.Parallel(1, BV):
                    x[i, j] = (T.exp2(x[i, j] * LOG2E - lse2) - T.if_then_else(
                        c * BV + j == target, T.Cast(accum, 1),
                        T.Cast(accum, 0))) * g
                T.copy(x, DLogits[row, c * BV])

    return main


# --- autograd --------------------------------------------------------------

_functions: dict = {}


def _rows(x: Any, n: int) -> Any:
    """x as a contiguous [M, n] view (a copy only when x is not dense)."""
    return x.contiguous().view(-1, n) if x.dim() != 2 or \
        not x.is_contiguous() else x


def _weights(where: str, x: Any, tensors: Any) -> str:
    from kiln.ops import _torch
    n = x.shape[-1]
    dtype = None
    for t in tensors:
        if t.dim() != 1 or t.shape[0] != n:
            raise kiln.KilnArgumentError(
                f"{where}: weights of shape ({n},) expected for input "
                f"{tuple(x.shape)}; got {tuple(t.shape)}")
        d = _torch.dtype_name(t, where)
        if dtype is not None and d != dtype:
            raise kiln.KilnArgumentError(
                f"{where}: weight and bias of one dtype; got {dtype} and {d}")
        dtype = d
    return dtype


def _autograd(name: str) -> Any:
    fn = _functions.get(name)
    if fn is not None:
        return fn
    from kiln.ops import _torch
    torch = _torch.torch()

    class RMSNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, eps):
            where = "kiln.ops.rms_norm"
            _torch.same_device(where, x, weight)
            dtype = _torch.dtype_name(x, where)
            wdtype = _weights(where, x, (weight,))
            n = x.shape[-1]
            x2 = _rows(x, n)
            (weight,) = _torch.contiguous(weight)
            if x2.shape[0] == 0:
                y = torch.empty_like(x2)
                rstd = x2.new_empty((0,), dtype=torch.float64 if
                                    dtype == "float64" else torch.float32)
            else:
                y, rstd = rms_norm_fwd(n, float(eps), dtype,
                                       wdtype)(x2, weight)
            ctx.save_for_backward(x2, weight, rstd)
            ctx.meta = (dtype, wdtype, x.shape)
            return y.view(x.shape)

        @staticmethod
        def backward(ctx, dy):
            x2, weight, rstd = ctx.saved_tensors
            dtype, wdtype, shape = ctx.meta
            m, n = x2.shape
            if m == 0:
                return dy.new_zeros(shape), torch.zeros_like(weight), None
            dy2 = _rows(dy, n)
            dx, dw = rms_norm_bwd(n, default_parts(m), dtype, wdtype)(
                dy2, x2, weight, rstd)
            return dx.view(shape), dw, None

    class LayerNorm(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight, bias, eps):
            where = "kiln.ops.layer_norm"
            _torch.same_device(where, x, weight, bias)
            dtype = _torch.dtype_name(x, where)
            wdtype = _weights(where, x, (weight, bias))
            n = x.shape[-1]
            x2 = _rows(x, n)
            weight, bias = _torch.contiguous(weight, bias)
            if x2.shape[0] == 0:
                acc = torch.float64 if dtype == "float64" else torch.float32
                y = torch.empty_like(x2)
                mean = rstd = x2.new_empty((0,), dtype=acc)
            else:
                y, mean, rstd = layer_norm_fwd(n, float(eps), dtype,
                                               wdtype)(x2, weight, bias)
            ctx.save_for_backward(x2, weight, mean, rstd)
            ctx.meta = (dtype, wdtype, x.shape)
            return y.view(x.shape)

        @staticmethod
        def backward(ctx, dy):
            x2, weight, mean, rstd = ctx.saved_tensors
            dtype, wdtype, shape = ctx.meta
            m, n = x2.shape
            if m == 0:
                return (dy.new_zeros(shape), torch.zeros_like(weight),
                        torch.zeros_like(weight), None)
            dy2 = _rows(dy, n)
            dx, dw, db = layer_norm_bwd(n, default_parts(m), dtype, wdtype)(
                dy2, x2, weight, mean, rstd)
            return dx.view(shape), dw, db, None

    class Softmax(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            where = "kiln.ops.softmax"
            dtype = _torch.dtype_name(x, where)
            n = x.shape[-1]
            x2 = _rows(x, n)
            y = softmax_fwd(n, dtype)(x2) if x2.numel() else \
                torch.empty_like(x2)
            ctx.save_for_backward(y)
            ctx.meta = (dtype, x.shape)
            return y.view(x.shape)

        @staticmethod
        def backward(ctx, dy):
            (y,) = ctx.saved_tensors
            dtype, shape = ctx.meta
            n = y.shape[1]
            if y.numel() == 0:
                return dy.new_zeros(shape)
            return softmax_bwd(n, dtype)(y, _rows(dy, n)).view(shape)

    class CrossEntropy(torch.autograd.Function):
        @staticmethod
        def forward(ctx, logits, target, ignore_index, reduction):
            where = "kiln.ops.cross_entropy"
            _torch.same_device(where, logits, target)
            dtype = _torch.dtype_name(logits, where)
            if target.dtype not in (torch.int64, torch.int32) or \
                    tuple(target.shape) != tuple(logits.shape[:-1]):
                raise kiln.KilnArgumentError(
                    f"{where}: logits [..., V] and int64 or int32 targets "
                    f"[...]; got {tuple(logits.shape)} {logits.dtype}, "
                    f"{tuple(target.shape)} {target.dtype}")
            index_dtype = str(target.dtype).replace("torch.", "")
            v = logits.shape[-1]
            x2 = _rows(logits, v)
            t1 = target.contiguous().view(-1)
            m = x2.shape[0]
            acc = torch.float64 if dtype == "float64" else torch.float32
            if m:
                loss, lse = cross_entropy_fwd(v, int(ignore_index), dtype,
                                              index_dtype)(x2, t1)
            else:
                loss = lse = x2.new_empty((0,), dtype=acc)
            valid = (t1 != ignore_index).sum()
            ctx.save_for_backward(x2, t1, lse, valid)
            ctx.meta = (dtype, index_dtype, int(ignore_index), reduction,
                        logits.shape)
            if reduction == "none":
                out = loss.view(target.shape)
            elif reduction == "sum":
                out = loss.sum()
            else:
                out = loss.sum() / valid
            return out.to(logits.dtype)

        @staticmethod
        def backward(ctx, dout):
            x2, t1, lse, valid = ctx.saved_tensors
            dtype, index_dtype, ignore_index, reduction, shape = ctx.meta
            m, v = x2.shape
            if m == 0:
                return dout.new_zeros(shape), None, None, None
            g = dout.to(lse.dtype)
            if reduction == "none":
                g = g.contiguous().view(-1)
            elif reduction == "sum":
                g = g.expand(m).contiguous()
            else:
                g = (g / valid).expand(m).contiguous()
            dx = cross_entropy_bwd(v, ignore_index, dtype, index_dtype)(
                x2, t1, lse, g)
            return dx.view(shape), None, None, None

    _functions.update(rms_norm=RMSNorm, layer_norm=LayerNorm,
                      softmax=Softmax, cross_entropy=CrossEntropy)
    return _functions[name]


def rms_norm(x: Any, weight: Any, eps: float = 1e-6) -> Any:
    """``x * rsqrt(mean(x^2, -1) + eps) * weight`` over the last dim of a
    torch tensor (any leading dims), with dX and dW from Kiln kernels."""
    return _autograd("rms_norm").apply(x, weight, float(eps))


def layer_norm(x: Any, weight: Any, bias: Any, eps: float = 1e-5) -> Any:
    """``F.layer_norm(x, (x.shape[-1],), weight, bias, eps)``, with dX, dW
    and dB from Kiln kernels."""
    return _autograd("layer_norm").apply(x, weight, bias, float(eps))


def softmax(x: Any) -> Any:
    """``torch.softmax(x, -1)``, with its backward from a Kiln kernel."""
    return _autograd("softmax").apply(x)


def cross_entropy(logits: Any, target: Any, ignore_index: int = -100,
                  reduction: str = "mean") -> Any:
    """``F.cross_entropy`` with the classes along the LAST dim: logits
    ``[..., V]``, integer targets ``[...]`` (for 2-D logits the same as
    torch's). Rows whose target is ``ignore_index`` give loss 0 and
    gradient 0; ``reduction`` is ``"mean"`` (over the rows not ignored),
    ``"sum"`` or ``"none"``. Targets are not range-checked (that would
    synchronise with the device): a target outside ``[0, V)`` that is not
    ``ignore_index`` reads a logit of 0."""
    if reduction not in ("mean", "sum", "none"):
        raise kiln.KilnArgumentError(
            "kiln.ops.cross_entropy: reduction must be 'mean', 'sum' or "
            f"'none'; got {reduction!r}")
    return _autograd("cross_entropy").apply(logits, target,
                                            int(ignore_index), reduction)


__all__ = ["cross_entropy", "cross_entropy_bwd", "cross_entropy_fwd",
           "layer_norm", "layer_norm_bwd", "layer_norm_fwd", "rms_norm",
           "rms_norm_bwd", "rms_norm_fwd", "softmax", "softmax_bwd",
           "softmax_fwd"]
