"""Local tiles (``T.alloc_local``, ``T.alloc_var``) and ``T.vectorized``.

A local tile is one copy per thread on GPUs and one per block on the CPU, so
a local tile stored inside a T.Parallel is private to one iteration: read
where the iteration stored it, never after the loop (a located error).
``T.vectorized`` is TileLang's loop each thread runs whole: an unrolled
loop inside a T.Parallel or where it stores only local tiles, an
element-wise loop where it stores tensors or shared tiles. Each kernel runs
on the CPU target against NumPy with ragged shapes."""

import numpy as np
import pytest

import kiln
import kiln.language as T
from test_errors import line_of, load

N = T.symbolic("N")


@kiln.jit(out_idx=[-1])
def scaled_rows(block=32, width=8):
    # A T.vectorized loop inside a T.Parallel: each row's iteration runs
    # the whole inner loop (per-iteration registers, as in TileLang).
    @T.prim_func
    def main(X: T.Tensor((N, width), "float32"),
             Y: T.Tensor((N, width), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=64) as bx:
            x = T.alloc_fragment((block, width), "float32")
            row = T.alloc_local((width,), "float32")
            T.copy(X[bx * block, 0], x)
            for i in T.Parallel(block):
                for j in T.vectorized(width):
                    row[j] = x[i, j] * 2.0
                for j in T.vectorized(0, width):
                    x[i, j] = row[j] + row[width - 1 - j]
            T.copy(x, Y[bx * block, 0])
    return main


def test_vectorized_inside_parallel_is_a_loop_per_iteration(backend, rng):
    k = scaled_rows()
    assert "unroll(" in k.ir
    n = 3 * 32 + int(rng.integers(1, 31))
    x = rng.standard_normal((n, 8)).astype(np.float32)
    np.testing.assert_allclose(k(x), 2 * x + 2 * x[:, ::-1], rtol=1e-6)


@kiln.jit(out_idx=[-1])
def staged_dot(width=8):
    # TileLang's register staging: a vectorized load into local tiles that
    # every thread holds, then a serial loop over them.
    @T.prim_func
    def main(A: T.Tensor((width,), "float32"),
             B: T.Tensor((N, width), "float32"),
             C: T.Tensor((N,), "float32")):
        with T.Kernel(N, threads=32) as bx:
            a = T.alloc_local((width,), "float32")
            b = T.alloc_local((width,), "float32")
            acc = T.alloc_var("float32")
            for v in T.vectorized(width):
                a[v] = A[v]
                b[v] = B[bx, v]
            acc = 0.0
            for k in T.serial(width):
                acc += a[k] * b[k]
            C[bx] = acc
    return main


def test_vectorized_into_local_tiles_runs_in_every_thread(backend, rng):
    k = staged_dot()
    assert "for v in unroll(8) {\n    a[v] = A[v]" in k.ir, k.ir
    n = int(rng.integers(3, 40))
    a = rng.standard_normal(8).astype(np.float32)
    b = rng.standard_normal((n, 8)).astype(np.float32)
    np.testing.assert_allclose(k(a, b), b @ a, rtol=1e-5, atol=1e-6)


@kiln.jit(out_idx=[-1])
def shifted_copy(lo=2, hi=10):
    # T.vectorized(lo, hi) storing a tensor: element-wise over [lo, hi).
    @T.prim_func
    def main(X: T.Tensor((N, 16), "float32"),
             Y: T.Tensor((N, 16), "float32")):
        with T.Kernel(N, threads=32) as bx:
            for j in T.vectorized(lo, hi):
                Y[bx, j] = X[bx, j] * 3.0
    return main


def test_vectorized_storing_a_tensor_is_element_wise(backend, rng):
    k = shifted_copy()
    n = int(rng.integers(2, 9))
    x = rng.standard_normal((n, 16)).astype(np.float32)
    want = np.zeros_like(x)
    want[:, 2:10] = 3 * x[:, 2:10]
    assert "parallel (j) in (8)" in k.ir, k.ir
    y = k(x)
    np.testing.assert_allclose(y[:, 2:10], want[:, 2:10], rtol=1e-6)


def test_a_local_tile_read_after_its_parallel_is_located(tmp_path):
    # The old meaning of T.vectorized (a T.Parallel): each thread would
    # hold only the elements of its own iterations.
    mod, path = load(tmp_path, """
        @T.prim_func
        def main(X: T.Tensor((8,), "float32"), Y: T.Tensor((1,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                buf = T.alloc_local((8,), "float32")
                acc = T.alloc_var("float32")
                for v in T.Parallel(8):
                    buf[v] = X[v]
                acc = 0.0
                for k in T.serial(8):
                    acc += buf[k]  # HERE
                Y[0] = acc
        """)
    with pytest.raises(kiln.KilnError) as info:
        kiln.compile(mod.main)(np.zeros(8, np.float32),
                               np.zeros(1, np.float32))
    message = str(info.value)
    assert "local tile 'buf' is read outside 'parallel'" in message, message
    assert f":{line_of(path, '# HERE')}:" in message, message


def test_a_value_carried_between_iterations_is_located(tmp_path):
    # A running sum in a local variable across T.Parallel iterations: each
    # thread would sum only its own iterations.
    mod, path = load(tmp_path, """
        @T.prim_func
        def main(X: T.Tensor((256,), "float32"),
                 Y: T.Tensor((256,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                run = T.alloc_var("float32")
                run = 0.0
                for i in T.Parallel(256):
                    run += X[i]  # HERE
                    Y[i] = run
        """)
    with pytest.raises(kiln.KilnError) as info:
        kiln.compile(mod.main)(np.zeros(256, np.float32),
                               np.zeros(256, np.float32))
    message = str(info.value)
    assert "before this iteration of 'parallel' stored that element" in \
        message, message
    assert f":{line_of(path, '# HERE')}:" in message, message
