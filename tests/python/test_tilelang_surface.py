"""TileLang spellings a port uses unchanged (issue 25, items 5 and 6): each
builds the tile IR its Kiln spelling does and runs on the CPU target against
NumPy with ragged shapes."""

import re

import numpy as np
import pytest

import kiln
import kiln.language as T

N = T.symbolic("N")


@kiln.jit(out_idx=[-1])
def clamp_kernel(block=128, dtype: T.dtype = "float32"):
    # T.Tensor[...] subscripts, a macro whose parameters carry TileLang's
    # buffer annotations, T.clamp, a parameter named like a tile-IR
    # keyword and a manual T.Pipelined schedule.
    @T.macro
    def load(dst: T.FragmentBuffer((block,), dtype),
             src: T.SharedBuffer((block,), dtype)):
        T.copy(src, dst)

    @T.prim_func
    def main(kernel: T.Tensor[(N,), dtype], Y: T.Buffer[(N,), dtype]):
        with T.Kernel(T.ceildiv(N, block), threads=128) as blk:
            s = T.alloc_shared((block,), dtype)
            x = T.alloc_fragment((block,), dtype)
            for _ in T.Pipelined(1, num_stages=1, order=[0, 1],
                                 stage=[0, 0], group=[[0], [1]]):
                T.copy(kernel[blk * block], s)
            load(x, s)
            for i in T.Parallel(block):
                x[i] = T.clamp(x[i], -0.5, 0.5)
            T.copy(x, Y[blk * block])
    return main


def test_tilelang_spellings_build_the_same_ir_as_kiln_spellings(backend, rng):
    k = clamp_kernel()
    ir = k.ir
    # The keyword-named parameter gets an IR name of its own.
    assert "kernel main(kernel_: f32[N], Y: f32[N])" in ir
    assert "copy kernel_[blk * 128:+128] -> s" in ir
    assert "x[i] = max(min(x[i], 0.5), -0.5)" in ir
    n = 1000 + int(rng.integers(1, 127))
    a = rng.standard_normal(n).astype(np.float32)
    np.testing.assert_array_equal(k(a), np.clip(a, -0.5, 0.5))


def test_a_bool_mask_compares_with_integers(backend, rng):
    @kiln.jit(out_idx=[-1])
    def masked():
        @T.prim_func
        def main(Mask: T.Tensor((N,), "bool"), X: T.Tensor((N,), "float32"),
                 Y: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, 128), threads=128) as blk:
                m = T.alloc_fragment((128,), "bool")
                x = T.alloc_fragment((128,), "float32")
                T.copy(Mask[blk * 128], m)
                T.copy(X[blk * 128], x)
                for i in T.Parallel(128):
                    if m[i] == 1:
                        x[i] = 0.0
                    if 0 != m[i]:
                        x[i] = x[i] + 1.0
                T.copy(x, Y[blk * 128])
        return main

    k = masked()
    assert "if m[i] == true {" in k.ir
    n = 300 + int(rng.integers(1, 127))
    mask = rng.integers(0, 2, n).astype(bool)
    x = rng.standard_normal(n).astype(np.float32)
    np.testing.assert_array_equal(k(mask, x), np.where(mask, 1.0, x))


def test_host_helpers():
    assert kiln.cdiv(1000, 128) == 8 and kiln.cdiv(1024, 128) == 8
    assert kiln.math.next_power_of_2(1) == 1
    assert kiln.math.next_power_of_2(100) == 128
    assert kiln.math.next_power_of_2(128) == 128
    assert kiln.math.prev_power_of_2(100) == 64
    # On kernel values, cdiv is T.ceildiv.
    assert str(kiln.cdiv(N, 64)) == str(T.ceildiv(N, 64))
    with pytest.raises(kiln.KilnSourceError, match="Python integers"):
        kiln.math.next_power_of_2(1.5)


def test_unsupported_tilelang_surface_is_refused_clearly():
    with pytest.raises(kiln.KilnSourceError,
                       match="data must be a global tensor's .data"):
        T.Tensor((4,), "float32", object())
    with pytest.raises(kiln.KilnSourceError, match=r"\[shape, dtype\]"):
        T.Tensor[(4,)]


@kiln.jit(out_idx=[1, 2])
def row_normalise(block_M=4, cols=64):
    # TileLang's most common store: tensor elements written from a
    # T.Parallel (issue 25, item 1), here past a ragged last block.
    @T.prim_func
    def main(X: T.Tensor((N, cols), "float32"),
             Y: T.Tensor((N, cols), "float32"),
             L: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block_M), threads=128) as bx:
            x = T.alloc_fragment((block_M, cols), "float32")
            s = T.alloc_fragment((block_M,), "float32")
            T.copy(X[bx * block_M, 0], x)
            T.reduce_sum(x, s, dim=1)
            for i, j in T.Parallel(block_M, cols):
                Y[bx * block_M + i, j] = x[i, j] / s[i]
            for i in T.Parallel(block_M):
                L[bx * block_M + i] = s[i]
    return main


def test_tensor_elements_are_stored_from_a_parallel(backend, rng):
    k = row_normalise()
    assert "Y[bx * 4 + i, j] = x[i, j] / s[i]" in k.ir
    n = 37  # the last block's row 37..39 are past the end: not stored
    x = rng.uniform(0.5, 1.5, (n, 64)).astype(np.float32)
    y, l = k(x)
    np.testing.assert_allclose(l, x.sum(axis=1), rtol=1e-5)
    np.testing.assert_allclose(y, x / x.sum(axis=1, keepdims=True),
                               rtol=1e-5)


def test_a_compound_store_into_a_tensor_is_refused():
    with pytest.raises(kiln.KilnSourceError, match="may race"):
        @T.prim_func
        def main(X: T.Tensor((N,), "float32")):
            with T.Kernel(T.ceildiv(N, 128), threads=128) as blk:
                for i in T.Parallel(128):
                    X[blk * 128 + i] += 1.0
        main.ir  # (translated on first use)


@kiln.jit(out_idx=[-1])
def group_rows(heads=10, kv_heads=2, block_H=16, dim=32):
    # TileLang's GQA decode copies the valid_block_H query rows of a KV
    # head into a block_H-row tile and back: T.copy between regions of
    # unequal constant extents copies the box both hold.
    valid = heads // kv_heads

    @T.prim_func
    def main(Q: T.Tensor((N, heads, dim), "float32"),
             O: T.Tensor((N, heads, dim), "float32")):
        with T.Kernel(kv_heads, N, threads=128) as (hid, bid):
            q = T.alloc_shared((block_H, dim), "float32")
            o = T.alloc_fragment((block_H, dim), "float32")
            T.copy(Q[bid, hid * valid:(hid + 1) * valid, :], q)
            T.copy(q, o)
            for i, j in T.Parallel(block_H, dim):
                o[i, j] = o[i, j] * 2 + i
            T.copy(o, O[bid, hid * valid:(hid + 1) * valid, :])
    return main


def test_copy_between_unequal_extents_copies_the_common_box(rng):
    kernel = group_rows()
    assert "-> q[0:+5, 0:+32]" in kernel.ir
    q = rng.standard_normal((3, 10, 32)).astype(np.float32)
    row = np.arange(10) % 5
    np.testing.assert_allclose(kernel(q), 2 * q + row[None, :, None],
                               rtol=1e-6)


@kiln.jit(out_idx=[-1])
def tvm_if_kernel(block=64):
    # TVM script's conditionals as TileLang kernels write them: the
    # one-line `with T.If(c), T.Then():` and the nested Then / Else form.
    @T.prim_func
    def main(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block), threads=64) as bx:
            x = T.alloc_fragment((block,), "float32")
            T.copy(X[bx * block], x)
            with T.If(bx == 0), T.Then():
                for i in T.Parallel(block):
                    x[i] = -x[i]
            with T.If(bx % 2 == 1):
                with T.Then():
                    for i in T.Parallel(block):
                        x[i] = x[i] * 10
                with T.Else():
                    for i in T.Parallel(block):
                        x[i] = x[i] + 1
            T.copy(x, Y[bx * block])
    return main


def test_tvm_script_if_then_else(rng):
    k = tvm_if_kernel()
    assert "if bx == 0 {" in k.ir and "} else {" in k.ir
    x = rng.standard_normal(200).astype(np.float32)
    block = np.arange(200) // 64
    want = np.where(block == 0, -x, x)
    want = np.where(block % 2 == 1, want * 10, want + 1)
    np.testing.assert_allclose(k(x), want, rtol=1e-6)


def test_misplaced_tvm_script_branches_are_refused():
    with pytest.raises(kiln.KilnSourceError, match="belong directly inside"):
        @T.prim_func
        def lone_else(X: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                with T.Else():
                    X[0] = 1.0
        lone_else.ir
    with pytest.raises(kiln.KilnSourceError, match="one `with T.Then"):
        @T.prim_func
        def else_first(X: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                with T.If(bx == 0):
                    with T.Else():
                        X[0] = 1.0
        else_first.ir


@kiln.jit(out_idx=[-1])
def unflatten(rows, cols, block=128):
    # T.index_to_coordinates over a flat index, T.shift_left/right, the
    # lowercase T.parallel and register-budget hints (accepted, no effect).
    @T.prim_func
    def main(X: T.Tensor((rows, cols), "int32"),
             Y: T.Tensor((rows * cols,), "int32")):
        with T.Kernel(T.ceildiv(rows * cols, block), threads=128) as bx:
            T.set_max_nreg(240, 1)
            for i in T.parallel(block):
                at = bx * block + i
                r, c = T.index_to_coordinates(at, (rows, cols))
                if at < rows * cols:
                    Y[at] = T.shift_right(T.shift_left(X[r, c], 3), 1)
    return main


def test_flat_index_helpers_and_hints(backend, rng):
    rows, cols = 37, 29
    kernel = unflatten(rows, cols)
    x = rng.integers(-1000, 1000, (rows, cols)).astype(np.int32)
    np.testing.assert_array_equal(kernel(x), (x.reshape(-1) << 3) >> 1)
    lines = [line.strip() for line in kernel.ir.splitlines()]
    assert ["let r = at / 29", "let c = at % 29"] == lines[4:6]
    assert "Y[at] = X[r, c] << 3 >> 1" in lines


@pytest.mark.parametrize("construct, reason", [
    ("alloc_tmem", "Blackwell (sm_100)"),
    ("wait_wgmma", "hand-written asynchronous copies and MMA"),
    ("Fragment", "Kiln lays out fragments itself"),
    ("uint64", "no 64-bit unsigned type"),
    ("get_block_binding", "use the block variables T.Kernel binds"),
])
def test_tilelang_constructs_outside_kiln_say_why(construct, reason):
    # Named refusals, also when read outside a kernel (an annotation).
    with pytest.raises(AttributeError,
                       match=f"T.{construct} is not supported: "
                             f".*{re.escape(reason)}"):
        getattr(T, construct)


@kiln.jit(out_idx=[-1])
def roundings(block=128, dtype="float32"):
    # T.floor, T.ceil, T.round (ties to even) and T.trunc, side by side.
    @T.prim_func
    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N, 4), dtype)):
        with T.Kernel(T.ceildiv(N, block), threads=128) as bx:
            for i in T.Parallel(block):
                at = bx * block + i
                if at < N:
                    v = X[at]
                    Y[at, 0] = T.floor(v)
                    Y[at, 1] = T.ceil(v)
                    Y[at, 2] = T.round(v)
                    Y[at, 3] = T.trunc(v)
    return main


@pytest.mark.parametrize("dtype", ["float32", "float16", "float64"])
def test_roundings_match_numpy(backend, rng, dtype):
    n = 200 + int(rng.integers(1, 55))
    x = (rng.integers(-400, 400, n) / 4).astype(dtype)  # quarters, halves
    x[:6] = [0.5, 1.5, -2.5, -0.0, np.inf, np.nan]
    y = roundings(dtype=dtype)(x)
    want = np.stack([np.floor(x), np.ceil(x), np.rint(x), np.trunc(x)], 1)
    np.testing.assert_array_equal(y, want)
    assert np.signbit(y[3]).all()  # -0.0 stays -0.0
    # Python numbers fold the same way.
    assert (T.floor(-1.5), T.ceil(-1.5), T.round(2.5), T.trunc(-1.5)) == \
        (-2.0, -1.0, 2.0, -1.0)
