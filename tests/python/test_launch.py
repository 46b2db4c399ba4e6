"""Launch arguments are checked in Python before anything reaches libkiln."""

import numpy as np
import pytest

import kiln
import kiln.language as T
from kiln import _client, _launch

import kernels


class NoCompile:
    """A client that fails the test if a launch gets as far as compiling."""

    def compile(self, *args, **kwargs):
        raise AssertionError("the arguments should have been rejected")


@pytest.fixture(autouse=True)
def no_compile():
    _client.set_default(NoCompile())
    yield
    _client.set_default(None)


@pytest.fixture
def gemm():
    return kernels.matmul(T.symbolic("M"), T.symbolic("N"), 64, 64, 64, 32)


def f16(*shape):
    return np.zeros(shape, np.float16)


@pytest.mark.parametrize("args,message", [
    ((f16(8, 64),), "gemm takes 2 arguments (A, B); got 1"),
    ((f16(8, 64), np.zeros((64, 8), np.float32)),
     "argument 'B' of gemm: expected dtype float16 (f16); got float32"),
    ((f16(8, 64, 1), f16(64, 8)),
     "argument 'A' of gemm: expected 2 dims [M, 64]; got shape [8, 64, 1]"),
    ((f16(8, 32), f16(64, 8)),
     "argument 'A' of gemm: dim 1 must be 64 (shape [M, 64]); got shape "
     "[8, 32]"),
    ((f16(8, 64), [[1.0]]),
     "argument 'B' of gemm: expected a NumPy array, a torch tensor or a "
     "DLPack tensor; got list"),
    ((f16(64, 8).T, f16(64, 8)),
     "argument 'A' of gemm: must be contiguous (row-major); got strides "
     "[1, 8] for shape [8, 64] (use np.ascontiguousarray or .contiguous())"),
])
def test_bad_arguments(gemm, args, message):
    with pytest.raises(kiln.KilnArgumentError) as info:
        gemm(*args)
    assert str(info.value) == message


def test_symbol_bound_twice_must_agree():
    kernel = kernels.rms_norm(T.symbolic("M"), T.symbolic("N"),
                              dtype="float16")
    with pytest.raises(kiln.KilnArgumentError) as info:
        kernel(f16(3, 7), f16(5))
    assert str(info.value) == ("argument 'W' of main: dim 0 is N = 5, but "
                               "argument 'X' has N = 7 (dim 1)")


def test_scalar_checks():
    kernel = kernels.scale_add()
    x = np.zeros(10, np.float32)
    b = np.zeros(4, np.float32)
    with pytest.raises(kiln.KilnArgumentError,
                       match="argument 'alpha' of main: expected a number "
                             r"for float32 \(f32\); got 'x'"):
        kernel(x, b, "x")
    with pytest.raises(kiln.KilnArgumentError, match="got a tensor"):
        kernel(x, b, np.zeros(1, np.float32))


def test_output_needs_its_symbols_bound_by_inputs():
    N = T.symbolic("N")
    O = T.symbolic("O")

    @T.prim_func
    def k(A: T.Tensor((N,), "float32"), B: T.Tensor((O,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            a = T.alloc_fragment((8,), "float32")
            T.copy(A[0], a)
            T.copy(a, B[0])

    kernel = kiln.compile(k, out_idx=[-1])
    with pytest.raises(kiln.KilnArgumentError,
                       match="output 'B' of k: cannot allocate it: symbolic "
                             "dim O is not a dim of any input"):
        kernel(np.zeros(4, np.float32))


def test_out_idx_validation():
    prim = kernels.scale_add.func()
    with pytest.raises(kiln.KilnArgumentError, match="out of range"):
        kiln.compile(prim, out_idx=[7])
    with pytest.raises(kiln.KilnArgumentError, match="names 'alpha', a scalar"):
        kiln.compile(prim, out_idx=[3])
    assert kiln.compile(prim, out_idx=-2).out_idx == [2]


def test_unbound_tunables_refuse_to_compile():
    tuned = kernels.tuned_flashattn()(1, 2, 64, 64, False)
    assert tuned.mode == "tunables"
    prim = tuned.kernels[0].prim_func
    with pytest.raises(kiln.KilnArgumentError, match="have no value"):
        kiln.compile(prim, out_idx=[3]).compile("cpu")


def test_scalar_packing():
    assert _launch.pack_scalar("f32", 1.5, "x") == \
        bytes.fromhex("0000c03f") + bytes(4)
    assert _launch.pack_scalar("f16", 1.0, "x")[:2] == bytes.fromhex("003c")
    assert _launch.pack_scalar("bf16", 1.0, "x")[:2] == bytes.fromhex("803f")
    # Round to nearest even: 1 + 2^-8 lies halfway between two bf16 values.
    assert _launch.pack_scalar("bf16", 1.00390625, "x")[:2] == \
        bytes.fromhex("803f")
    assert _launch.pack_scalar("i64", -2, "x") == b"\xfe" + b"\xff" * 7
    assert _launch.pack_scalar("bool", True, "x") == b"\x01" + bytes(7)
    assert _launch.pack_scalar("i32", np.int32(7), "x")[:4] == \
        (7).to_bytes(4, "little")
    with pytest.raises(kiln.KilnArgumentError, match="out of range"):
        _launch.pack_scalar("i8", 300, "x")


def test_marshal_fills_kiln_args():
    N = T.symbolic("N")

    @T.prim_func
    def k(X: T.StridedTensor((N,), (2,), "float32"),
          Y: T.Tensor((N,), "float32"), alpha: T.float32):
        with T.Kernel(1, threads=32) as bx:
            a = T.alloc_fragment((8,), "float32")
            T.copy(X[0], a)
            T.copy(a, Y[0])

    assert k.ir.startswith(
        "kernel k(X: f32[N] strides [2], Y: f32[N], alpha: f32)\n")
    x = np.arange(6, dtype=np.float32)[::2]  # element stride 2
    y = np.zeros(3, np.float32)
    views = [_launch.view(x, "x"), _launch.view(y, "y"),
             _launch.pack_scalar("f32", 2.0, "alpha")]
    m = _launch.marshal(k.params, views)
    a0 = m.args[0]
    assert a0.is_tensor == 1 and a0.dtype == b"f32" and a0.rank == 1
    assert a0.data == x.__array_interface__["data"][0]
    assert a0.shape[0] == 3 and a0.strides[0] == 2
    assert not m.args[1].strides  # row-major: NULL
    assert m.args[2].is_tensor == 0
    assert bytes(m.args[2].scalar) == bytes.fromhex("00000040") + bytes(4)
