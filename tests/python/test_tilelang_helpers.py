"""The rest of TileLang's surface that real examples and their tests use
(issue 25): ``T.dtype`` as a converter, PrimExpr's ``.dtype``/``.astype``,
the register and warp-role hints, ``tilelang.testing``, ``utils.tensor``,
``contrib.nvcc``, ``carver.arch.driver``, ``language.fp8``, ``transform``,
``profiler.func``, and autotuned kernels used as TileLang uses them (tuned
when their config or latency is read, ``.compile``, ``pass_configs``).
Kernels run on the CPU target against NumPy with ragged shapes."""

import os

import numpy as np
import pytest

import kiln
import kiln.language as T
from kiln.autotuner import autotune

N = T.symbolic("N")


def test_dtype_converts_any_spelling():
    torch = pytest.importorskip("torch")
    assert T.dtype("float16") == T.float16
    assert T.dtype(T.bfloat16).name == "bfloat16"
    assert T.dtype(torch.float32) == T.float32
    assert T.dtype("half").as_torch() is torch.float16
    assert T.dtype("int8").bits == 8 and T.dtype("float8_e4m3").bits == 8
    with pytest.raises(kiln.KilnSourceError, match="unknown dtype"):
        T.dtype("float7")


@kiln.jit(out_idx=[-1])
def low_nibbles(block=64):
    # A TileLang-style helper working on PrimExpr methods.
    def low(v):
        assert v.dtype == T.uint8
        return (v & 15).astype(T.int32) - T.int32(8)

    @T.prim_func
    def main(A: T.Tensor((N,), "uint8"), B: T.Tensor((N,), "int32")):
        with T.Kernel(T.ceildiv(N, block), threads=64) as bx:
            for i in T.Parallel(block):
                if bx * block + i < N:
                    B[bx * block + i] = low(A[bx * block + i])
    return main


def test_prim_expr_dtype_and_astype(backend, rng_seed=7):
    a = np.random.default_rng(rng_seed).integers(0, 256, 1000,
                                                 dtype=np.uint8)
    got = low_nibbles()(a)
    np.testing.assert_array_equal(got, (a & 15).astype(np.int32) - 8)


def scale_kernel(hints, block=128):
    # The same kernel with TileLang's Hopper hints and warp-role scopes,
    # or without them.
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=128) as blk:
            s = T.alloc_shared((block,), "float32")
            x = T.alloc_fragment((block,), "float32")
            if hints:
                T.no_set_max_nreg()
                T.disable_warp_group_reg_alloc()
                with T.ws(1):
                    T.copy(A[blk * block], s)
                with T.ws(0):
                    T.copy(s, x)
                    for i in T.Parallel(block):
                        x[i] = x[i] * 3
                    T.copy(x, B[blk * block])
            else:
                T.copy(A[blk * block], s)
                T.copy(s, x)
                for i in T.Parallel(block):
                    x[i] = x[i] * 3
                T.copy(x, B[blk * block])
    return main


def test_hints_and_warp_roles_change_nothing(backend):
    hinted, plain = scale_kernel(True), scale_kernel(False)
    assert hinted.ir == plain.ir
    a = np.random.default_rng(3).standard_normal(333).astype(np.float32)
    b = np.zeros_like(a)
    kiln.compile(hinted)(a, b)
    np.testing.assert_allclose(b, 3 * a, rtol=1e-6)


def test_testing_module():
    import kiln.testing as tt
    tt.set_random_seed(5)
    first = np.random.rand(3)
    tt.set_random_seed(5)
    np.testing.assert_array_equal(first, np.random.rand(3))
    # Markers: pytest marks, skipping where the device is missing.
    mark = tt.requires_cuda_compute_version_ge(9, 0)
    assert mark.mark.name == "skipif"
    assert tt.requires_package("numpy").mark.args == (False,)
    assert tt.requires_package("no_such_module_xyz").mark.args == (True,)
    with pytest.raises(ValueError, match="mode"):
        tt.requires_cuda_compute_version(9, 0, mode="near")


def test_torch_assert_close_allows_a_ratio_of_mismatches():
    from kiln.utils.tensor import torch_assert_close
    a = np.zeros(1000, np.float32)
    b = a.copy()
    b[:2] = 1  # 0.2% differ
    torch_assert_close(a, b, max_mismatched_ratio=0.003)
    with pytest.raises(AssertionError, match=r"2 of 1000 elements"):
        torch_assert_close(a, b, max_mismatched_ratio=0.001)
    with pytest.raises(AssertionError, match="shape"):
        torch_assert_close(a, b[:10])


def test_device_queries():
    from kiln.carver.arch import driver
    from kiln.contrib import nvcc
    from kiln.language.fp8 import determine_fp8_type
    from kiln.transform import PassConfigKey
    assert nvcc.get_target_compute_version("sm_90a") == "9.0"
    assert nvcc.parse_compute_version("8.6") == (8, 6)
    assert driver.get_num_sms() >= 1
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        assert driver.get_num_sms() == (os.cpu_count() or 1)
    assert determine_fp8_type() == T.float8_e4m3
    assert determine_fp8_type("e5m2") == T.float8_e5m2
    assert PassConfigKey is kiln.PassConfigKey


@kiln.jit(out_idx=[-1])
def add_one(n, block=64, threads=64):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            x = T.alloc_fragment((block,), "float32")
            T.copy(A[bx * block], x)
            for i in T.Parallel(block):
                x[i] = x[i] + 1
            T.copy(x, B[bx * block])
    return main


def test_an_autotuned_kernel_is_tuned_when_its_result_is_read(
        libkiln_embedded):
    # TileLang tunes when the tuned function is called: its config and
    # latency are there at once, and the result is used as a kernel.
    configs = [{"block": 64, "pass_configs": {"tl.disable_tma": True}},
               {"block": 128}]
    tuned = autotune(configs=configs, warmup=1, rep=2)(add_one)(1000)
    assert tuned.config in ({"block": 64}, {"block": 128})
    assert tuned.latency is not None and tuned.latency > 0
    profiler = tuned.get_profiler()
    assert profiler.func is tuned.best
    profiler.assert_allclose(lambda a: a + 1)
    assert tuned.get_kernel_source() == tuned.best.ir
    assert tuned.best.bindings == {"block": tuned.config["block"]}
    # .compile on the tuner: tuned at once.
    compiled = autotune(configs=configs, warmup=1, rep=2)(add_one).compile(
        n=777)
    assert compiled.best is not None and compiled.results
    a = np.random.default_rng(1).standard_normal(777).astype(np.float32)
    np.testing.assert_allclose(compiled(a), a + 1, rtol=1e-6)


NB = T.symbolic("NB")


@kiln.jit
def block_sums(block=32):
    # TileLang stores one element per block outside T.Parallel: `O[bx] = v`
    # (every thread of a TileLang block writes the same value; here the
    # block stores it once), through a shared tile too.
    @T.prim_func
    def main(A: T.Tensor((N,), "float32"),
             O: T.Tensor((NB,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=32) as bx:
            x = T.alloc_fragment((block,), "float32")
            s = T.alloc_fragment((1,), "float32")
            total = T.alloc_shared((1,), "float32")
            T.copy(A[bx * block], x)
            T.reduce_sum(x, s, dim=0)
            total[0] = s[0] * 2
            O[bx] = total[0] + bx
    return main


def test_a_block_stores_one_element_outside_parallel(backend):
    a = np.random.default_rng(11).standard_normal(1000).astype(np.float32)
    k = block_sums()
    assert "parallel (one) in (1) {" in k.ir
    blocks = np.arange(0, 1000, 32)
    got = np.zeros(len(blocks), np.float32)
    kiln.compile(k.prim_func)(a, got)
    want = np.array([2 * a[b:b + 32].sum() + i for i, b in enumerate(blocks)],
                    np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@kiln.jit
def segment_offsets(sizes, block=16):
    # Comprehensions over Python values, as TileLang's grouped GEMM sizes
    # its grid: a generator in sum(), a list with a condition, and one whose
    # elements are kernel values.
    blocks = sum((s + block - 1) // block for s in sizes)
    starts = [sum(sizes[:i]) for i in range(len(sizes)) if sizes[i] > 0]

    @T.prim_func
    def main(W: T.Tensor((4,), "int32"), O: T.Tensor((blocks,), "int32")):
        with T.Kernel(blocks, threads=32) as bx:
            for i in T.Parallel(1):
                O[bx + i] = bx * 100 + sum(W[k] * k for k in range(4)) + \
                    len(starts)
    return main


def test_comprehensions_run_in_python(backend):
    w = np.array([3, 1, 4, 1], np.int32)
    k = segment_offsets((20, 0, 40))
    out = np.zeros(2 + 3, np.int32)
    kiln.compile(k.prim_func)(w, out)
    np.testing.assert_array_equal(
        out, np.arange(5) * 100 + int((w * np.arange(4)).sum()) + 2)
    with pytest.raises(kiln.KilnSourceError,
                       match="iterate over a Python value"):
        @T.prim_func
        def bad(A: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(4):
                    A[i] = sum(A[j] for j in T.serial(bx))
        bad.ir


@autotune(configs=[{"block": 16}, {"block": 64}], warmup=1, rep=2)
@kiln.jit
def eager_row_max(X, block=16, threads=64):
    # TileLang's top-k example stacks @autotune on an eager @jit and calls
    # it with tensors: tuned on them, the best config's outputs returned.
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float32)
    Y = T.empty((M,), T.float32)
    with T.Kernel(T.ceildiv(M, block), threads=threads) as bx:
        t = T.alloc_fragment((block, N), T.float32)
        m = T.alloc_fragment((block,), T.float32)
        T.copy(X[bx * block, 0], t)
        T.reduce_max(t, m, dim=1)
        T.copy(m, Y[bx * block])
    return Y


def test_autotune_over_an_eager_function(libkiln_embedded):
    x = np.random.default_rng(5).standard_normal((100, 48)).astype(
        np.float32)
    np.testing.assert_array_equal(eager_row_max(x), x.max(1))
    np.testing.assert_array_equal(eager_row_max(x), x.max(1))
    assert len(eager_row_max._eager_choices) == 1  # tuned once per shape
    chosen = next(iter(eager_row_max._eager_choices.values()))
    assert chosen.config in ({"block": 16}, {"block": 64})
    assert all("seconds" in r for r in chosen.results)
    # Every config key given: no tuning, the call runs as written.
    np.testing.assert_array_equal(eager_row_max(x[:7], block=64),
                                  x[:7].max(1))
    # .compile with the dims: tuned at once on the profiler's inputs.
    compiled = eager_row_max.compile(M=40, N=48)
    assert compiled.config in ({"block": 16}, {"block": 64})
    np.testing.assert_array_equal(compiled(x[:40]), x[:40].max(1))


@kiln.jit(out_idx=[-1])
def head_bias(heads, block=64):
    # A fragment smaller than the T.Parallel that fills it is fine when the
    # store is guarded (unguarded, it is a located error: test_errors.py).
    @T.prim_func
    def main(Bias: T.Tensor((heads,), "float32"),
             O: T.Tensor((block,), "float32")):
        with T.Kernel(1, threads=64) as bx:
            b = T.alloc_fragment((heads,), "float32")
            o = T.alloc_fragment((block,), "float32")
            for i in T.Parallel(block):
                if i < heads:
                    b[i] = Bias[i] * 2
            for i in T.Parallel(block):
                o[i] = T.if_then_else(i < heads, b[i], 0.0)
            T.copy(o, O)
    return main


def test_a_guarded_store_into_a_smaller_tile(backend):
    bias = np.arange(4, dtype=np.float32) + 1
    got = head_bias(4)(bias)
    want = np.zeros(64, np.float32)
    want[:4] = 2 * bias
    np.testing.assert_array_equal(got, want)


@kiln.jit(out_idx=[-1])
def copy_by_bounds(n, block=64):
    # Slice bounds held in names (TileLang's persistent MLA decode:
    # `T.copy(KV[b, kv_start:kv_end, h, :], S)`): the extent is the
    # difference of their values.
    @T.prim_func
    def main(A: T.Tensor((n, 8), "float32"), B: T.Tensor((n, 8), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=64) as bx:
            s = T.alloc_shared((block, 8), "float32")
            start = bx * block
            end = (bx + 1) * block
            T.copy(A[start:end, :], s)
            T.copy(s, B[start:end, :])
    return main


def test_slice_bounds_held_in_lets(backend):
    k = copy_by_bounds(200)
    assert "copy A[start:+64, :] -> s" in k.ir
    a = np.random.default_rng(2).standard_normal((200, 8)).astype(np.float32)
    np.testing.assert_array_equal(k(a), a)


@kiln.jit(out_idx=[-1])
def persistent_scale(m, n, bm=16, bn=32, blocks=3):
    # TileLang's persistent GEMM walk: `blocks` blocks take the tiles of a
    # [m_blocks, n_blocks] domain in waves (ragged edges, a wave only
    # partly full).
    @T.prim_func
    def main(A: T.Tensor((m, n), "float32"), B: T.Tensor((m, n), "float32")):
        with T.Kernel(blocks, threads=64) as block_id:
            t = T.alloc_fragment((bm, bn), "float32")
            for bx, by in T.Persistent(
                    [T.ceildiv(m, bm), T.ceildiv(n, bn)], blocks, block_id):
                T.copy(A[bx * bm, by * bn], t)
                for i, j in T.Parallel(bm, bn):
                    t[i, j] = t[i, j] * 2 + bx * 100 + by
                T.copy(t, B[bx * bm, by * bn])
    return main


def test_persistent_walk_visits_every_tile_once(backend):
    m, n = 70, 100  # 5 x 4 tiles over 3 blocks: 7 waves, the last partial
    a = np.random.default_rng(4).standard_normal((m, n)).astype(np.float32)
    got = persistent_scale(m, n)(a)
    rows = np.arange(m)[:, None] // 16
    cols = np.arange(n)[None, :] // 32
    np.testing.assert_allclose(got, a * 2 + rows * 100 + cols, rtol=1e-6)
    ir = persistent_scale(m, n).ir
    assert "for wave in serial(7) {" in ir
    with pytest.raises(kiln.KilnSourceError, match="binds one name per dim"):
        @T.prim_func
        def bad(A: T.Tensor((N,), "float32")):
            with T.Kernel(2, threads=32) as b:
                for x in T.Persistent([4, 4], 2, b):
                    A[x] = 0.0
        bad.ir
