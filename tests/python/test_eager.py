"""TileLang's eager style (issue 25 item 7): a @tilelang.jit function whose
own body is the kernel, with ``T.const`` dims, parameters annotated in the
body and ``T.empty`` outputs; called directly with tensors or built with
``.compile(...)``. Checked on the CPU target against NumPy with ragged
shapes, and against the same kernel written as a prim_func (same tile IR,
same canonical hash)."""

import subprocess

import numpy as np
import pytest

import kiln
import kiln.language as T
from kiln.errors import KilnArgumentError, KilnSourceError


@kiln.jit
def add(A, B, block_M: int, block_N: int, threads: int):
    M, N = T.const("M, N")
    A: T.Tensor((M, N), T.float32)
    B: T.Tensor((M, N), T.float32)
    C = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                  threads=threads) as (cb, rb):
        for r, c in T.Parallel(block_M, block_N):
            C[rb * block_M + r, cb * block_N + c] = \
                A[rb * block_M + r, cb * block_N + c] + \
                B[rb * block_M + r, cb * block_N + c]
    return C


@kiln.jit(out_idx=[-1])
def add_prim(M, N, block_M, block_N, threads):
    @T.prim_func
    def add(A: T.Tensor((M, N), T.float32), B: T.Tensor((M, N), T.float32),
            C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=threads) as (cb, rb):
            for r, c in T.Parallel(block_M, block_N):
                C[rb * block_M + r, cb * block_N + c] = \
                    A[rb * block_M + r, cb * block_N + c] + \
                    B[rb * block_M + r, cb * block_N + c]

    return add


@kiln.jit
def matmul(A, B, block_M, block_N, block_K, dtype=T.float16,
           accum_dtype=T.float32):
    M, N, K = T.const("M, N, K")
    A: T.Tensor[[M, K], dtype]
    B: T.Tensor[[K, N], dtype]
    C = T.empty((M, N), dtype)
    steps = T.ceildiv(K, block_K)
    with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                  threads=128) as (cb, rb):
        a = T.alloc_shared((block_M, block_K), dtype)
        b = T.alloc_shared((block_K, block_N), dtype)
        acc = T.alloc_fragment((block_M, block_N), accum_dtype)
        T.clear(acc)
        for s in T.Pipelined(steps, num_stages=3):
            T.copy(A[rb * block_M, s * block_K], a)
            T.copy(B[s * block_K, cb * block_N], b)
            T.gemm(a, b, acc)
        T.copy(acc, C[rb * block_M, cb * block_N])
    return C


@kiln.jit
def row_stats(X, scale, block_M=4):
    # Two outputs returned as a tuple; a scalar parameter; an assert on a
    # T.const dim (a probe call skips it, the compile checks it).
    M, N = T.const("M, N")
    X: T.Tensor((M, N), "float32")
    scale: T.float32
    Sum = T.empty((M,), "float32")
    Max = T.empty((M,), "float32")
    assert N <= 256, "one tile per row"
    with T.Kernel(T.ceildiv(M, block_M), threads=128) as blk:
        x = T.alloc_fragment((block_M, N), "float32")
        s = T.alloc_fragment((block_M,), "float32")
        m = T.alloc_fragment((block_M,), "float32")
        T.copy(X[blk * block_M, 0], x)
        T.reduce_sum(x, s, dim=1)
        T.reduce_max(x, m, dim=1)
        for i in T.Parallel(block_M):
            s[i] = s[i] * scale
        T.copy(s, Sum[blk * block_M])
        T.copy(m, Max[blk * block_M])
    return Sum, Max


def test_direct_call_reads_the_dims_from_the_tensors(backend, rng):
    for m, n in ((70, 45), (33, 100)):
        a = rng.standard_normal((m, n)).astype(np.float32)
        b = rng.standard_normal((m, n)).astype(np.float32)
        c = add(a, b, 32, 32, 128)
        assert c.shape == (m, n)
        np.testing.assert_allclose(c, a + b, rtol=1e-6)


def test_compile_then_call_and_profile(backend, rng):
    kernel = add.compile(M=50, N=70, block_M=32, block_N=32, threads=128)
    a = rng.standard_normal((50, 70)).astype(np.float32)
    b = rng.standard_normal((50, 70)).astype(np.float32)
    np.testing.assert_allclose(kernel(a, b), a + b, rtol=1e-6)
    assert "kernel add(" in kernel.ir
    assert kernel.get_kernel_source()
    profiler = kernel.get_profiler()
    profiler.assert_allclose(lambda x, y: x + y, rtol=1e-6, atol=1e-6)
    # The same specialization is built once.
    assert add.compile(M=50, N=70, block_M=32, block_N=32,
                       threads=128) is kernel


def test_eager_and_prim_func_styles_give_the_same_kernel(kiln_cli, tmp_path):
    eager = add.compile(M=100, N=60, block_M=32, block_N=16, threads=128)
    prim = add_prim(100, 60, 32, 16, 128)
    assert eager.ir == prim.ir
    hashes = []
    for name, k in (("eager", eager), ("prim", prim)):
        path = tmp_path / f"{name}.tile"
        path.write_text(k.ir)
        hashes.append(subprocess.run(
            [kiln_cli, "ir", "hash", str(path)], check=True,
            capture_output=True, text=True).stdout.split())
    # "add <sha-256>" for each.
    assert hashes[0] == hashes[1] and hashes[0][0] == "add"
    assert len(hashes[0][1]) == 64


def test_gemm_in_the_eager_style(backend, rng):
    m, n, k = 77, 90, 70
    a = rng.standard_normal((m, k)).astype(np.float16)
    b = rng.standard_normal((k, n)).astype(np.float16)
    c = matmul(a, b, 64, 64, 32)
    assert c.dtype == np.float16 and c.shape == (m, n)
    ref = a.astype(np.float32) @ b.astype(np.float32)
    np.testing.assert_allclose(c.astype(np.float32), ref, rtol=1e-2,
                               atol=5e-2)


def test_tuple_outputs_and_a_scalar_parameter(backend, rng):
    x = rng.standard_normal((10, 200)).astype(np.float32)
    total, peak = row_stats(x, 0.5)
    np.testing.assert_allclose(total, 0.5 * x.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(peak, x.max(1))


def test_eager_errors_name_the_problem():
    with pytest.raises(KilnSourceError, match="T.const dim 'N' has no value"):
        add.compile(M=10, block_M=32, block_N=32, threads=128)
    with pytest.raises(KilnArgumentError, match="neither a parameter nor"):
        add.compile(M=10, N=10, Q=3, block_M=32, block_N=32, threads=128)
    with pytest.raises(KilnArgumentError, match="dim M is 10"):
        add(np.zeros((10, 4), np.float32), np.zeros((12, 4), np.float32),
            32, 32, 128)
    with pytest.raises(KilnSourceError, match="one tile per row"):
        row_stats(np.zeros((4, 300), np.float32), 1.0)
    with pytest.raises(KilnSourceError, match="T.empty declares"):
        T.empty((4,), "float32")


@kiln.jit
def column_group_max(X, splits: int, group: int = 32):
    # Python arithmetic on T.const dims before the kernel (a split-K style
    # share of the columns) and an output whose dim is an expression of
    # them, as TileLang's split-K and FP8-cast examples are written.
    M, N = T.const("M, N")
    share = N // splits
    X: T.Tensor((M, N), T.float32)
    Y = T.empty((M, T.ceildiv(N, group)), T.float32)
    assert share % group == 0, "each split holds whole groups"
    with T.Kernel(T.ceildiv(M, 8), splits, threads=64) as (bx, bz):
        t = T.alloc_fragment((8, group), T.float32)
        m = T.alloc_fragment((8,), T.float32)
        for g in T.serial(share // group):
            T.copy(X[bx * 8, bz * share + g * group], t)
            T.reduce_max(t, m, dim=1)
            for i in T.Parallel(8):
                if bx * 8 + i < M:
                    Y[bx * 8 + i, bz * (share // group) + g] = m[i]
    return Y


def test_a_direct_call_takes_python_arithmetic_on_const_dims(rng):
    # 37 rows (a ragged last block), 256 columns in 4 splits of 2 groups.
    x = rng.standard_normal((37, 256)).astype(np.float32)
    got = column_group_max(x, 4)
    np.testing.assert_array_equal(got, x.reshape(37, 8, 32).max(-1))
    # The same kernel as .compile(...) builds it.
    assert column_group_max.compile(M=37, N=256, splits=4).ir == \
        column_group_max.compile(M=37, N=256, splits=4, group=32).ir
    # The assert runs with the dims' values (not while the call probes).
    with pytest.raises(KilnSourceError, match="each split holds whole"):
        column_group_max(x, 16)


@kiln.jit
def scaled_rows(A, scale: float = 2.0, block: int = 32):
    # TileLang's dynamic-shape example: T.dynamic dims stay symbolic in the
    # kernel (bound at launch), T.const ones are compiled in.
    M = T.dynamic("m")
    N = T.const("N")
    A: T.Tensor((M, N), T.float32)
    B = T.empty((M, N), T.float32)
    with T.Kernel(T.ceildiv(M, block), threads=64) as bx:
        for i, j in T.Parallel(block, N):
            if bx * block + i < M:
                B[bx * block + i, j] = A[bx * block + i, j] * scale
    return B


def test_dynamic_dims_of_an_eager_function(rng):
    a = rng.standard_normal((100, 16)).astype(np.float32)
    b = rng.standard_normal((37, 16)).astype(np.float32)
    np.testing.assert_array_equal(scaled_rows(a), a * 2)
    np.testing.assert_array_equal(scaled_rows(b), b * 2)
    kernel = scaled_rows.compile(N=16)
    assert "A: f32[m, 16]" in kernel.ir
    assert len(scaled_rows._cache) == 1  # one kernel for both lengths
