"""TileLang names that used to be plain AttributeErrors: ``T.alloc_buffer``
(TVM's allocation by storage scope), ``T.int`` / ``T.uint`` (and ``T.short``
/ ``T.long``), and ``T.tfloat32``. Kernels written as a TileLang port writes
them run on the CPU target against NumPy with ragged shapes; misuse is a
located error."""

import re
from typing import Literal

import numpy as np
import pytest

import kiln
import kiln.language as T
from test_errors import line_of, load

N = T.symbolic("N")
NAMES = ("alloc_buffer", "int", "uint", "tfloat32")


def test_the_names_exist_and_are_not_refusals():
    for name in NAMES + ("short", "long"):
        assert getattr(T, name) is not None
        assert name not in T.UNSUPPORTED


# --- T.alloc_buffer -------------------------------------------------------

@kiln.jit(out_idx=[-1])
def every_tile_scope(block=64):
    # Each tile scope TileLang's T.alloc_buffer takes, in one kernel:
    # Y = X * 2 + 1 + (the block's index).
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            staged = T.alloc_buffer((block,), "float32", scope="shared")
            out = T.alloc_buffer((block,), T.float32, scope="shared.dyn")
            vals = T.alloc_buffer([block], dtype="float32",
                                  scope="local.fragment")
            coef = T.alloc_buffer((2,), "float32", scope="local")
            base = T.alloc_buffer((1,), T.int, scope="local.var", align=16)
            coef[0] = 2.0
            coef[1] = 1.0
            base = bx
            T.copy(X[bx * block], staged)
            T.copy(staged, vals)
            for i in T.Parallel(block):
                vals[i] = vals[i] * coef[0] + coef[1] + T.cast(base[0],
                                                               "float32")
            T.copy(vals, out)
            T.copy(out, Y[bx * block])
    return main


def test_alloc_buffer_scopes_are_the_alloc_ops(backend, rng):
    k = every_tile_scope()
    ir = k.ir
    for decl in ("alloc shared staged: f32[64]", "alloc shared out: f32[64]",
                 "alloc fragment vals: f32[64]", "alloc local coef: f32[2]",
                 "alloc local base: i32[1]"):
        assert decl in ir
    n = 5 * 64 + int(rng.integers(1, 63))
    x = rng.standard_normal(n).astype(np.float32)
    want = x * 2 + 1 + (np.arange(n) // 64).astype(np.float32)
    np.testing.assert_allclose(k(x), want, rtol=1e-6, atol=1e-6)


@kiln.jit(out_idx=[-1])
def split_sum_of_squares(split=3, block=32):
    # As TileLang's split-K dequantisation example: a buffer allocated
    # before the kernels with TVM's default scope ("global") carries each
    # split's partial result from the first kernel to the second.
    @T.prim_func
    def main(X: T.Tensor((split, N), "float32"),
             Y: T.Tensor((N,), "float32")):
        parts = T.alloc_buffer((split, N), "float32")
        with T.Kernel(T.ceildiv(N, block), split, threads=128) as (bx, bz):
            x = T.alloc_fragment((block,), "float32")
            T.copy(X[bz, bx * block], x)
            for i in T.Parallel(block):
                x[i] = x[i] * x[i]
            T.copy(x, parts[bz, bx * block])
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            acc = T.alloc_fragment((block,), "float32")
            part = T.alloc_buffer((block,), "float32", scope="local.fragment")
            T.clear(acc)
            for k in range(split):
                T.copy(parts[k, bx * block], part)
                for i in T.Parallel(block):
                    acc[i] += part[i]
            T.copy(acc, Y[bx * block])
    return main


def test_a_global_alloc_buffer_is_shared_by_the_kernels(backend, rng):
    k = split_sum_of_squares()
    assert "parts: f32[3, N]" in k.ir
    n = 4 * 32 + int(rng.integers(1, 31))
    x = rng.standard_normal((3, n)).astype(np.float32)
    np.testing.assert_allclose(k(x), (x * x).sum(axis=0), rtol=1e-5)


@pytest.mark.parametrize("line, message", [
    ('x = T.alloc_buffer((16,), "uint64", scope="shared.barrier")',
     "T.alloc_buffer: scope 'shared.barrier' is not supported; Kiln "
     "allocates the scopes 'shared', 'shared.dyn', 'local.fragment', "
     "'local', 'local.var', 'global'"),
    ('x = T.alloc_buffer((1,), "int32", scope="local.descriptor.wgmma")',
     "scope 'local.descriptor.wgmma' is not supported"),
    ('x = T.alloc_buffer((16,), "float32", scope="Shared")',
     "scope 'Shared' is not supported"),
    ('x = T.alloc_buffer((16,), "float32")',
     "T.alloc_buffer with scope 'global' (TVM's default scope) allocates a "
     "tensor the prim_func's kernels share: call it outside"),
    ('x = T.alloc_buffer((2,), "int32", scope="local.var")',
     "scope 'local.var' holds one element; got shape [2]"),
    ('x = T.alloc_buffer((16,), "float32", data=A.data, scope="shared")',
     r"T.alloc_buffer(data=...) is not supported"),
    ('x = T.alloc_buffer((4, 4), "float32", strides=[1, 4], scope="local")',
     r"T.alloc_buffer(strides=...) is not supported"),
    ('T.alloc_buffer((16,), "float32", scope="shared")',
     "assign T.alloc_buffer(...) to a name"),
])
def test_alloc_buffer_misuse_names_the_line(tmp_path, line, message):
    module, path = load(tmp_path, f"""
        def build():
            @T.prim_func
            def main(A: T.Tensor((16,), "float32")):
                with T.Kernel(1, threads=32) as bx:
                    a = T.alloc_shared((16,), "float32")
                    {line}  # HERE
            return main
        """)
    with pytest.raises(kiln.KilnSourceError, match=re.escape(message)) \
            as info:
        module.build().ir
    assert info.value.lineno == line_of(path, "# HERE")
    assert info.value.filename == path


def test_a_bad_scope_inside_a_macro_points_at_the_macro(tmp_path):
    module, path = load(tmp_path, """
        @T.macro
        def stage(src):
            s = T.alloc_buffer((8,), "float32", scope="warp")  # HERE
            T.copy(src, s)

        def build():
            @T.prim_func
            def main(A: T.Tensor((8,), "float32")):
                with T.Kernel(1, threads=32) as bx:
                    stage(A)
            return main
        """)
    with pytest.raises(kiln.KilnSourceError,
                       match="scope 'warp' is not supported") as info:
        module.build().ir
    assert info.value.lineno == line_of(path, "# HERE")


# --- T.int, T.uint ----------------------------------------------------------

def test_c_style_dtype_names_are_the_sized_types():
    assert T.int is T.int32 and T.uint is T.uint32
    assert T.short is T.int16 and T.long is T.int64
    assert T.int != T.uint
    # TVM parses a bare "int" / "uint" as 32 bits; T.dtype does too.
    assert T.dtype("int") == T.int and T.dtype("uint") == T.uint
    assert T.dtype("uint").name == "uint32"
    assert T.int.bits == 32 and T.uint.bits == 32


def _decoder_suffix(source_format: Literal[T.int, T.uint] = T.uint):
    # A dequantisation helper's check of its source format, written as
    # TileLang's quantisation helpers write it.
    source_format = T.dtype(source_format)
    if source_format not in [T.int, T.uint]:
        raise ValueError(f"source_format {source_format}: int or uint")
    return "u" if source_format == T.uint else "s"


def test_int_and_uint_as_host_markers():
    assert _decoder_suffix() == "u"
    assert [_decoder_suffix(f) for f in ("uint", T.uint32, "int", T.int32)] \
        == ["u", "u", "s", "s"]
    with pytest.raises(ValueError, match="source_format int8"):
        _decoder_suffix(T.int8)


@kiln.jit(out_idx=[-1])
def offset_counts(block=64):
    # T.int / T.uint as a scalar parameter's annotation, a tensor dtype,
    # T.alloc_var's dtype, an annotated assignment and a cast.
    @T.prim_func
    def main(X: T.Tensor((N,), T.int), offset: T.int,
             Y: T.Tensor((N, 2), T.uint)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            start = T.alloc_var(T.int)
            start = bx * block
            for i in T.Parallel(block):
                at = start + i
                if at < N:
                    shifted: T.uint = X[at] + offset
                    Y[at, 0] = shifted
                    Y[at, 1] = T.uint(X[at]) * T.uint(2)
    return main


def test_int_and_uint_annotate_kernel_values(backend, rng):
    k = offset_counts()
    assert "main(X: i32[N], offset: i32, Y: u32[N, 2])" in k.ir
    assert "alloc local start: i32[1]" in k.ir
    n = 3 * 64 + int(rng.integers(1, 63))
    x = rng.integers(0, 1 << 20, n).astype(np.int32)
    y = k(x, 1000)
    assert y.dtype == np.uint32
    np.testing.assert_array_equal(y[:, 0], (x + 1000).astype(np.uint32))
    np.testing.assert_array_equal(y[:, 1], (x * 2).astype(np.uint32))


def test_star_import_leaves_python_int_alone():
    scope = {}
    exec("from kiln.language import *", scope)
    assert "int" not in scope
    assert scope["uint"] is T.uint and scope["tfloat32"] is T.tfloat32
    assert scope["alloc_buffer"] is T.alloc_buffer


# --- T.tfloat32 -------------------------------------------------------------

def test_tfloat32_is_float32_storage_with_a_name_of_its_own():
    assert str(T.tfloat32) == "tfloat32" and repr(T.tfloat32) == "T.tfloat32"
    assert T.tfloat32.bits == 32
    # TileLang's own comparisons: tfloat32 is not float32 ...
    assert T.tfloat32 != T.float32 and T.float32 != T.tfloat32
    assert T.tfloat32 != "float32" and "float32" != T.tfloat32
    assert T.float32 != "tfloat32"
    assert T.tfloat32 not in [T.float16, T.float32]
    # ... and equals its spellings, TileLang's printed one included.
    assert T.tfloat32 == "tfloat32" and T.tfloat32 == "custom[tfloat32]"
    assert T.dtype("tfloat32") == T.tfloat32
    assert T.dtype(T.tfloat32).name == "tfloat32"
    assert {T.float32: "f32", T.tfloat32: "tf32"}[T.dtype("tfloat32")] == \
        "tf32"


def test_tfloat32_tensors_are_torch_float32():
    torch = pytest.importorskip("torch")
    assert T.tfloat32.as_torch() is torch.float32


@kiln.jit(out_idx=[-1])
def tf32_gemm(M, K, block_M=32, block_N=32, block_K=32):
    # TileLang's spelling of an fp32 GEMM meant for tf32 tensor cores.
    @T.prim_func
    def main(A: T.Tensor((M, K), T.tfloat32), B: T.Tensor((N, K), "tfloat32"),
             C: T.Tensor((M, N), T.float32)):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=128) as (bx, by):
            a_s = T.alloc_shared((block_M, block_K), T.tfloat32)
            b_s = T.alloc_shared((block_N, block_K), T.tfloat32)
            a = T.alloc_fragment((block_M, block_K), T.tfloat32)
            acc = T.alloc_fragment((block_M, block_N), T.float32)
            T.clear(acc)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=2):
                T.copy(A[by * block_M, k * block_K], a_s)
                T.copy(B[bx * block_N, k * block_K], b_s)
                T.copy(a_s, a)
                T.gemm(a, b_s, acc, transpose_B=True)
            T.copy(acc, C[by * block_M, bx * block_N])
    return main


def test_a_tfloat32_gemm_computes_in_float32(backend, rng):
    m, k, n = 70, 96, 45 + int(rng.integers(1, 19))
    kernel = tf32_gemm(m, k)
    # Stored and multiplied as f32 throughout.
    assert "main(A: f32[70, 96], B: f32[N, 96], C: f32[70, N])" in kernel.ir
    assert "alloc fragment a: f32[32, 32]" in kernel.ir
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32)
    want = a.astype(np.float64) @ b.astype(np.float64).T
    # A tf32 product keeps 10 mantissa bits of each operand: errors near
    # 1e-3 here. Kiln's stay at f32 rounding.
    np.testing.assert_allclose(kernel(a, b), want, rtol=0, atol=2e-4)
    # 1 + 2**-12 is exact in f32 and rounds to 1 in tf32: every sum of 96
    # such products is exact in f32, and would be 96 in tf32.
    ones = np.ones((n, k), np.float32)
    c = kernel(np.full((m, k), 1 + 2.0 ** -12, np.float32), ones)
    np.testing.assert_array_equal(c, np.full((m, n), 96 * (1 + 2.0 ** -12),
                                             np.float32))
