"""Python ``while`` in a kernel body (issue 25): the counted induction form
``while V < BOUND: ...; V = V + STEP`` lowered to a serial loop
(kiln/_dsl/while_loop.py).

The main user is a persistent FlashAttention forward pass: a grid of
``walkers`` blocks per (batch, head) where each block starts at its own
query tile and strides over the rest, the pattern TileLang's AMD attention
examples use. ``walked_attention`` below is written for this test in that
style (a ``T.alloc_var`` tile index, ``T.use_swizzle``, an online softmax
kept in fragments, ``T.gemm`` with a warp policy, causal masking and
grouped key/value heads) and is checked on the CPU target against a float64
torch computation, at shapes where the walk is ragged: the tile count not a
multiple of the walker count, and fewer tiles than walkers.
"""

import math

import numpy as np
import pytest

import kiln
import kiln.language as T
from kiln.errors import KilnSourceError

from source_lines import line_ending_with

torch = pytest.importorskip("torch")


def line_of(marker):
    return line_ending_with(__file__, marker)


# --- a persistent FlashAttention forward pass -------------------------------

def attention_reference(q, k, v, causal, kv_groups):
    """softmax(q k^T / sqrt(d)) v in float64 for (batch, seq, heads, d)
    tensors; query head ``h`` reads key/value head ``h // kv_groups``."""
    batch, seq, heads, d = q.shape
    # (b, s, kv_heads, groups, d) -> (b, kv_heads, groups, s, d)
    qg = q.double().reshape(batch, seq, heads // kv_groups, kv_groups, d)
    qg = qg.permute(0, 2, 3, 1, 4)
    kg = k.double().permute(0, 2, 1, 3).unsqueeze(2)
    vg = v.double().permute(0, 2, 1, 3).unsqueeze(2)
    logits = torch.matmul(qg, kg.transpose(-1, -2)) / math.sqrt(d)
    if causal:
        future = torch.ones(seq, seq, dtype=torch.bool).triu(diagonal=1)
        logits = logits.masked_fill(future, float("-inf"))
    out = torch.matmul(torch.softmax(logits, dim=-1), vg)
    return out.permute(0, 3, 1, 2, 4).reshape(batch, seq, heads, d)


@kiln.jit(out_idx=[3])
def walked_attention(batch, heads, seq_len, head_dim, causal, kv_groups,
                     tile_q, tile_kv, walkers, threads=64, stages=1,
                     panel=4):
    qo_shape = (batch, seq_len, heads, head_dim)
    kv_shape = (batch, seq_len, heads // kv_groups, head_dim)
    half, acc = "float16", "float32"
    # exp(x / sqrt(d)) == exp2(x * log2(e) / sqrt(d))
    log2_scale = math.log2(math.e) / math.sqrt(head_dim)
    ragged_kv = seq_len % tile_kv != 0

    @T.prim_func
    def attend(Qm: T.Tensor(qo_shape, half), Km: T.Tensor(kv_shape, half),
               Vm: T.Tensor(kv_shape, half), Om: T.Tensor(qo_shape, half)):
        with T.Kernel(walkers, batch * heads, threads=threads) as (lane, bh):
            T.use_swizzle(panel)
            b = bh // heads
            h = bh % heads
            kv_head = h // kv_groups
            n_tiles = T.ceildiv(seq_len, tile_q)
            all_kv = T.ceildiv(seq_len, tile_kv)

            # Block `lane` takes query tiles lane, lane + walkers, ...
            tile = T.alloc_var(T.int32)
            tile = lane
            while tile < n_tiles:
                here = tile
                row0 = here * tile_q

                q_s = T.alloc_shared((tile_q, head_dim), half)
                k_s = T.alloc_shared((tile_kv, head_dim), half)
                v_s = T.alloc_shared((tile_kv, head_dim), half)
                logits = T.alloc_fragment((tile_q, tile_kv), acc)
                probs = T.alloc_fragment((tile_q, tile_kv), half)
                out_f = T.alloc_fragment((tile_q, head_dim), acc)
                hi = T.alloc_fragment((tile_q,), acc)
                hi_before = T.alloc_fragment((tile_q,), acc)
                shrink = T.alloc_fragment((tile_q,), acc)
                denom = T.alloc_fragment((tile_q,), acc)
                tile_sum = T.alloc_fragment((tile_q,), acc)

                T.copy(Qm[b, row0:row0 + tile_q, h, :], q_s)
                T.clear(out_f)
                T.clear(denom)
                T.fill(hi, -T.infinity(acc))

                # Under the causal mask no key past this tile's last row
                # counts, so the key walk stops at the diagonal.
                if causal:
                    kv_tiles = T.min(T.ceildiv(row0 + tile_q, tile_kv), all_kv)
                else:
                    kv_tiles = all_kv

                for kb in T.Pipelined(kv_tiles, num_stages=stages):
                    col0 = kb * tile_kv
                    T.copy(Km[b, col0:col0 + tile_kv, kv_head, :], k_s)
                    T.copy(Vm[b, col0:col0 + tile_kv, kv_head, :], v_s)
                    T.gemm(q_s, k_s, logits, transpose_B=True,
                           clear_accum=True,
                           policy=T.GemmWarpPolicy.FullRow)
                    if causal:
                        for i, j in T.Parallel(tile_q, tile_kv):
                            logits[i, j] = T.if_then_else(
                                col0 + j <= row0 + i, logits[i, j],
                                -T.infinity(acc))
                    if ragged_kv:
                        # keys past seq_len were loaded as padding
                        for i, j in T.Parallel(tile_q, tile_kv):
                            logits[i, j] = T.if_then_else(
                                col0 + j < seq_len, logits[i, j],
                                -T.infinity(acc))

                    # Raise each row's running maximum, then shrink what
                    # was summed under the old one by exp2 of the gap.
                    T.copy(hi, hi_before)
                    T.reduce_max(logits, hi, dim=1, clear=False)
                    for i in T.Parallel(tile_q):
                        shrink[i] = T.exp2((hi_before[i] - hi[i]) *
                                           log2_scale)
                    for i, j in T.Parallel(tile_q, tile_kv):
                        logits[i, j] = T.exp2((logits[i, j] - hi[i]) *
                                              log2_scale)
                    T.reduce_sum(logits, tile_sum, dim=1)
                    for i in T.Parallel(tile_q):
                        denom[i] = denom[i] * shrink[i] + tile_sum[i]
                    for i, j in T.Parallel(tile_q, head_dim):
                        out_f[i, j] = out_f[i, j] * shrink[i]
                    T.copy(logits, probs)
                    T.gemm(probs, v_s, out_f,
                           policy=T.GemmWarpPolicy.FullRow)

                for i, j in T.Parallel(tile_q, head_dim):
                    out_f[i, j] = out_f[i, j] / denom[i]
                T.copy(out_f, Om[b, row0:row0 + tile_q, h, :])
                tile = here + walkers

    return attend


# (batch, heads, seq_len, head_dim, causal, kv_groups, walkers), tiles of
# 16: 5 query tiles walked by 3 or 2 blocks (the last lap partial), a
# grouped-query causal case with a partial last tile, and 8 walkers for 5
# tiles (three blocks never enter the loop).
ATTENTION_CASES = [
    (1, 2, 80, 32, False, 1, 3),
    (1, 2, 80, 32, True, 1, 2),
    (2, 4, 72, 16, True, 2, 3),
    (1, 2, 80, 32, False, 1, 8),
]


@pytest.mark.parametrize("batch,heads,seq,dim,causal,groups,walkers",
                         ATTENTION_CASES)
def test_walked_attention_matches_torch(batch, heads, seq, dim, causal,
                                        groups, walkers):
    gen = torch.Generator().manual_seed(1000 * walkers + seq)
    q, k, v = (torch.randn(batch, seq, nh, dim, generator=gen).half()
               for nh in (heads, heads // groups, heads // groups))
    kernel = walked_attention(batch, heads, seq, dim, causal, groups,
                              tile_q=16, tile_kv=16, walkers=walkers)
    got = kernel(q, k, v)
    want = attention_reference(q, k, v, causal, groups)
    torch.testing.assert_close(got.double(), want, rtol=1e-2, atol=1e-2)


def test_walked_attention_lowers_the_while_to_a_serial_loop():
    ir = walked_attention(1, 2, 80, 32, False, 1, tile_q=16, tile_kv=16,
                          walkers=3).ir
    # the T.alloc_var's start is read once; 5 tiles, stride 3
    assert "let tile_1 = tile[0]" in ir
    assert "for tile_it in serial(max(ceildiv(5 - tile_1, 3), 0)) {" in ir
    assert "let tile_2 = tile_1 + tile_it * 3" in ir
    assert "tile[0] = tile_1 + max(ceildiv(5 - tile_1, 3), 0) * 3" in ir


# --- a persistent row walk, checked against numpy --------------------------

def walk_kernel(n, block, split, op="<"):
    """Block ``bs`` of ``split`` scales rows bs, bs + split, ... of A into
    B and records in Visits[bs] how many rows it walked and where its
    variable ended."""
    nb = -(-n // block)

    @T.prim_func
    def main(A: T.Tensor((n, 4), "float32"), B: T.Tensor((n, 4), "float32"),
             Visits: T.Tensor((split, 2), "int32")):
        with T.Kernel(split, threads=32) as (bs,):
            count = T.alloc_var(T.int32, 0)
            row = T.alloc_var(T.int32)
            row = bs
            if op == "<":
                while row < nb:
                    tile = T.alloc_fragment((block, 4), "float32")
                    T.copy(A[row * block, 0], tile)
                    for i, j in T.Parallel(block, 4):
                        tile[i, j] = tile[i, j] * 2 + row
                    T.copy(tile, B[row * block, 0])
                    count = count + 1
                    row += split
            else:
                while nb - 1 >= row:
                    tile = T.alloc_fragment((block, 4), "float32")
                    T.copy(A[row * block, 0], tile)
                    for i, j in T.Parallel(block, 4):
                        tile[i, j] = tile[i, j] * 2 + row
                    T.copy(tile, B[row * block, 0])
                    count = count + 1
                    row = split + row
            Visits[bs, 0] = count
            Visits[bs, 1] = row

    return kiln.compile(main)


def _walk_reference(a, block, split):
    nb = -(-a.shape[0] // block)
    rows = np.arange(a.shape[0]) // block
    visits = np.array([[len(range(s, nb, split)),
                        s + len(range(s, nb, split)) * split]
                       for s in range(split)], np.int32)
    return a * 2 + rows[:, None], visits


@pytest.mark.parametrize("op", ["<", ">="])
@pytest.mark.parametrize("n,block,split", [(37, 8, 3), (40, 8, 2),
                                           (9, 4, 5), (3, 4, 2)])
def test_persistent_walk_matches_numpy(n, block, split, op):
    kernel = walk_kernel(n, block, split, op)
    a = np.random.default_rng(n + split).standard_normal(
        (n, 4)).astype(np.float32)
    b = np.full((n, 4), np.nan, np.float32)
    visits = np.full((split, 2), -1, np.int32)
    kernel(a, b, visits)
    want_b, want_visits = _walk_reference(a, block, split)
    np.testing.assert_allclose(b, want_b, rtol=1e-6)
    np.testing.assert_array_equal(visits, want_visits)


def test_while_with_a_symbolic_bound_and_a_let_variable():
    M = T.symbolic("M")

    @T.prim_func
    def main(A: T.Tensor((M,), "float32"), B: T.Tensor((M,), "float32"),
             Last: T.Tensor((1,), "int32")):
        with T.Kernel(1, threads=32) as (bx,):
            i = bx * 2  # a let, rebound after the loop
            while i <= M - 1:
                t = T.alloc_fragment((2,), "float32")
                T.copy(A[i], t)
                for j in T.Parallel(2):
                    t[j] = t[j] + 1
                T.copy(t, B[i])
                i = i + 2
            Last[0] = i

    kernel = kiln.compile(main)
    assert "for i_it in serial(max(ceildiv(M - 1 - i + 1, 2), 0)) {" \
        in kernel.ir
    for m in (1, 6, 7):
        a = np.arange(m, dtype=np.float32)
        b = np.zeros(m, np.float32)
        last = np.zeros(1, np.int32)
        kernel(a, b, last)
        np.testing.assert_array_equal(b, a + 1)
        assert last[0] == -(-m // 2) * 2


def test_while_over_python_values_counts_in_python():
    @T.prim_func
    def main(B: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as (bx,):
            k = 1
            while 7 > k:
                B[k] = 1.0
                k += 3
            B[0] = k

    kernel = kiln.compile(main)
    assert "for k_it in serial(2) {" in kernel.ir
    b = np.zeros(8, np.float32)
    kernel(b)
    np.testing.assert_array_equal(b, [7, 1, 0, 0, 1, 0, 0, 0])


# --- unsupported whiles: located errors -------------------------------------

def error_kernel(case):
    """One unsupported while per case; each marked line is the error's."""
    n = T.symbolic("n")
    step = 2 if case != "zero_step" else 0

    @T.prim_func
    def main(A: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as (bx,):
            i = T.alloc_var(T.int32)
            lim = T.alloc_var(T.int32)
            i = 0
            lim = n
            if case == "writes_bound":
                while i < lim:
                    lim = lim - 1  # writes_bound
                    i = i + 1
            elif case == "writes_step":
                s = T.alloc_var(T.int32)
                s = 1
                while i < n:
                    s = 2  # writes_step
                    i += s
            elif case == "update_not_last":
                while i < n:
                    i = i + 1  # update_not_last
                    A[0] = 1.0
            elif case == "no_update":
                while i < n:
                    A[0] = 1.0  # no_update
            elif case == "zero_step":
                while i < n:
                    A[0] = 1.0
                    i = i + step  # zero_step
            elif case == "negative_step":
                while i < n:
                    A[0] = 1.0
                    i += -1  # negative_step
            elif case == "break":
                while i < n:
                    if A[0] > 0:
                        break  # break
                    i += 1
            elif case == "continue":
                while i < n:
                    if A[0] > 0:
                        continue  # continue
                    i += 1
            elif case == "condition":
                while i != n:  # condition
                    i += 1
            elif case == "and_condition":
                while i < n and A[0] > 0:  # and_condition
                    i += 1
            elif case == "else":
                while i < n:  # else
                    i += 1
                else:
                    A[0] = 1.0
            elif case == "float_var":
                x = 0.5
                while x < n:  # float_var
                    x += 1

    return main


ERRORS = {
    "writes_bound": "the while body writes 'lim', which the bound 'lim' "
                    "reads: the bound must not change in the loop",
    "writes_step": "the while body writes 's', which the step 's' reads: "
                   "the step must not change in the loop",
    "update_not_last": "'i' is written here, before the last statement of "
                       "the while body",
    "no_update": "the last statement of the while body must update 'i' as "
                 "`i = i + STEP` or `i += STEP`; got 'A[0] = 1.0'",
    "zero_step": "the while step 0 is not positive: the loop would not end",
    "negative_step": "the while step -1 is not positive",
    "break": "`break` in a while loop is not supported",
    "continue": "`continue` in a while loop is not supported",
    "condition": "unsupported while condition 'i != n': write `while V < "
                 "BOUND:`",
    "and_condition": "unsupported while condition 'i < n and A[0] > 0'",
    "else": "while-else is not supported in a kernel",
    "float_var": "the while variable must be an integer; got '0.5'",
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_unsupported_while_is_a_located_error(case):
    with pytest.raises(KilnSourceError) as info:
        kiln.compile(error_kernel(case))
    assert ERRORS[case] in str(info.value)
    assert info.value.lineno == line_of(f"# {case}")
    assert info.value.filename == __file__
