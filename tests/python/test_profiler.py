"""The host side of a TileLang example's main() (kiln/profiler.py): inputs
from the kernel's signature, the check against a reference program, timing.
On this machine the inputs are torch CPU tensors (NumPy arrays without
torch; both run on the CPU target); on the GPU
machine torch CUDA tensors (tests/gpu/test_python_gpu.py)."""

import numpy as np
import pytest

import kiln
import kiln.language as T


@kiln.jit(out_idx=[-1])
def axpy(n=1000, block=256, dtype="float32"):
    @T.prim_func
    def main(X: T.Tensor((n,), dtype), Y: T.Tensor((n,), dtype),
             Z: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=128) as blk:
            x = T.alloc_fragment((block,), dtype)
            y = T.alloc_fragment((block,), dtype)
            T.copy(X[blk * block], x)
            T.copy(Y[blk * block], y)
            for i in T.Parallel(block):
                x[i] = x[i] * 2.0 + y[i]
            T.copy(x, Z[blk * block])
    return main


def ref_program(x, y):
    return x * 2 + y


def test_an_example_main_checks_and_times_the_kernel(backend):
    kernel = axpy()
    profiler = kernel.get_profiler(
        tensor_supply_type=kiln.TensorSupplyType.Normal)
    ins = profiler.inputs()
    assert [tuple(a.shape) for a in ins] == [(1000,), (1000,)]
    try:  # torch CPU tensors where torch is installed, else NumPy arrays
        import torch
        assert all(isinstance(a, torch.Tensor) and a.device.type == "cpu"
                   and a.dtype == torch.float32 for a in ins)
        ins = [a.numpy() for a in ins]
    except ImportError:
        assert all(isinstance(a, np.ndarray) and a.dtype == np.float32
                   for a in ins)
    assert np.std(ins[0]) > 0.5  # normal, not zeros
    profiler.assert_allclose(ref_program, rtol=1e-5, atol=1e-5)
    ms = profiler.do_bench(warmup=1, rep=5)
    ref_ms = profiler.do_bench(ref_program, n_warmup=1, n_repeat=3)
    assert ms > 0 and ref_ms > 0


def test_a_wrong_reference_fails_naming_the_first_mismatch(backend):
    profiler = axpy().get_profiler(kiln.TensorSupplyType.Integer)
    with pytest.raises(AssertionError, match=r"output 0 of main: .*first at"):
        profiler.assert_allclose(lambda x, y: x * 3 + y)
    # A few mismatches within max_mismatched_ratio pass.
    def nearly(x, y):
        z = x * 2 + y
        z[:5] += 100
        return z
    profiler.assert_allclose(nearly, max_mismatched_ratio=0.01)
    with pytest.raises(AssertionError):
        profiler.assert_allclose(nearly, max_mismatched_ratio=0.001)


def test_supply_types_fill_as_named():
    kernel = axpy()
    zero = kernel.get_profiler(kiln.TensorSupplyType.Zero).inputs()
    one = kernel.get_profiler(kiln.TensorSupplyType.One).inputs()
    ints = kernel.get_profiler(kiln.TensorSupplyType.Integer).inputs()
    uni = kernel.get_profiler(kiln.TensorSupplyType.Uniform).inputs()
    assert not zero[0].any() and (one[0] == 1).all()
    assert set(np.unique(ints[0])) <= {-2, -1, 0, 1, 2}
    assert uni[0].min() >= -1 and uni[0].max() < 1


def test_what_the_profiler_cannot_choose_is_refused_clearly():
    N = T.symbolic("N")

    @kiln.jit(out_idx=[-1])
    def scaled(alpha_dims=False):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, 128), threads=128) as blk:
                x = T.alloc_fragment((128,), "float32")
                T.copy(X[blk * 128], x)
                T.copy(x, Y[blk * 128])
        return main

    with pytest.raises(kiln.KilnArgumentError, match="symbolic dims"):
        scaled().get_profiler().inputs()
    with pytest.raises(kiln.KilnArgumentError, match="TensorSupplyType"):
        axpy().get_profiler(tensor_supply_type="normal")


def test_do_bench_times_any_callable():
    calls = []
    ms = kiln.profiler.do_bench(lambda: calls.append(1), n_warmup=2,
                                n_repeat=7, return_mode="median")
    assert ms >= 0 and len(calls) == 1 + 2 + 7
    lo, hi = kiln.profiler.do_bench(lambda: None, n_warmup=1, n_repeat=4,
                                    quantiles=[0.0, 0.99])
    assert lo <= hi
