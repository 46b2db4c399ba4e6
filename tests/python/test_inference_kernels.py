"""Inference kernels written the TileLang way (tests/python/kernels.py), on
the CPU target against NumPy with ragged shapes: paged decode attention
(two T.Kernel blocks sharing T.alloc_global tensors) and an element-wise
atomic scatter-add."""

import numpy as np
import pytest

import kiln
import kiln.language as T
import kernels


def paged_decode_reference(q, kc, vc, table, lens):
    """softmax(q K^T / sqrt(d)) V per query head over each sequence's
    tokens gathered from its pages; zeros for an empty sequence."""
    batch, heads, dim = q.shape
    page = kc.shape[1]
    group = heads // kc.shape[2]
    out = np.zeros((batch, heads, dim))
    for b in range(batch):
        t = np.arange(lens[b])
        rows = table[b, t // page] * page + t % page
        k = kc.reshape(-1, kc.shape[2], dim)[rows].astype(np.float64)
        v = vc.reshape(-1, vc.shape[2], dim)[rows].astype(np.float64)
        for h in range(heads):
            if lens[b] == 0:
                continue
            s = k[:, h // group] @ q[b, h].astype(np.float64) / np.sqrt(dim)
            p = np.exp(s - s.max())
            out[b, h] = p @ v[:, h // group] / p.sum()
    return out


def block_table(rng, lens, page):
    """Each sequence's pages distinct, in a shuffled order among two spare
    ones; unused entries name page 0. Returns (table, max_pages, pages)."""
    batch = len(lens)
    max_pages = max(1, max(-(-n // page) for n in lens))
    pages = batch * max_pages + 2
    order = rng.permutation(pages).astype(np.int32)
    table = np.zeros((batch, max_pages), np.int32)
    for b, n in enumerate(lens):
        used = -(-n // page)
        table[b, :used] = order[b * max_pages:b * max_pages + used]
    return table, max_pages, pages


def paged_inputs(rng, lens, heads, kv_heads, page, dim=128):
    batch = len(lens)
    table, max_pages, pages = block_table(rng, lens, page)
    q = rng.uniform(-1, 1, (batch, heads, dim)).astype(np.float16)
    kc = rng.uniform(-1, 1, (pages, page, kv_heads, dim)).astype(np.float16)
    vc = rng.uniform(-1, 1, (pages, page, kv_heads, dim)).astype(np.float16)
    return q, kc, vc, table, np.array(lens, np.int32), max_pages, pages


@pytest.mark.parametrize("page,block_n,splits,heads,kv_heads", [
    (16, 16, 1, 8, 2),    # one split, one chunk per page, group 4
    (32, 16, 3, 6, 1),    # two chunks per page, group 6, three splits
    (16, 16, 5, 4, 4),    # MHA, more splits than a short sequence's chunks
])
def test_paged_decode_matches_numpy(rng, page, block_n, splits, heads,
                                    kv_heads):
    lens = [37, 1, 0, 2 * page + 5]
    q, kc, vc, table, lens_t, max_pages, pages = paged_inputs(
        rng, lens, heads, kv_heads, page)
    kernel = kernels.paged_decode(len(lens), heads, kv_heads, 128, page,
                                  max_pages, pages, num_split=splits,
                                  block_N=block_n, dtype="float16")
    assert len(kernel.prim_func.kernels) == 2
    out = kernel(q, kc, vc, table, lens_t)
    ref = paged_decode_reference(q, kc, vc, table, lens)
    # P rounded to f16 before the second gemm; f16 output.
    np.testing.assert_allclose(out.astype(np.float64), ref, atol=4e-3,
                               rtol=1e-2)
    assert not out[2].any()  # the empty sequence


def test_paged_decode_ir_launches_split_then_combine():
    kernel = kernels.paged_decode(2, 8, 2, 128, 16, 4, 9, num_split=4,
                                  dtype="float16")
    names = [k.name for k in kernel.prim_func.kernels]
    assert names == ["main_k0", "main_k1"]
    ir = kernel.ir
    # Each kernel takes the prim_func's parameters, then the shared
    # tensors; the unused variant beside it was never translated.
    assert ir.count("O_part: f32[2, 8, 4, 128]") == 2
    assert "thread_binding" not in ir


def mla_reference(q, q_pe, kv, k_pe, table, lens, page):
    """MLA decode: every head attends to the one latent KV; the score
    covers the latent and the RoPE dims (scale 1/sqrt(d + dpe)), the value
    is the latent part."""
    batch, heads, d = q.shape
    dpe = q_pe.shape[2]
    out = np.zeros((batch, heads, d))
    for b in range(batch):
        if lens[b] == 0:
            continue
        t = np.arange(lens[b])
        rows = table[b, t // page] * page + t % page
        c = kv[rows, 0].astype(np.float64)
        r = k_pe[rows, 0].astype(np.float64)
        s = (q[b].astype(np.float64) @ c.T +
             q_pe[b].astype(np.float64) @ r.T) / np.sqrt(d + dpe)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[b] = p @ c / p.sum(axis=1, keepdims=True)
    return out


@pytest.mark.parametrize("page,block_n,splits,heads", [
    (64, 64, 1, 16),    # a TP-8 shard of DeepSeek-V3's heads, one split
    (64, 32, 3, 16),    # two chunks per page, three splits
    (32, 32, 4, 128),   # all 128 heads (two tiles), more splits than chunks
])
def test_mla_decode_matches_numpy(rng, page, block_n, splits, heads):
    lens = [70, 1, 0, 2 * page + 9]
    d, dpe = 512, 64
    batch = len(lens)
    table, max_pages, pages = block_table(rng, lens, page)
    f16 = np.float16
    q = rng.uniform(-1, 1, (batch, heads, d)).astype(f16)
    q_pe = rng.uniform(-1, 1, (batch, heads, dpe)).astype(f16)
    kv = rng.uniform(-1, 1, (pages * page, 1, d)).astype(f16)
    k_pe = rng.uniform(-1, 1, (pages * page, 1, dpe)).astype(f16)
    kernel = kernels.mla_decode_paged(batch, heads, max_pages * page, d, dpe,
                                      page, pages, block_N=block_n,
                                      num_split=splits, dtype="float16")
    # The partial chunk is masked on the first iteration only (T.If).
    assert "if kr == 0 {" in kernel.ir
    out = kernel(q, q_pe, kv, k_pe, table, np.array(lens, np.int32))
    ref = mla_reference(q, q_pe, kv, k_pe, table, lens, page)
    np.testing.assert_allclose(out.astype(np.float64), ref, atol=4e-3,
                               rtol=1e-2)
    assert not out[2].any()  # the empty sequence


@pytest.mark.parametrize("dtype", ("float32", "int32"))
def test_element_atomic_add_sums_repeated_indices(rng, dtype):
    rows, dim, tokens = 7, 96, 203
    kernel = kernels.scatter_add(rows, dim, tokens, dtype=dtype)
    assert "Grad[idx[i], d] += dy[i, d]" in kernel.ir
    dy = rng.integers(-50, 50, (tokens, dim)).astype(dtype)
    index = rng.integers(0, rows, tokens).astype(np.int32)
    index[::9] = rows + 3  # out of range: skipped
    grad = rng.integers(-5, 5, (rows, dim)).astype(dtype)
    want = grad.astype(np.float64)
    for t in range(tokens):
        if index[t] < rows:
            want[index[t]] += dy[t]
    kernel(dy, index, grad)
    np.testing.assert_array_equal(grad, want.astype(dtype))


def test_element_atomic_add_outside_parallel_is_refused():
    @T.prim_func
    def main(X: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            T.atomic_add(X[0], 1.0)
    with pytest.raises(kiln.KilnSourceError,
                       match="add one element inside T.Parallel"):
        main.ir


def test_fragment_elements_outside_parallel_combine_splits(rng):
    # TileLang's combine: fragment elements as running scalars.
    batch, heads, splits = 3, 5, 7
    lse = rng.uniform(-3, 3, (batch, heads, splits)).astype(np.float32)
    part = rng.uniform(-1, 1, (batch, heads, splits, 128)).astype(np.float32)
    kernel = kernels.split_combine(batch, heads, splits)
    out = kernel(lse, part)
    w = np.exp2(lse - lse.max(axis=-1, keepdims=True))
    want = (part * (w / w.sum(axis=-1, keepdims=True))[..., None]).sum(2)
    np.testing.assert_allclose(out.astype(np.float64), want, atol=2e-3,
                               rtol=2e-3)


@pytest.mark.parametrize("block_M,block_N,threads", [(64, 128, 128),
                                                     (128, 64, 256)])
def test_moe_grouped_gemm_matches_numpy(rng, block_M, block_N, threads):
    # Skewed segments: empty experts, a one-row one, several tiles, ends
    # inside a tile; ragged N and K.
    counts = [130, 0, 1, 64, 7, 0]
    offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
    experts, n, k = len(counts), 100, 70
    m = int(offsets[-1])
    kernel = kernels.moe_gemm(experts, n, k, block_M=block_M,
                              block_N=block_N, block_K=32, threads=threads,
                              dtype="float16")
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    w = rng.uniform(-1, 1, (experts, n, k)).astype(np.float16)
    tiles = kernels.moe_tile_map(offsets, block_M)
    assert len(tiles) == sum(-(-c // block_M) for c in counts)
    y = kernel(a, w, offsets, tiles)
    want = np.zeros((m, n))
    for e in range(experts):
        s, t = offsets[e], offsets[e + 1]
        want[s:t] = a[s:t].astype(np.float64) @ w[e].astype(np.float64).T
    np.testing.assert_allclose(y.astype(np.float64), want, atol=3e-2,
                               rtol=1e-2)


@pytest.mark.parametrize("block_M,threads", [(64, 128), (128, 256)])
def test_blockwise_scaled_gemm_promotes_every_group(rng, block_M, threads):
    # TileLang's FP8 blockwise GEMM with f16 operands (NumPy has no FP8):
    # ragged M and N, a last K-group of 32 columns, and scales that differ
    # per group, so a scale applied to the wrong group's products fails.
    m, n, k = 150, 200, 288
    kernel = kernels.fp8_blockwise_gemm(n, k, block_M=block_M,
                                        threads=threads, in_dtype="float16",
                                        out_dtype="float32")
    a = rng.integers(-4, 5, (m, k)).astype(np.float16)
    b = rng.integers(-4, 5, (n, k)).astype(np.float16)
    groups = -(-k // 128)
    sa = rng.uniform(0.01, 1, (m, groups)).astype(np.float32)
    sb = rng.uniform(0.01, 1, (-(-n // 128), groups)).astype(np.float32)
    c = kernel(a, b, sa, sb)
    want = np.zeros((m, n))
    for g in range(groups):
        cols = slice(g * 128, (g + 1) * 128)
        part = a[:, cols].astype(np.float64) @ b[:, cols].astype(np.float64).T
        want += part * sa[:, g:g + 1] * np.repeat(sb[:, g], 128)[None, :n]
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-3)


def varlen_reference(q, k, v, cu_q, cu_k, causal):
    """softmax(Q K^T / sqrt(d)) V per packed sequence and query head, the
    KV head shared by heads // kv_heads query heads; the causal mask at the
    top left (query i sees keys 0..i), as TileLang's varlen example has it."""
    heads, dim = q.shape[1], q.shape[2]
    group = heads // k.shape[1]
    out = np.zeros(q.shape)
    for b in range(len(cu_q) - 1):
        rows, keys = slice(cu_q[b], cu_q[b + 1]), slice(cu_k[b], cu_k[b + 1])
        for h in range(heads):
            s = (q[rows, h].astype(np.float64)
                 @ k[keys, h // group].astype(np.float64).T) / np.sqrt(dim)
            if causal:
                i, j = np.indices(s.shape)
                s = np.where(j <= i, s, -np.inf)
            if s.shape[1] == 0:
                continue
            p = np.exp(s - s.max(axis=1, keepdims=True))
            out[rows, h] = (p @ v[keys, h // group].astype(np.float64)
                            / p.sum(axis=1, keepdims=True))
    return out


@pytest.mark.parametrize("causal,block_M,block_N,threads", [
    (False, 64, 64, 128), (True, 64, 64, 128), (True, 128, 128, 256)])
def test_varlen_gqa_prefill_matches_numpy(rng, causal, block_M, block_N,
                                          threads):
    # Packed sequences: a whole tile, one token, one longer than two tiles,
    # one ending inside a tile; full attention also gets key lengths that
    # differ from the query lengths (and an empty query sequence).
    lq = [64, 1, 150, 23] + ([] if causal else [0])
    lk = lq if causal else [70, 3, 150, 9, 5]
    cu_q = np.concatenate([[0], np.cumsum(lq)]).astype(np.int32)
    cu_k = np.concatenate([[0], np.cumsum(lk)]).astype(np.int32)
    heads, groups, dim = 4, 2, 64
    q = rng.uniform(-1, 1, (cu_q[-1], heads, dim)).astype(np.float16)
    k = rng.uniform(-1, 1, (cu_k[-1], heads // groups, dim)).astype(np.float16)
    v = rng.uniform(-1, 1, (cu_k[-1], heads // groups, dim)).astype(np.float16)
    kernel = kernels.flashattn_varlen(
        len(lq), groups, int(cu_q[-1]), int(cu_k[-1]), heads, dim, causal,
        block_M=block_M, block_N=block_N, num_stages=2, threads=threads)
    out = kernel(q, k, v, cu_q, cu_k, max(lq))
    np.testing.assert_allclose(out.astype(np.float64),
                               varlen_reference(q, k, v, cu_q, cu_k, causal),
                               atol=4e-3, rtol=1e-2)


def rope_reference(x, pos, cos_sin, rot, is_neox):
    """x [tokens, heads, head_size] rotated by each token's position (f64);
    a position outside the table rotates by cosine and sine 0."""
    half = rot // 2
    out = x.astype(np.float64).copy()
    inside = (pos >= 0) & (pos < len(cos_sin))
    table = np.where(inside[:, None], cos_sin[np.clip(pos, 0,
                                                      len(cos_sin) - 1)], 0)
    c, s = table[:, None, :half], table[:, None, half:]
    if is_neox:
        x1, x2 = out[..., :half].copy(), out[..., half:rot].copy()
        out[..., :half], out[..., half:rot] = x1 * c - x2 * s, x2 * c + x1 * s
    else:
        x1, x2 = out[..., 0:rot:2].copy(), out[..., 1:rot:2].copy()
        out[..., 0:rot:2], out[..., 1:rot:2] = x1 * c - x2 * s, x2 * c + x1 * s
    return out


@pytest.mark.parametrize("is_neox,rotary_dim,heads,kv_heads,block_T", [
    (True, None, 8, 2, 16),   # Llama: rotate-half over the head, GQA 4
    (False, None, 4, 4, 32),  # GPT-J: interleaved pairs, MHA
    (True, 64, 6, 2, 16),     # partial rotary: dims past 64 pass through
    (False, 32, 3, 1, 16),    # interleaved partial, MQA
])
def test_rope_kv_cache_write_matches_numpy(rng, is_neox, rotary_dim, heads,
                                           kv_heads, block_T):
    tokens, pages, page, dim, max_pos = 45, 6, 16, 128, 300
    rot = rotary_dim or dim
    f16 = np.float16
    q = rng.uniform(-1, 1, (tokens, heads, dim)).astype(f16)
    k = rng.uniform(-1, 1, (tokens, kv_heads, dim)).astype(f16)
    v = rng.uniform(-1, 1, (tokens, kv_heads, dim)).astype(f16)
    pos = rng.integers(0, max_pos, tokens).astype(np.int32)
    pos[[3, 9]] = [-1, max_pos]  # outside the table
    freqs = 10000.0 ** (-np.arange(0, rot, 2) / rot)
    angles = np.arange(max_pos)[:, None] * freqs[None, :]
    cos_sin = np.concatenate([np.cos(angles), np.sin(angles)],
                             axis=1).astype(np.float32)
    slots = rng.permutation(pages * page)[:tokens].astype(np.int32)
    slots[2::5] = -1  # padding tokens
    kc = rng.uniform(-1, 1, (pages, page, kv_heads, dim)).astype(f16)
    vc = rng.uniform(-1, 1, (pages, page, kv_heads, dim)).astype(f16)
    want_q = rope_reference(q, pos, cos_sin, rot, is_neox)
    k_rot = rope_reference(k, pos, cos_sin, rot, is_neox)
    want_kc = kc.astype(np.float64).reshape(pages * page, kv_heads, dim)
    want_vc = vc.astype(np.float64).reshape(pages * page, kv_heads, dim)
    keep = slots >= 0
    want_kc[slots[keep]] = k_rot[keep]
    want_vc[slots[keep]] = v[keep]
    kernel = kernels.rope_kv_cache_write(heads, kv_heads, dim, rotary_dim,
                                         is_neox, block_T, dtype="float16")
    kernel(pos, q, k, v, cos_sin, slots, kc, vc)
    tol = dict(atol=2e-3, rtol=2e-3)
    np.testing.assert_allclose(q.astype(np.float64), want_q, **tol)
    np.testing.assert_allclose(
        kc.astype(np.float64).reshape(want_kc.shape), want_kc, **tol)
    np.testing.assert_array_equal(
        vc.astype(np.float64).reshape(want_vc.shape), want_vc)
