"""How each T.* construct maps to tile IR (one behaviour per test)."""

import os
import subprocess

import pytest

import kiln
import kiln.language as T
from kiln.layout import make_padded_layout, make_swizzled_layout

from conftest import cli_path


def body(prim):
    """The kernel body lines, without the header and the closing brace."""
    lines = prim.ir.splitlines()
    start = next(i for i, l in enumerate(lines) if l.lstrip().startswith("grid("))
    return [l.strip() for l in lines[start + 1:-1]]


def check(tmp_path, prim):
    """`kiln ir check` accepts the kernel (run last: it may skip)."""
    kiln_cli = cli_path()
    if not os.access(kiln_cli, os.X_OK):
        pytest.skip(f"kiln CLI not found at {kiln_cli}: set KILN_CLI")
    path = tmp_path / "k.tile"
    path.write_text(prim.ir)
    r = subprocess.run([kiln_cli, "ir", "check", str(path)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + "\n" + prim.ir


def test_sibling_loops_reuse_python_names_but_get_unique_ir_names(tmp_path):
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float32"), B: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a)
            for i, j in T.Parallel(64, 64):
                a[i, j] = a[i, j] * 2
            for i, j in T.Parallel(64, 64):
                a[i, j] = a[i, j] + 1
            for i in T.Serial(2):
                for j in T.Parallel(64):
                    a[j, i] = 0
            T.copy(a, B)

    lines = body(k)
    assert "parallel (i, j) in (64, 64) {" in lines
    assert "parallel (i_1, j_1) in (64, 64) {" in lines
    assert "for i_2 in serial(2) {" in lines
    assert "a[j_2, i_2] = 0" in lines
    check(tmp_path, k)


def test_floor_division_of_integers_becomes_ir_slash():
    N = T.symbolic("N")

    @T.prim_func
    def k(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 128), threads=128) as blk:
            a = T.alloc_fragment((128,), "float32")
            T.copy(A[blk * 128], a)
            for i in T.Parallel(128):
                a[i] = A[(blk * 128 + i) // 2] + A[N // 3] + 7 // 2
            T.copy(a, B[blk * 128])

    assert "a[i] = A[(blk * 128 + i) / 2] + A[N / 3] + 3" in body(k)


def test_python_values_fold_and_static_if_picks_a_branch():
    scale = 0.5
    use_relu = False

    @T.prim_func
    def k(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            a = T.alloc_fragment((16,), "float32")
            T.copy(A, a)
            twice = scale * 2
            for i in T.Parallel(16):
                if use_relu:
                    a[i] = T.max(a[i], 0)
                else:
                    a[i] = a[i] * twice + T.exp(0.0)
            T.copy(a, B)

    lines = body(k)
    assert "a[i] = a[i] * 1.0 + 1.0" in lines
    assert not any("max" in l for l in lines)


def test_kernel_if_elif_else_and_lets(tmp_path):
    N = T.symbolic("N")

    @T.prim_func
    def k(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32"),
          mode: T.int32):
        with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
            a = T.alloc_fragment((64,), "float32")
            T.copy(A[bx * 64], a)
            if mode == 0:
                for i in T.Parallel(64):
                    x = a[i]
                    a[i] = x * x
            elif mode == 1:
                for i in T.Parallel(64):
                    x = a[i] + 1
                    a[i] = x if x > 0 else -x
            else:
                T.clear(a)
            T.copy(a, B[bx * 64])

    lines = body(k)
    assert "if mode == 0 {" in lines
    assert "} else if mode == 1 {" in lines
    assert "} else {" in lines
    assert "let x = a[i]" in lines
    assert "let x_1 = a[i_1] + 1" in lines
    assert "a[i_1] = select(x_1 > 0, x_1, -x_1)" in lines
    check(tmp_path, k)


def test_copy_start_element_takes_extents_from_the_tile_right_aligned():
    @T.prim_func
    def k(A: T.Tensor((4, 256, 64), "float16"), B: T.Tensor((4, 256, 64), "float16")):
        with T.Kernel(4, 2, threads=128) as (bx, by):
            s = T.alloc_shared((128, 64), "float16")
            T.copy(A[bx, by * 128, 0], s)
            T.copy(s, B[bx, by * 128:(by + 1) * 128, :])

    lines = body(k)
    assert "copy A[bx, by * 128:+128, 0:+64] -> s" in lines
    assert "copy s -> B[bx, by * 128:+128, :]" in lines


def test_slice_extents_simplify_with_tunables():
    BM = kiln.language.symbolic("S")  # a symbol keeps the slice symbolic

    @T.prim_func
    def k(A: T.Tensor((BM, 64), "float32"), B: T.Tensor((BM, 64), "float32")):
        with T.Kernel(T.ceildiv(BM, 32), threads=128) as bx:
            s = T.alloc_shared((32, 64), "float32")
            T.copy(A[bx * 32:(bx + 1) * 32, 8:], s[:, 8:])
            T.copy(s, B[bx * 32:bx * 32 + 32, :])

    lines = body(k)
    assert "copy A[bx * 32:+32, 8:+56] -> s[:, 8:+56]" in lines
    assert "copy s -> B[bx * 32:+32, :]" in lines


def test_gemm_flags_policy_reduce_cumsum_atomic(tmp_path):
    @T.prim_func
    def k(A: T.Tensor((64, 32), "float16"), B: T.Tensor((64, 32), "float16"),
          C: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 32), "float16")
            b = T.alloc_shared((64, 32), "float16")
            c = T.alloc_fragment((64, 64), "float32")
            r = T.alloc_fragment((64,), "float32")
            s = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a)
            T.copy(B, b)
            T.gemm(a, b, c, transpose_B=True, clear_accum=True,
                   policy=T.GemmWarpPolicy.FullCol)
            T.cumsum(c, s, dim=1, reverse=True)
            T.reduce_absmax(s, r, dim=-1, clear=False)
            T.reduce_sum(c, r)
            T.atomic_add(C, r)

    lines = body(k)
    assert "gemm a, b -> c transpose_b clear_accum policy=full_col" in lines
    assert "cumsum c -> s, dim=1, reverse=true" in lines
    assert "reduce.absmax s -> r, dim=1, clear=false" in lines
    assert "reduce.sum c -> r, dim=1" in lines
    assert "atomic_add C, r" in lines
    check(tmp_path, k)


def test_layouts_swizzle_and_alloc_var(tmp_path):
    @T.prim_func
    def k(A: T.Tensor((64, 64), "float16"), B: T.Tensor((64, 64), "float16")):
        with T.Kernel(1, threads=128) as bx:
            T.use_swizzle(panel_size=4, order="column")
            s = T.alloc_shared((64, 64), "float16")
            p = T.alloc_shared((64, 64), "float16")
            n = T.alloc_var("int32", init=0)
            T.annotate_layout({s: make_swizzled_layout(s),
                               p: make_padded_layout(p, 8)})
            T.copy(A, s)
            for t in T.Unroll(3):
                n += t
            T.copy(s, p)
            T.copy(p, B)

    lines = body(k)
    assert lines[0] == "rasterize(panel=4, order=column)"
    assert "alloc shared s: f16[64, 64] layout swizzle(128)" in lines
    assert "alloc shared p: f16[64, 64] layout padded(8)" in lines
    assert "alloc local n: i32[1]" in lines
    assert "n[0] = 0" in lines
    assert "for t in unroll(3) {" in lines
    assert "n[0] += t" in lines
    check(tmp_path, k)


def test_pipelined_stages_zero_is_serial_and_range_is_serial():
    @T.prim_func
    def k(A: T.Tensor((64,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            a = T.alloc_fragment((64,), "float32")
            for k0 in T.Pipelined(4, num_stages=0):
                T.copy(A, a)
            for k1 in T.Pipelined(1, 4, num_stages=2):
                T.copy(A, a)
            for k2 in range(2, 5):
                T.copy(a, A)

    lines = body(k)
    assert "for k0 in serial(4) {" in lines
    assert "for k1 in pipelined(1, 4, stages=2) {" in lines
    assert "for k2 in serial(2, 5) {" in lines


def test_tilelang_dtype_spellings_and_scalar_params():
    @T.prim_func
    def k(A: T.Tensor((8,), "bfloat16"), B: T.Tensor((8,), T.float8_e4m3),
          C: T.Tensor((8,), "float"), D: T.Tensor((8,), "int8"),
          s: T.float16, flag: T.bool):
        with T.Kernel(1, threads=32) as bx:
            a = T.alloc_fragment((8,), "f32")
            T.copy(A, a)
            T.copy(a, C)

    assert k.ir.startswith(
        "kernel k(A: bf16[8], B: f8e4m3[8], C: f32[8], D: i8[8], s: f16, "
        "flag: bool)\n")
    assert [p.dtype for p in k.params] == ["bf16", "f8e4m3", "f32", "i8",
                                           "f16", "bool"]


def test_symbolic_dims_are_shared_and_recorded():
    M, N = T.symbolic("M"), T.dynamic("N")

    @T.prim_func
    def k(A: T.Tensor((M, N), "float32"), B: T.Tensor((N, 3), "float32")):
        with T.Kernel(T.ceildiv(M, 4), threads=32) as bx:
            a = T.alloc_fragment((4, 3), "float32")
            T.copy(B[0, 0], a[0:1, :])

    assert k.symbols == ["M", "N"]
    assert k.params[0].shape == ("M", "N")
    assert k.params[1].shape == ("N", 3)


def test_python_helpers_and_casts():
    def gelu(x):
        return 0.5 * x * (1 + T.tanh(0.7978845608028654 * (x + 0.044715 * x ** 2 * x)))

    @T.prim_func
    def k(A: T.Tensor((32,), "float16"), B: T.Tensor((32,), "float16")):
        with T.Kernel(1, threads=32) as bx:
            a = T.alloc_fragment((32,), "float32")
            b = T.alloc_fragment((32,), "float16")
            T.copy(A, a)
            for i in T.Parallel(32):
                b[i] = T.cast(gelu(a[i]), "float16") + T.float16(1)
            T.copy(b, B)

    # The helper runs on kernel values; Python's grouping is kept.
    assert ("b[i] = f16(0.5 * a[i] * (1 + tanh(0.7978845608028654 * "
            "(a[i] + 0.044715 * (a[i] * a[i]) * a[i])))) + f16(1)") in body(k)


def test_line_map_maps_ir_lines_to_python_lines():
    import inspect

    @T.prim_func
    def k(A: T.Tensor((8,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            a = T.alloc_fragment((8,), "float32")
            T.copy(a, A)

    ir_lines = k.ir.splitlines()
    copy_line = ir_lines.index("  copy a -> A") + 1
    here = inspect.currentframe().f_lineno
    # The T.copy call is 4 lines above the line that read f_lineno.
    assert k.line_map[copy_line] == here - 4


def test_assume_macro_and_condition_operators(tmp_path):
    N = T.symbolic("N")

    @T.macro
    def clamp_row(tile, lo):
        for i in T.Parallel(64):
            tile[i] = T.max(tile[i], lo)

    @T.prim_func
    def k(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, 64), threads=64) as bx:
            T.assume(N % 64 == 0)
            a = T.alloc_fragment((64,), "float32")
            T.copy(A[bx * 64], a)
            clamp_row(a, 0.0)
            clamp_row(a, -1.0)
            for i in T.Parallel(64):
                if (i > 2) & (bx < 3) | (not i < 9):
                    a[i] = 0
            T.copy(a, B[bx * 64])

    assert "  assume N % 64 == 0" in k.ir.splitlines()
    lines = body(k)
    assert "a[i] = max(a[i], 0.0)" in lines
    assert "a[i_1] = max(a[i_1], -1.0)" in lines
    assert "if i_2 > 2 && bx < 3 || !(i_2 < 9) {" in lines
    check(tmp_path, k)


def test_numpy_scalars_are_python_numbers():
    import numpy as np
    n = np.int64(16)

    @T.prim_func
    def k(A: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=32) as bx:
            a = T.alloc_fragment((n,), "float32")
            T.copy(A, a)
            for i in T.Parallel(n):
                a[i] = a[i] * np.float32(0.5) + np.int32(2)
            T.copy(a, A)

    assert k.params[0].shape == (16,)
    assert "a[i] = a[i] * 0.5 + 2" in body(k)
