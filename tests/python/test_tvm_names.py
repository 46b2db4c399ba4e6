"""``kiln.tvm`` (issue 25): the TVM names TileLang kernels import
(``from tilelang import tvm as tvm``, ``from tvm import DataType, tirx``),
the uint16 kernel values and ``reinterpret`` their dequantisation helpers
compute with, and the clear errors for what Kiln does not provide. Values
run on the CPU target against NumPy with ragged shapes."""

import math
import os
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
import kiln.language as T
from kiln import tvm as tvm
from kiln.tvm import DataType, tirx
from test_errors import line_of, load

N = T.symbolic("N")
PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), "client", "python")


def run_python(code, extra_path=None):
    """Runs ``code`` in a fresh interpreter with kiln importable; returns
    its stdout."""
    path = [PACKAGE] + ([extra_path] if extra_path else [])
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(path))
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                       env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


# --- `tvm` as a module name ----------------------------------------------

def test_importing_kiln_tvm_makes_tvm_importable():
    out = run_python("""
        import sys
        import kiln
        assert "tvm" not in sys.modules  # `import kiln` registers nothing
        from kiln import tvm as tvm
        from tvm import DataType, tirx
        import tvm.tir
        from tvm.tirx import PrimExpr
        import kiln.language as T
        assert tvm.AS_TVM and sys.modules["tvm"] is tvm
        assert tvm.tir is tirx and PrimExpr is tirx.PrimExpr
        print(DataType("float16").bits, tirx.const(3, T.uint16))
        """)
    assert out == "16 u32(3)\n"


def test_an_installed_tvm_is_never_shadowed(tmp_path):
    (tmp_path / "tvm").mkdir()
    (tmp_path / "tvm" / "__init__.py").write_text("REAL = True\n")
    out = run_python("""
        from kiln import tvm as ktvm
        import tvm
        from kiln.tvm import DataType, tirx
        assert tvm.REAL and not ktvm.AS_TVM
        print(DataType("bfloat16").bits, tirx.Min(1, 2))
        """, extra_path=str(tmp_path))
    assert out == "16 1\n"


# --- DataType and the dtype objects ---------------------------------------

def test_datatype_is_t_dtype_with_tvm_bits():
    assert DataType is T.dtype and kiln.DataType is T.dtype
    assert DataType("float16").bits == 16 and DataType(T.bfloat16).bits == 16
    assert DataType("int8").bits == 8 and DataType("uint16").bits == 16
    assert DataType("float32") == T.float32 and DataType("uint16") == "uint16"
    with pytest.raises(kiln.KilnSourceError, match="unknown dtype"):
        DataType("custom[float4_e2m1_unpacked]8")


def test_a_dtype_is_the_str_of_its_tilelang_name():
    # TileLang's dtypes are TVM DataTypes, which are strs: examples pick
    # torch dtypes with getattr(torch, T.float16).
    torch = pytest.importorskip("torch")
    assert isinstance(T.float16, str) and str(T.bfloat16) == "bfloat16"
    assert getattr(torch, T.float16) is torch.float16
    assert torch.__getattribute__(T.bfloat16) is torch.bfloat16
    assert T.float16 == "half" and not (T.float16 != "half")
    assert T.float16 != T.bfloat16 and T.float32 != "int32"
    assert {"float16": 1}[T.float16] == 1 and repr(T.uint8) == "T.uint8"
    for t in (T.float16, T.float8_e4m3, T.uint16):
        back = pickle.loads(pickle.dumps(t))
        assert (back.ir, back.name, repr(back)) == (t.ir, t.name, repr(t))


# --- tirx: the expression names --------------------------------------------

def test_tirx_names_build_what_their_t_counterparts_build():
    x = T.float32(1.0) + 2.0  # a kernel value
    i = T.int32(7)
    assert str(tirx.const(2)) == "i32(2)"
    assert str(tirx.const(1.5)) == "f32(1.5)"
    assert str(tirx.const(True)) == "bool(true)"
    assert str(tirx.const(3, T.float16)) == "f16(3)"
    assert str(tirx.Cast(T.int8, x)) == str(T.Cast(T.int8, x)) == \
        "i8(f32(1.0) + 2.0)"
    assert str(tirx.Select(x > 0, x, -x)) == str(T.if_then_else(x > 0, x, -x))
    assert str(tirx.if_then_else(x > 0, x, 0.0)) == \
        str(T.if_then_else(x > 0, x, 0.0))
    assert str(tirx.Min(i, 3)) == str(T.min(i, 3)) == "min(i32(7), 3)"
    assert str(tirx.Max(i, 3)) == str(T.max(i, 3))
    u = T.uint16(i)
    assert str(tirx.reinterpret(T.float16, u)) == \
        str(T.reinterpret(u, T.float16)) == str(T.reinterpret(T.float16, u))
    assert isinstance(x, tirx.PrimExpr)


def test_unsupported_tvm_names_say_what_to_use():
    with pytest.raises(kiln.KilnSourceError) as info:
        tirx.IndexMap.from_func(lambda i, j: [j, i], index_dtype=T.int32)
    assert str(info.value) == (
        "tvm.tirx.IndexMap is not supported by Kiln: a global tensor's index "
        "map is T.Layout(shape, fn) for T.annotate_layout "
        "(kiln.layout.IndexMap); shared tiles take "
        "kiln.layout.make_swizzled_layout, make_padded_layout or "
        "make_row_major_layout, and there is no IndexMap.from_func or "
        "layout plotting")
    with pytest.raises(kiln.KilnSourceError,
                       match=r"^tvm.target is not supported by Kiln: pass "
                             r"target= to kiln.jit"):
        tvm.target.Target("llvm")
    with pytest.raises(kiln.KilnSourceError,
                       match=r"^tvm.testing is not supported by Kiln: use "
                             r"kiln.testing"):
        tvm.testing.requires_package("bitblas")
    with pytest.raises(AttributeError) as info:
        tirx.Var
    assert str(info.value) == (
        "module 'tvm.tirx' has no attribute 'Var' in Kiln: it provides "
        "Cast, Max, Min, PrimExpr, Select, const, if_then_else, reinterpret "
        "(kiln.tvm.tirx)")
    with pytest.raises(AttributeError, match="provides DataType, tirx and "
                                             "tir"):
        tvm.relay


def test_an_unsupported_tvm_name_in_a_kernel_points_at_its_line(tmp_path):
    module, path = load(tmp_path, """
        from kiln.tvm import tirx

        def build():
            @T.prim_func
            def main(A: T.Tensor((8,), "float32")):
                with T.Kernel(1, threads=32) as bx:
                    m = tirx.IndexMap.from_func(lambda i: i)  # HERE
            return main
        """)
    with pytest.raises(kiln.KilnSourceError) as info:
        module.build().ir
    line = line_of(path, "# HERE")
    assert str(info.value).startswith(
        f"{path}:{line}: tvm.tirx.IndexMap is not supported by Kiln: ")


# --- uint16 kernel values -------------------------------------------------

# (kernel op on u16 values a, b, s (< 16), c (int32), f (float32) and d
# (uint8); the same op on NumPy uint16 arrays)
U16_OPS = [
    (lambda a, b, s, c, f, d: a + b, lambda a, b, s, c, f, d: a + b),
    (lambda a, b, s, c, f, d: a - b, lambda a, b, s, c, f, d: a - b),
    (lambda a, b, s, c, f, d: a * b, lambda a, b, s, c, f, d: a * b),
    (lambda a, b, s, c, f, d: a << s, lambda a, b, s, c, f, d: a << s),
    (lambda a, b, s, c, f, d: a >> s, lambda a, b, s, c, f, d: a >> s),
    (lambda a, b, s, c, f, d: a & b | s ^ a,
     lambda a, b, s, c, f, d: a & b | s ^ a),
    (lambda a, b, s, c, f, d: ~a, lambda a, b, s, c, f, d: ~a),
    (lambda a, b, s, c, f, d: -a, lambda a, b, s, c, f, d: -a),
    (lambda a, b, s, c, f, d: a // T.max(b, 1),
     lambda a, b, s, c, f, d: a // np.maximum(b, 1)),
    (lambda a, b, s, c, f, d: a % T.max(b, 1),
     lambda a, b, s, c, f, d: a % np.maximum(b, 1)),
    (lambda a, b, s, c, f, d: T.min(a, b) + T.max(a, b) * 3,
     lambda a, b, s, c, f, d: np.minimum(a, b) + np.maximum(a, b) * 3),
    (lambda a, b, s, c, f, d: a < b, lambda a, b, s, c, f, d: a < b),
    (lambda a, b, s, c, f, d: tirx.Select(a == b, a, b + 1),
     lambda a, b, s, c, f, d: np.where(a == b, a, b + 1)),
    # An int literal out of range wraps into 16 bits first.
    (lambda a, b, s, c, f, d: a + 70000 - 1,
     lambda a, b, s, c, f, d: a + np.uint16(70000 % 65536) - np.uint16(1)),
    # A u8 operand gives u16 arithmetic.
    (lambda a, b, s, c, f, d: a - d,
     lambda a, b, s, c, f, d: a - d.astype(np.uint16)),
    # An int32 operand gives int32 arithmetic, not uint32.
    (lambda a, b, s, c, f, d: a - c,
     lambda a, b, s, c, f, d: a.astype(np.int32) - c),
    (lambda a, b, s, c, f, d: a > c,
     lambda a, b, s, c, f, d: a.astype(np.int32) > c),
    # Casts: an integer wraps, a float saturates, to int16 reinterprets.
    (lambda a, b, s, c, f, d: T.uint16(c),
     lambda a, b, s, c, f, d: c.astype(np.uint16)),
    (lambda a, b, s, c, f, d: f.astype(T.uint16),
     lambda a, b, s, c, f, d: np.clip(f, 0, 65535).astype(np.uint16)),
    (lambda a, b, s, c, f, d: T.int16(a),
     lambda a, b, s, c, f, d: a.view(np.int16)),
    (lambda a, b, s, c, f, d: tirx.const(-1, "uint16") - a,
     lambda a, b, s, c, f, d: np.uint16(65535) - a),
]

OP_NUMBERS = tuple(range(len(U16_OPS)))


@kiln.jit(out_idx=[-1])
def u16_ops(block=64):
    @T.prim_func
    def main(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"),
             C: T.Tensor((N,), "int32"), F: T.Tensor((N,), "float32"),
             D: T.Tensor((N,), "uint8"),
             Out: T.Tensor((N, len(U16_OPS)), "int32")):
        with T.Kernel(T.ceildiv(N, block), threads=64) as bx:
            for i in T.Parallel(block):
                n = bx * block + i
                if n < N:
                    a = A[n].astype(T.uint16)
                    b = T.uint16(B[n])
                    s = B[n].astype("uint16") & 15
                    for k in OP_NUMBERS:  # unrolled by Python
                        Out[n, k] = U16_OPS[k][0](a, b, s, C[n], F[n], D[n])
    return main


def test_uint16_values_compute_in_16_bits(backend, rng):
    n = 300 + int(rng.integers(1, 63))
    a = rng.integers(0, 65536, n).astype(np.int32)
    b = rng.integers(0, 65536, n).astype(np.int32)
    a[:4], b[:4] = [0, 65535, 1, 40000], [0, 65535, 65535, 2]
    c = rng.integers(-100000, 100000, n).astype(np.int32)
    f = (rng.standard_normal(n) * 40000).astype(np.float32)
    f[:3] = [-3.5, 70000.0, 1234.75]
    d = rng.integers(0, 256, n).astype(np.uint8)
    got = u16_ops()(a, b, c, f, d)
    a16, b16 = a.astype(np.uint16), b.astype(np.uint16)
    s16 = b16 & np.uint16(15)
    for k, (_, ref) in enumerate(U16_OPS):
        want = ref(a16, b16, s16, c, f, d).astype(np.int32)
        np.testing.assert_array_equal(got[:, k], want, err_msg=f"op {k}")


def test_uint16_is_a_value_type_not_a_tile_type(tmp_path):
    module, path = load(tmp_path, """
        def build():
            @T.prim_func
            def main(A: T.Tensor((8,), "float32")):
                with T.Kernel(1, threads=32) as bx:
                    t = T.alloc_fragment((8,), T.uint16)  # HERE
            return main
        """)
    with pytest.raises(kiln.KilnSourceError) as info:
        module.build().ir
    line = line_of(path, "# HERE")
    assert str(info.value) == (
        f"{path}:{line}: uint16 tiles, tensors and parameters are not "
        "supported: the tile IR has no 16-bit unsigned type (uint16 kernel "
        "values are: T.uint16(x), x.astype('uint16')); store the values as "
        "int32 or uint32")
    with pytest.raises(kiln.KilnSourceError, match="^uint16 tiles, tensors"):
        T.Tensor((8,), "uint16")


# --- reinterpret ----------------------------------------------------------

@kiln.jit(out_idx=[-1])
def bits_as(to, src, via, out="float32", block=128):
    # Out[n] = the bits of A[n] (as `via`) read as `to`.
    @T.prim_func
    def main(A: T.Tensor((N,), src), Out: T.Tensor((N,), out)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as blk:
            for i in T.Parallel(block):
                if blk * block + i < N:
                    Out[blk * block + i] = T.reinterpret(
                        A[blk * block + i].astype(via), to)
    return main


def assert_same_floats(got, want):
    np.testing.assert_array_equal(got, want)  # NaNs at the same places
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_reinterpret_reads_every_16_bit_pattern_as_a_float(backend):
    bits = np.arange(65536, dtype=np.int32)
    assert_same_floats(bits_as("float16", "int32", "uint16")(bits),
                       bits.astype(np.uint16).view(np.float16)
                       .astype(np.float32))
    assert_same_floats(bits_as("bfloat16", "int32", "int16")(bits),
                       (bits.astype(np.uint32) << 16).view(np.float32))


def test_reinterpret_reads_32_bit_patterns_as_float32(backend, rng):
    n = 100000 + int(rng.integers(1, 127))
    bits = rng.integers(-(1 << 31), 1 << 31, n).astype(np.int32)
    special = [0, -(1 << 31), 1, 0x007FFFFF, 0x00800000, 0x7F7FFFFF,
               0x7F800000, -0x800000, 0x7FC00000, 0x3F800000]
    bits[:len(special)] = special
    assert_same_floats(bits_as("float32", "int32", "int32")(bits),
                       bits.view(np.float32))
    assert_same_floats(bits_as("float32", "uint32", "uint32")(
        bits.view(np.uint32)), bits.view(np.float32))


def _fp8_value(b, ebits, mbits, bias, has_inf):
    s, e, m = b >> (ebits + mbits), (b >> mbits) & ((1 << ebits) - 1), \
        b & ((1 << mbits) - 1)
    top = e == (1 << ebits) - 1
    if has_inf and top:
        v = math.inf if m == 0 else math.nan
    elif not has_inf and top and m == (1 << mbits) - 1:
        v = math.nan
    elif e == 0:
        v = math.ldexp(m, 1 - bias - mbits)
    else:
        v = math.ldexp((1 << mbits) + m, e - bias - mbits)
    return -v if s else v


@pytest.mark.parametrize("to,fields", [("float8_e4m3", (4, 3, 7, False)),
                                       ("float8_e5m2", (5, 2, 15, True))])
def test_reinterpret_reads_every_byte_as_fp8(backend, to, fields):
    got = bits_as(to, "uint8", "uint8")(np.arange(256, dtype=np.uint8))
    want = np.array([_fp8_value(b, *fields) for b in range(256)],
                    dtype=np.float32)
    assert_same_floats(got, want)


def test_reinterpret_reads_a_floats_bits_as_an_integer(backend, rng):
    # float32 -> int32 / uint32 (DeepSeek's power-of-two scale rounding and
    # sortable keys read an f32's bits), float64 <-> int64, and float16 /
    # bfloat16 -> uint16 / int16, against NumPy's view of the same bytes.
    n = 5000 + int(rng.integers(1, 127))
    f32 = rng.integers(-(1 << 31), 1 << 31, n).astype(np.int32).view(
        np.float32)
    f32[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45]
    np.testing.assert_array_equal(
        bits_as("int32", "float32", "float32", out="int32")(f32),
        f32.view(np.int32))
    np.testing.assert_array_equal(
        bits_as("uint32", "float32", "float32", out="int64")(f32),
        f32.view(np.uint32).astype(np.int64))
    f64 = rng.integers(-(1 << 62), 1 << 62, n).view(np.float64)
    f64 = f64[~np.isnan(f64)]
    np.testing.assert_array_equal(
        bits_as("int64", "float64", "float64", out="int64")(f64),
        f64.view(np.int64))
    i64 = f64.view(np.int64)
    assert_same_floats(
        bits_as("float64", "int64", "int64", out="float64")(i64), f64)
    # Every 16-bit pattern but the NaNs (whose payload the manual leaves
    # open), through a float16 tensor.
    f16 = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(
        np.float16)
    f16 = f16[~np.isnan(f16)]
    np.testing.assert_array_equal(
        bits_as("uint16", "float16", "float16", out="int32")(f16),
        f16.view(np.uint16).astype(np.int32))
    np.testing.assert_array_equal(
        bits_as("int16", "float16", "float16", out="int32")(f16),
        f16.view(np.int16).astype(np.int32))
    # bfloat16: f32 values with 16 low zero bits, converted exactly.
    top = rng.integers(0, 1 << 16, n).astype(np.uint32)
    top = top[(top & 0x7F80) != 0x7F80]  # no infinities or NaNs
    bf = (top << 16).view(np.float32)
    np.testing.assert_array_equal(
        bits_as("uint16", "float32", "bfloat16", out="int32")(bf),
        top.astype(np.int32))


def test_reinterpret_between_integers_keeps_the_bits(backend):
    u8 = np.arange(256, dtype=np.uint8)
    np.testing.assert_array_equal(
        bits_as("int8", "uint8", "uint8", out="int32")(u8),
        u8.view(np.int8).astype(np.int32))
    i32 = np.array([-1, -(1 << 31), 5, (1 << 31) - 1], dtype=np.int32)
    np.testing.assert_array_equal(
        bits_as("uint32", "int32", "int32", out="int64")(i32),
        i32.view(np.uint32).astype(np.int64))


@pytest.mark.parametrize("expr,message", [
    ("T.reinterpret(A[0] > 0.0, T.int8)",
     "T.reinterpret from bool to int8 is not supported: it reinterprets "
     "numbers of the same width, not bools"),
    ("T.reinterpret(A[0].astype(T.uint16), T.float32)",
     "T.reinterpret to float32 (32 bits) of 'min(u32(A[0]), 65535)', "
     "a uint16 (16 bits): the widths differ"),
    ("tirx.reinterpret(T.float32, 1065353216)",
     "T.reinterpret of the literal '1065353216' needs a dtype: cast it "
     "first (T.uint32(1065353216))"),
])
def test_reinterpret_refusals_point_at_the_line(tmp_path, expr, message):
    module, path = load(tmp_path, f"""
        from kiln.tvm import tirx

        def build():
            @T.prim_func
            def main(A: T.Tensor((8,), "float32")):
                with T.Kernel(1, threads=32) as bx:
                    A[1] = {expr}  # HERE
            return main
        """)
    with pytest.raises(kiln.KilnSourceError) as info:
        module.build().ir
    line = line_of(path, "# HERE")
    assert str(info.value) == f"{path}:{line}: {message}"


def test_an_element_has_dtype_and_astype(backend):
    seen = []

    @kiln.jit(out_idx=[-1])
    def widen():
        @T.prim_func
        def main(A: T.Tensor((N,), "uint8"), B: T.Tensor((N,), "int32")):
            with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
                for i in T.Parallel(64):
                    if bx * 64 + i < N:
                        seen.append(A[bx * 64 + i].dtype)
                        B[bx * 64 + i] = A[bx * 64 + i].astype(T.int32) - 128
        return main

    a = np.arange(200, dtype=np.uint8)
    np.testing.assert_array_equal(widen()(a), a.astype(np.int32) - 128)
    assert seen == [T.uint8]
