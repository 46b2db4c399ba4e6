"""``T.reshape`` / ``T.view``: a tile's elements seen with another shape.

Element accesses of the view are accesses of the base tile; a tile op that
takes the view works on a tile of its shape, copied in and out around the
op (kiln/_dsl/tile_views.py). Kernels written as TileLang's DeepSeek
indexer writes them run on the CPU target against NumPy with ragged
shapes; misuse is a located error."""

import numpy as np
import pytest

import kiln
import kiln.language as T
from test_errors import line_of, load

N = T.symbolic("N")


@kiln.jit(out_idx=[-1])
def weighted_head_sum(block_n=32, block_q=4, heads=8, dim=16):
    # As the lightning indexer: scores [n, q * h] from one GEMM, seen as
    # [n, q, h], weighted per (q, h), then summed over h by a reduce.
    @T.prim_func
    def main(K: T.Tensor((N, dim), "float32"),
             Q: T.Tensor((block_q * heads, dim), "float32"),
             W: T.Tensor((block_q, heads), "float32"),
             Out: T.Tensor((N, block_q), "float32")):
        with T.Kernel(T.ceildiv(N, block_n), threads=128) as bx:
            k_s = T.alloc_shared((block_n, dim), "float32")
            q_s = T.alloc_shared((block_q * heads, dim), "float32")
            s = T.alloc_fragment((block_n, block_q * heads), "float32")
            s_r = T.reshape(s, (block_n, block_q, heads))
            w = T.alloc_fragment((block_q, heads), "float32")
            out = T.alloc_fragment((block_n, block_q), "float32")
            T.copy(K[bx * block_n, 0], k_s)
            T.copy(Q, q_s)
            T.copy(W, w)
            T.gemm(k_s, q_s, s, transpose_B=True, clear_accum=True)
            for n, q, h in T.Parallel(block_n, block_q, heads):
                s_r[n, q, h] = T.max(s_r[n, q, h], 0) * w[q, h]
            T.reduce_sum(s_r, out, dim=-1)
            T.copy(out, Out[bx * block_n, 0])
    return main


def test_a_reshaped_fragment_is_indexed_and_reduced(backend, rng):
    k = weighted_head_sum()
    # The T.Parallel over the view's shape runs over the base's index
    # space (the GEMM's accumulator stays in its own layout on GPUs).
    assert "s[s_0, s_1] = max(s[s_0, s_1], 0) * w[s_1 / 8, s_1 % 8]" in \
        k.ir, k.ir
    n = 3 * 32 + int(rng.integers(1, 31))
    keys = rng.standard_normal((n, 16)).astype(np.float32)
    qs = rng.standard_normal((32, 16)).astype(np.float32)
    w = rng.standard_normal((4, 8)).astype(np.float32)
    s = np.maximum(keys @ qs.T, 0).reshape(n, 4, 8) * w
    np.testing.assert_allclose(k(keys, qs, w), s.sum(-1), rtol=1e-4,
                               atol=1e-4)


@kiln.jit(out_idx=[-1])
def split_and_merge(block=64):
    # A flat shared tile seen as [8, block / 8] and a 2-D fragment seen
    # flat: element stores through one view, a copy out of another.
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=64) as bx:
            flat = T.alloc_shared((block,), "float32")
            grid = T.view(flat, shape=[8, block // 8])
            acc = T.alloc_fragment((8, block // 8), "float32")
            acc_flat = T.reshape(acc, [block])
            T.clear(grid)
            T.copy(X[bx * block], flat)
            for r, c in T.Parallel(8, block // 8):
                grid[r, c] = grid[r, c] * 2.0 + r
            T.copy(grid, acc)
            for i in T.Parallel(block):
                acc_flat[i] += 1.0
            T.copy(acc_flat, Y[bx * block])
    return main


def test_views_split_and_merge_dims(backend, rng):
    k = split_and_merge()
    n = 2 * 64 + int(rng.integers(1, 63))
    x = rng.standard_normal(n).astype(np.float32)
    rows = (np.arange(n) % 64) // 8
    np.testing.assert_allclose(k(x), x * 2 + rows + 1, rtol=1e-6)
    assert "alloc fragment acc_flat" in k.ir  # (a tile op took it)
    assert "clear flat" in k.ir  # (a whole view's base, filled directly)


@kiln.jit(out_idx=[-1])
def flat_copy(block=64):
    # T.reshape of global tensors: views of their storage, flattened.
    @T.prim_func
    def main(X: T.Tensor((N, 16), "float32"),
             Y: T.Tensor((N, 16), "float32")):
        flat_x = T.reshape(X, (N * 16,))
        with T.Kernel(T.ceildiv(N * 16, block), threads=64) as bx:
            t = T.alloc_fragment((block,), "float32")
            flat_y = T.reshape(Y, (N * 16,))
            T.copy(flat_x[bx * block], t)
            for i in T.Parallel(block):
                t[i] = t[i] + 1.0
            T.copy(t, flat_y[bx * block])
    return main


def test_a_reshaped_tensor_is_a_view_of_its_storage(backend, rng):
    k = flat_copy()
    n = int(rng.integers(5, 20))
    x = rng.standard_normal((n, 16)).astype(np.float32)
    np.testing.assert_allclose(k(x), x + 1, rtol=1e-6)


def test_a_view_of_another_size_is_located(tmp_path):
    mod, path = load(tmp_path, """
        @T.prim_func
        def main(X: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                s = T.alloc_fragment((64,), "float32")
                v = T.reshape(s, (8, 9))  # HERE
                T.copy(X, s)
        """)
    with pytest.raises(kiln.KilnSourceError,
                       match=r"72 elements, but 's' \[64\] holds 64") as info:
        mod.main.ir
    assert f"{path}:{line_of(path, '# HERE')}" in str(info.value)


def test_a_view_of_another_dtype_is_located(tmp_path):
    mod, path = load(tmp_path, """
        @T.prim_func
        def main(X: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                s = T.alloc_shared((64,), "bfloat16")
                v = T.view(s, shape=[32], dtype="float32")  # HERE
                T.copy(X, s)
        """)
    with pytest.raises(kiln.KilnSourceError,
                       match="reinterprets the bytes") as info:
        mod.main.ir
    assert f"{path}:{line_of(path, '# HERE')}" in str(info.value)


@kiln.jit(out_idx=[-1])
def binned_view(bins=16):
    # An atomic update of a reshaped shared tile's element lands in the
    # base tile: a [4, 4] view of 16 bins.
    @T.prim_func
    def main(Keys: T.Tensor((N,), "int32"), Y: T.Tensor((bins,), "int32")):
        with T.Kernel(1, threads=64) as bx:
            h = T.alloc_shared((bins,), "int32")
            h2 = T.reshape(h, (4, bins // 4))
            T.clear(h)
            for blk in T.serial(T.ceildiv(N, 64)):
                for i in T.Parallel(64):
                    if blk * 64 + i < N:
                        k = Keys[blk * 64 + i] % bins
                        T.atomic_add(h2[k // 4, k % 4], 1)
            T.copy(h, Y)
    return main


def test_an_atomic_update_of_a_view_lands_in_its_base(backend, rng):
    n = int(rng.integers(100, 400))
    keys = rng.integers(-50, 50, n).astype(np.int32)
    want = np.bincount(keys % 16, minlength=16)
    np.testing.assert_array_equal(binned_view()(keys), want)
