"""FlashAttention forward and backward in the DSL, and ``flash_attention``,
the autograd function that ties them together.

Layout: ``[batch, seq, heads, dim]`` (flash-attn's BSHD); K and V may have
fewer heads than Q (GQA: ``heads`` a multiple of ``kv_heads``). Batch and
sequence length are symbolic, so one compile serves every length.

The forward is FlashAttention-2's online softmax, kept in base 2: it writes
``O`` and the per-row log-sum-exp ``Lse`` (base 2, of the scaled scores),
which is all the backward needs to rebuild the probabilities. The backward
runs three kernels, as FlashAttention-2 does:

1. ``delta = rowsum(dO * O)`` (``attention_bwd_preprocess``);
2. one block per ``block_M`` keys of one KV head (``flashattn_bwd``): it
   walks the query tiles of every query head that shares the KV head,
   rebuilds ``P = exp2(Q K^T * scale - Lse)``, accumulates ``dV += P^T dO``
   and ``dK += dS^T Q`` in registers (``dS = P * (dO V^T - delta)``), and
   adds its share of ``dQ = dS K`` into an f32 ``dQ`` with atomics;
   dK and dV are stored once, so GQA needs no atomics for them;
3. ``dQ`` cast to the input dtype.
"""


import math
from typing import Any, Optional

import kiln
import kiln.language as T

LOG2E = 1.4426950408889634


def _accum(dtype: str) -> str:
    return "float64" if dtype == "float64" else "float32"


def _check_heads(heads: int, kv_heads: int) -> int:
    if kv_heads <= 0 or heads % kv_heads:
        raise kiln.KilnArgumentError(
            f"flash attention: {heads} query heads do not split evenly over "
            f"{kv_heads} KV heads")
    return heads // kv_heads


@kiln.jit(out_idx=[3, 4])
def flashattn_fwd(heads, kv_heads, dim, is_causal, sm_scale=None,
                  block_M=64, block_N=64, threads=128, num_stages=1,
                  dtype="float16"):
    """O and the base-2 log-sum-exp of the scaled scores, per query row."""
    groups = _check_heads(heads, kv_heads)
    batch, seq_len = T.symbolic("batch"), T.symbolic("seq_len")
    scale = (sm_scale if sm_scale is not None else dim ** -0.5) * LOG2E
    accum = _accum(dtype)

    @T.prim_func
    def fwd(Q: T.Tensor([batch, seq_len, heads, dim], dtype),
            K: T.Tensor([batch, seq_len, kv_heads, dim], dtype),
            V: T.Tensor([batch, seq_len, kv_heads, dim], dtype),
            O: T.Tensor([batch, seq_len, heads, dim], dtype),
            Lse: T.Tensor([batch, heads, seq_len], accum)):
        with T.Kernel(T.ceildiv(seq_len, block_M), heads, batch,
                      threads=threads) as (bx, by, bz):
            q_s = T.alloc_shared([block_M, dim], dtype)
            k_s = T.alloc_shared([block_N, dim], dtype)
            v_s = T.alloc_shared([block_N, dim], dtype)
            s = T.alloc_fragment([block_M, block_N], accum)
            p = T.alloc_fragment([block_M, block_N], dtype)
            acc = T.alloc_fragment([block_M, dim], accum)
            m = T.alloc_fragment([block_M], accum)
            m_prev = T.alloc_fragment([block_M], accum)
            rescale = T.alloc_fragment([block_M], accum)
            row_sum = T.alloc_fragment([block_M], accum)
            denom = T.alloc_fragment([block_M], accum)
            kvh = by // groups

            T.copy(Q[bz, bx * block_M:(bx + 1) * block_M, by, :], q_s)
            T.fill(acc, 0)
            T.fill(denom, 0)
            T.fill(m, -T.infinity(accum))
            if is_causal:
                n_blocks = T.min(T.ceildiv(seq_len, block_N),
                                 T.ceildiv((bx + 1) * block_M, block_N))
            else:
                n_blocks = T.ceildiv(seq_len, block_N)
            for kb in T.Pipelined(n_blocks, num_stages=num_stages):
                T.copy(K[bz, kb * block_N:(kb + 1) * block_N, kvh, :], k_s)
                for qi, kj in T.Parallel(block_M, block_N):
                    if is_causal:
                        s[qi, kj] = T.if_then_else(
                            bx * block_M + qi >= kb * block_N + kj, 0,
                            -T.infinity(accum))
                    else:
                        s[qi, kj] = T.if_then_else(
                            kb * block_N + kj >= seq_len, -T.infinity(accum),
                            0)
                T.gemm(q_s, k_s, s, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
                T.copy(V[bz, kb * block_N:(kb + 1) * block_N, kvh, :], v_s)
                T.copy(m, m_prev)
                T.reduce_max(s, m, dim=1, clear=False)
                for i in T.Parallel(block_M):
                    m[i] = T.max(m[i], m_prev[i])
                    rescale[i] = T.exp2(m_prev[i] * scale - m[i] * scale)
                for i, j in T.Parallel(block_M, dim):
                    acc[i, j] *= rescale[i]
                for qi, kj in T.Parallel(block_M, block_N):
                    s[qi, kj] = T.exp2(s[qi, kj] * scale - m[qi] * scale)
                T.copy(s, p)
                T.gemm(p, v_s, acc, policy=T.GemmWarpPolicy.FullRow)
                T.reduce_sum(s, row_sum, dim=1)
                for i in T.Parallel(block_M):
                    denom[i] = denom[i] * rescale[i] + row_sum[i]
            for i, j in T.Parallel(block_M, dim):
                acc[i, j] /= denom[i]
            T.copy(acc, O[bz, bx * block_M:(bx + 1) * block_M, by, :])
            for i in T.Parallel(block_M):
                denom[i] = T.log2(denom[i]) + m[i] * scale
            T.copy(denom, Lse[bz, by, bx * block_M:(bx + 1) * block_M])

    return fwd


@kiln.jit(out_idx=[2])
def attention_bwd_preprocess(heads, dim, block=32, dtype="float16"):
    """Delta[b, h, i] = sum_d dO[b, i, h, d] * O[b, i, h, d]."""
    batch, seq_len = T.symbolic("batch"), T.symbolic("seq_len")
    accum = _accum(dtype)

    @T.prim_func
    def prep(O: T.Tensor([batch, seq_len, heads, dim], dtype),
             dO: T.Tensor([batch, seq_len, heads, dim], dtype),
             Delta: T.Tensor([batch, heads, seq_len], accum)):
        with T.Kernel(heads, T.ceildiv(seq_len, block), batch,
                      threads=128) as (bx, by, bz):
            o = T.alloc_fragment([block, dim], dtype)
            do = T.alloc_fragment([block, dim], dtype)
            prod = T.alloc_fragment([block, dim], accum)
            delta = T.alloc_fragment([block], accum)
            T.copy(O[bz, by * block:(by + 1) * block, bx, :], o)
            T.copy(dO[bz, by * block:(by + 1) * block, bx, :], do)
            for i, j in T.Parallel(block, dim):
                prod[i, j] = T.cast(o[i, j], accum) * T.cast(do[i, j], accum)
            T.reduce_sum(prod, delta, dim=1)
            T.copy(delta, Delta[bz, bx, by * block:(by + 1) * block])

    return prep


@kiln.jit(out_idx=[])
def flashattn_bwd(heads, kv_heads, dim, is_causal, sm_scale=None,
                  block_M=64, block_N=64, threads=128, num_stages=2,
                  dtype="float16"):
    """dK and dV (stored), dQ (added into an f32 tensor the caller zeroes),
    for one block of ``block_M`` keys of one KV head per block."""
    groups = _check_heads(heads, kv_heads)
    batch, seq_len = T.symbolic("batch"), T.symbolic("seq_len")
    sm = sm_scale if sm_scale is not None else dim ** -0.5
    scale = sm * LOG2E
    accum = _accum(dtype)

    @T.prim_func
    def bwd(Q: T.Tensor([batch, seq_len, heads, dim], dtype),
            K: T.Tensor([batch, seq_len, kv_heads, dim], dtype),
            V: T.Tensor([batch, seq_len, kv_heads, dim], dtype),
            dO: T.Tensor([batch, seq_len, heads, dim], dtype),
            Lse: T.Tensor([batch, heads, seq_len], accum),
            Delta: T.Tensor([batch, heads, seq_len], accum),
            dQ: T.Tensor([batch, seq_len, heads, dim], accum),
            dK: T.Tensor([batch, seq_len, kv_heads, dim], dtype),
            dV: T.Tensor([batch, seq_len, kv_heads, dim], dtype)):
        with T.Kernel(T.ceildiv(seq_len, block_M), kv_heads, batch,
                      threads=threads) as (bx, by, bz):
            k_s = T.alloc_shared([block_M, dim], dtype)
            v_s = T.alloc_shared([block_M, dim], dtype)
            q_s = T.alloc_shared([block_N, dim], dtype)
            do_s = T.alloc_shared([block_N, dim], dtype)
            ds_s = T.alloc_shared([block_M, block_N], dtype)
            lse_s = T.alloc_shared([block_N], accum)
            delta_s = T.alloc_shared([block_N], accum)
            # Transposed scores: rows are this block's keys, columns the
            # query tile's rows.
            pt = T.alloc_fragment([block_M, block_N], accum)
            dpt = T.alloc_fragment([block_M, block_N], accum)
            pt_cast = T.alloc_fragment([block_M, block_N], dtype)
            dst_cast = T.alloc_fragment([block_M, block_N], dtype)
            dk = T.alloc_fragment([block_M, dim], accum)
            dv = T.alloc_fragment([block_M, dim], accum)
            dq = T.alloc_fragment([block_N, dim], accum)

            T.copy(K[bz, bx * block_M:(bx + 1) * block_M, by, :], k_s)
            T.copy(V[bz, bx * block_M:(bx + 1) * block_M, by, :], v_s)
            T.clear(dk)
            T.clear(dv)
            # Query tiles before this key block see none of its keys.
            first = T.floordiv(bx * block_M, block_N) if is_causal else 0
            n_q = T.ceildiv(seq_len, block_N) - first
            # Every query head of the group, each over its query tiles.
            for t in T.Pipelined(groups * n_q, num_stages=num_stages):
                h = by * groups + t // n_q
                qb = first + t % n_q
                T.copy(Q[bz, qb * block_N:(qb + 1) * block_N, h, :], q_s)
                T.clear(pt)
                T.gemm(k_s, q_s, pt, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
                T.copy(Lse[bz, h, qb * block_N:(qb + 1) * block_N], lse_s)
                for ki, qj in T.Parallel(block_M, block_N):
                    pt[ki, qj] = T.exp2(pt[ki, qj] * scale - lse_s[qj])
                if is_causal:
                    for ki, qj in T.Parallel(block_M, block_N):
                        pt[ki, qj] = T.if_then_else(
                            bx * block_M + ki <= qb * block_N + qj,
                            pt[ki, qj], 0)
                T.copy(dO[bz, qb * block_N:(qb + 1) * block_N, h, :], do_s)
                T.clear(dpt)
                T.gemm(v_s, do_s, dpt, transpose_B=True,
                       policy=T.GemmWarpPolicy.FullRow)
                T.copy(pt, pt_cast)
                T.gemm(pt_cast, do_s, dv, policy=T.GemmWarpPolicy.FullRow)
                T.copy(Delta[bz, h, qb * block_N:(qb + 1) * block_N], delta_s)
                for ki, qj in T.Parallel(block_M, block_N):
                    dst_cast[ki, qj] = \
                        pt[ki, qj] * (dpt[ki, qj] - delta_s[qj]) * sm
                T.gemm(dst_cast, q_s, dk, policy=T.GemmWarpPolicy.FullRow)
                T.copy(dst_cast, ds_s)
                T.clear(dq)
                T.gemm(ds_s, k_s, dq, transpose_A=True)
                T.atomic_add(dQ[bz, qb * block_N:(qb + 1) * block_N, h, :],
                             dq)
            T.copy(dk, dK[bz, bx * block_M:(bx + 1) * block_M, by, :])
            T.copy(dv, dV[bz, bx * block_M:(bx + 1) * block_M, by, :])

    return bwd


def _tiles(dim: int, dtype: str) -> dict:
    """Tile sizes by head dim. Forward: 128 query rows over two consumer
    warpgroups (on sm_90a a warp-specialised TMA ring). Backward: the
    fastest on an H100 of bench/gpu/attention_bwd.py's variants that keep
    dK, dV, S^T, dP^T and dQ in registers: 64 keys and one warpgroup at
    d64, 128 keys over two warpgroups at d128. At d256 only 16 query rows
    per step fit shared memory, and dK goes through shared memory."""
    if dtype == "float64":  # the CPU target's gradient checks
        return {"fwd": dict(block_M=32, block_N=32, threads=128),
                "bwd": dict(block_M=32, block_N=32, threads=128)}
    fwd = dict(block_M=128, block_N=128 if dim <= 128 else 64, threads=256,
               num_stages=2)
    if dim <= 64:
        bwd = dict(block_M=64, block_N=64, threads=128, num_stages=2)
    elif dim <= 128:
        bwd = dict(block_M=128, block_N=32, threads=256, num_stages=2)
    else:
        bwd = dict(block_M=64, block_N=16, threads=128, num_stages=2)
    return {"fwd": fwd, "bwd": bwd}


_function: Any = None


def _autograd() -> Any:
    global _function
    if _function is not None:
        return _function
    from kiln.ops import _torch
    torch = _torch.torch()

    class FlashAttention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, causal, sm_scale):
            where = "kiln.ops.flash_attention"
            _torch.same_device(where, q, k, v)
            dtype = _torch.dtype_name(q, where)
            if q.dim() != 4 or k.dim() != 4 or v.shape != k.shape or \
                    q.dtype != k.dtype or q.dtype != v.dtype or \
                    q.shape[0] != k.shape[0] or q.shape[1] != k.shape[1] or \
                    q.shape[3] != k.shape[3]:
                raise kiln.KilnArgumentError(
                    f"{where}: q [batch, seq, heads, dim] and k, v [batch, "
                    "seq, kv_heads, dim] of one dtype; got "
                    f"{tuple(q.shape)} {q.dtype}, {tuple(k.shape)} {k.dtype},"
                    f" {tuple(v.shape)} {v.dtype}")
            q, k, v = _torch.contiguous(q, k, v)
            heads, kv_heads, dim = q.shape[2], k.shape[2], q.shape[3]
            tiles = _tiles(dim, dtype)
            o, lse = flashattn_fwd(heads, kv_heads, dim, bool(causal),
                                   sm_scale, dtype=dtype,
                                   **tiles["fwd"])(q, k, v)
            ctx.save_for_backward(q, k, v, o, lse)
            ctx.causal, ctx.sm_scale, ctx.dtype = bool(causal), sm_scale, dtype
            return o

        @staticmethod
        def backward(ctx, do):
            q, k, v, o, lse = ctx.saved_tensors
            (do,) = _torch.contiguous(do)
            heads, kv_heads, dim = q.shape[2], k.shape[2], q.shape[3]
            tiles = _tiles(dim, ctx.dtype)
            delta = attention_bwd_preprocess(heads, dim,
                                             dtype=ctx.dtype)(o, do)
            dq = torch.zeros(q.shape, dtype=lse.dtype, device=q.device)
            dk = torch.empty_like(k)
            dv = torch.empty_like(v)
            flashattn_bwd(heads, kv_heads, dim, ctx.causal, ctx.sm_scale,
                          dtype=ctx.dtype, **tiles["bwd"])(
                q, k, v, do, lse, delta, dq, dk, dv)
            return dq.to(q.dtype), dk, dv, None, None

    _function = FlashAttention
    return _function


def flash_attention(q: Any, k: Any, v: Any, causal: bool = False,
                    sm_scale: Optional[float] = None) -> Any:
    """softmax(Q K^T * sm_scale [causal mask]) V for torch tensors
    ``[batch, seq, heads, dim]`` (K and V may have fewer heads: GQA), with a
    backward pass: dQ, dK and dV come from Kiln kernels. ``sm_scale``
    defaults to ``1 / sqrt(dim)``."""
    if sm_scale is not None and not (isinstance(sm_scale, (int, float))
                                     and math.isfinite(sm_scale)):
        raise kiln.KilnArgumentError(
            f"kiln.ops.flash_attention: sm_scale must be a finite number; "
            f"got {sm_scale!r}")
    return _autograd().apply(q, k, v, causal,
                             None if sm_scale is None else float(sm_scale))


__all__ = ["attention_bwd_preprocess", "flash_attention", "flashattn_bwd",
           "flashattn_fwd"]
