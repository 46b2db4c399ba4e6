"""T.alloc_reducer and T.finalize_reducer (issue 25): an update inside
T.Parallel whose index leaves out loop variables reduces over them. Run on
the CPU target against NumPy with ragged shapes; misuse, and the same
update of a plain fragment (a race), are located errors."""

import textwrap

import numpy as np
import pytest

import kiln
import kiln.language as T
from kiln.layout import make_swizzled_layout

from test_errors import line_of, load


# A matrix-vector product in TileLang's eager style: each block owns `rows`
# outputs and walks the columns in chunks, every thread adding its products
# into a reducer that the chunk's T.Parallel sums over its columns.
@kiln.jit
def matvec(mat, vec, rows=128, cols=128, stages=2, threads=256,
           dtype: T.dtype = T.float16, acc: T.dtype = T.float32):
    M, N = T.const("M, N")
    mat: T.Tensor((M, N), dtype)
    vec: T.Tensor((N,), dtype)
    out = T.empty((M,), dtype)

    with T.Kernel(T.ceildiv(M, rows), threads=threads) as blk:
        total = T.alloc_reducer(rows, acc, op="sum", replication="all")
        T.clear(total)
        for chunk in T.Pipelined(T.ceildiv(N, cols), num_stages=stages):
            tile = T.alloc_shared((rows, cols), dtype)
            T.copy(mat[blk * rows, chunk * cols], tile)
            part = T.alloc_fragment(cols, dtype)
            T.copy(vec[chunk * cols], part)
            for r, c in T.Parallel(rows, cols):
                total[r] += tile[r, c] * part[c]
        T.finalize_reducer(total)
        T.copy(total, out[blk * rows])

    return out


def test_gemv_with_a_sum_reducer(backend, rng):
    m = 3 * 64 + int(rng.integers(1, 63))
    n = 4 * 32 + int(rng.integers(1, 31))
    kernel = matvec.compile(M=m, N=n, rows=64, cols=32)
    lines = [line.strip() for line in kernel.ir.splitlines()]
    # The update stores its term into a tile over the loop, reduced over
    # the left-out c after the loop into the reducer's current value.
    assert "alloc fragment total_part: f32[64, 32]" in lines
    assert "total_part[r, c] = tile[r, c] * part[c]" in lines
    assert "reduce.sum total_part -> total, dim=1, clear=false" in lines
    a = rng.uniform(-1, 1, (m, n)).astype(np.float16)
    x = rng.uniform(-1, 1, n).astype(np.float16)
    o = matvec(a, x, 64, 32)
    assert o.dtype == np.float16 and o.shape == (m,)
    want = a.astype(np.float32) @ x.astype(np.float32)
    np.testing.assert_allclose(o.astype(np.float32), want, rtol=1e-2,
                               atol=2e-2)


@kiln.jit(out_idx=[-2, -1])
def row_extremes(block_M=8, block_N=16):
    M, N = T.symbolic("M"), T.symbolic("N")

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), Max: T.Tensor((M,), "float32"),
             Min: T.Tensor((M,), "float32")):
        with T.Kernel(T.ceildiv(M, block_M), threads=128) as rb:
            hi = T.alloc_reducer((block_M,), "float32", op="max")
            lo = T.alloc_reducer((block_M,), "float32", op="min",
                                 replication="none")
            T.fill(hi, -T.infinity("float32"))
            T.fill(lo, T.infinity("float32"))
            for k in T.serial(T.ceildiv(N, block_N)):
                a = T.alloc_fragment((block_M, block_N), "float32")
                T.copy(A[rb * block_M, k * block_N], a)
                for r, c in T.Parallel(block_M, block_N):
                    # Under an `if`: the temporary starts at -inf.
                    if k * block_N + c < N:
                        hi[r] = T.max(hi[r], a[r, c])
                    lo[r] = T.min(T.if_then_else(k * block_N + c < N,
                                                 a[r, c], 1e30), lo[r])
            T.finalize_reducer(hi)
            T.finalize_reducer(lo)
            T.copy(hi, Max[rb * block_M])
            T.copy(lo, Min[rb * block_M])
    return main


def test_max_and_min_reducers(backend, rng):
    kernel = row_extremes()
    lines = [line.strip() for line in kernel.ir.splitlines()]
    assert "fill hi_part, -inf" in lines
    assert "hi_part[r, c] = max(hi_part[r, c], a[r, c])" in lines
    assert "reduce.max hi_part -> hi, dim=1, clear=false" in lines
    assert "reduce.min lo_part -> lo, dim=1, clear=false" in lines
    m = 2 * 8 + int(rng.integers(1, 7))
    n = 3 * 16 + int(rng.integers(1, 15))
    # All negative: a zero read past the ragged edge would win the max.
    a = -rng.uniform(1, 2, (m, n)).astype(np.float32)
    hi, lo = kernel(a)
    np.testing.assert_array_equal(hi, a.max(axis=1))
    np.testing.assert_array_equal(lo, a.min(axis=1))


@kiln.jit(out_idx=[-1])
def column_sums(block_M=8, block_N=16):
    M, N = T.symbolic("M"), T.symbolic("N")

    @T.prim_func
    def main(A: T.Tensor((M, N), "float32"), S: T.Tensor((N,), "float32")):
        with T.Kernel(T.ceildiv(N, block_N), threads=128) as cb:
            s = T.alloc_reducer(block_N, "float32")
            T.fill(s, 0.5)  # the reduction adds to the current value
            for k in T.serial(T.ceildiv(M, block_M)):
                a = T.alloc_fragment((block_M, block_N), "float32")
                T.copy(A[k * block_M, cb * block_N], a)
                for r, c in T.Parallel(block_M, block_N):
                    s[c] += a[r, c]
            T.finalize_reducer(s)
            T.copy(s, S[cb * block_N])
    return main


def test_a_reduction_over_the_first_loop_variable(backend, rng):
    kernel = column_sums()
    assert "reduce.sum s_part -> s, dim=0, clear=false" in kernel.ir
    m = 3 * 8 + int(rng.integers(1, 7))
    n = 2 * 16 + int(rng.integers(1, 15))
    a = rng.standard_normal((m, n)).astype(np.float32)
    np.testing.assert_allclose(kernel(a), a.sum(axis=0) + 0.5, rtol=1e-5,
                               atol=1e-5)


@kiln.jit(out_idx=[-2, -1])
def scattered_sums(B=4, R=6, C=8):
    @T.prim_func
    def main(A: T.Tensor((B, R, C), "float32"),
             O: T.Tensor((3, 2 * R + 2), "float32"),
             P: T.Tensor((C, R), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_fragment((B, R, C), "float32")
            r = T.alloc_reducer((3, 2 * R + 2), "float32")
            t = T.alloc_reducer((C, R), "float32")
            T.clear(r)
            T.clear(t)
            T.copy(A, a)
            for b, i, c in T.Parallel(B, R, C):
                r[1, i + 2] += a[b, i, c]        # over b and c
                r[0, 0] += 2 * a[b, i, c]        # over every variable
                row = i + R + 2
                r[2, row] = r[2, row] + a[b, i, c] - 1.0
                t[c, i] -= a[b, i, c]            # over b, transposed
            T.finalize_reducer(r, O)
            T.copy(t, P)
    return main


def test_reductions_over_several_and_leading_variables(rng):
    kernel = scattered_sums()
    lines = [line.strip() for line in kernel.ir.splitlines()]
    # b and c left out: the last dim first, then the first.
    assert "reduce.sum r_part -> r_part_1, dim=2" in lines
    assert "reduce.sum r_part_1 -> r[1, 2:+6], dim=0, clear=false" in lines
    assert "reduce.sum r_part_4 -> r[0, 0], dim=0, clear=false" in lines
    assert "reduce.sum r_part_6 -> r[2, 8:+6], dim=0, clear=false" in lines
    # t[c, i]: the kept dims take the reducer's order.
    assert "t_part[b, c, i] = -a[b, i, c]" in lines
    assert "reduce.sum t_part -> t, dim=0, clear=false" in lines
    assert "copy r -> O" in lines
    a = rng.standard_normal((4, 6, 8)).astype(np.float32)
    o, p = kernel(a)
    want = np.zeros((3, 14), np.float32)
    want[1, 2:8] = a.sum(axis=(0, 2))
    want[0, 0] = 2 * a.sum()
    want[2, 8:14] = a.sum(axis=(0, 2)) - 4 * 8
    np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-4)
    np.testing.assert_allclose(p, -a.sum(axis=0).T, rtol=1e-5, atol=1e-5)


def test_lowering_keeps_layouts_and_the_line_map():
    import inspect

    @T.prim_func
    def k(A: T.Tensor((16, 16), "float16"), O: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((16, 16), "float16")
            r = T.alloc_reducer(16, "float32")
            T.clear(r)
            T.copy(A, s)
            for i, j in T.Parallel(16, 16):
                r[i] += s[i, j]  # the update
            # A layout set after the loop lands on the tile's alloc line.
            T.annotate_layout({s: make_swizzled_layout(s)})
            T.copy(r, O)

    ir = k.ir.splitlines()
    assert "  alloc shared s: f16[16, 16] layout swizzle(32)" in ir
    # The temporary's alloc and the reduction map to the update's line.
    source, first = inspect.getsourcelines(k._func)
    update = first + next(n for n, text in enumerate(source)
                          if "# the update" in text)
    for text in ("  alloc fragment r_part: f32[16, 16]",
                 "  reduce.sum r_part -> r, dim=1, clear=false"):
        assert k.line_map[ir.index(text) + 1] == update


def test_updates_that_do_not_race_are_left_alone():
    @T.prim_func
    def k(A: T.Tensor((16, 16), "float32"), O: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_fragment((16, 16), "float32")
            o = T.alloc_fragment((16,), "float32")
            r = T.alloc_reducer(16, "float32")
            T.copy(A, a)
            T.clear(o)
            for i, j in T.Parallel(1, 16):
                o[j] += a[i, j]          # i has one iteration
            for i, j in T.Parallel(16, 16):
                if j == 0:               # one iteration of j stores
                    o[i] += a[i, j]
                a[i, j] = o[i] * 2.0     # one value for every j
            for i in T.Parallel(16):
                r[i] += a[i, 0]          # element-wise, in any spelling
                r[i] = r[i] * 0.5
            T.copy(o, O)

    lines = [line.strip() for line in k.ir.splitlines()]
    assert "o[j] += a[i, j]" in lines
    assert "r[i_2] += a[i_2, 0]" in lines
    assert "r[i_2] = r[i_2] * 0.5" in lines
    assert "reduce" not in k.ir


HEADER = """
        M = T.symbolic("M")

        def build():
            @T.prim_func
            def main(A: T.Tensor((M, 64), "float32")):
                with T.Kernel(1, threads=128) as bx:
                    a = T.alloc_fragment((64, 64), "float32")
                    f = T.alloc_fragment((64,), "float32")
                    s = T.alloc_shared((64,), "float32")
                    r = T.alloc_reducer(64, "float32")
                    rmax = T.alloc_reducer(64, "float32", op="max")
{body}
            return main
        """

# (name, kernel body, the marker of the offending line, the message)
CASES = [
    ("fragment_race", "for i, j in T.Parallel(64, 64):\n"
     "    f[i] += a[i, j]  # HERE",
     "'f[...] +=' inside T.Parallel: the index leaves out the loop variable "
     "'j', so every iteration of 'j' updates the same element of 'f' at "
     "once (the iterations race); to reduce over 'j', allocate 'f' with "
     "T.alloc_reducer"),
    ("fragment_max_race", "for i, j in T.Parallel(64, 64):\n"
     "    f[i] = T.max(f[i], a[i, j])  # HERE",
     "'f[...] =' inside T.Parallel: the index leaves out the loop variable "
     "'j'"),
    ("shared_race_over_two_variables",
     "for k, i, j in T.Parallel(2, 64, 64):\n"
     "    s[i] += a[i, j]  # HERE",
     "leaves out the loop variables 'k' and 'j', so every iteration of 'k' "
     "and 'j' updates the same element of 's'"),
    ("racing_store", "for i, j in T.Parallel(64, 64):\n"
     "    f[j] = a[i, j]  # HERE",
     "'f[...] =' inside T.Parallel: the index leaves out the loop variable "
     "'i' the value depends on, so every iteration of 'i' stores a "
     "different value into the same element of 'f'"),
    ("reducer_plain_store", "for i, j in T.Parallel(64, 64):\n"
     "    r[i] = a[i, j]  # HERE",
     "update the reducer as `r[...] += value` to reduce over 'j'"),
    ("plus_on_max", "for i, j in T.Parallel(64, 64):\n"
     "    rmax[i] += a[i, j]  # HERE",
     "'rmax' is a T.alloc_reducer(op=\"max\") reducer: update it as "
     "`rmax[...] = T.max(rmax[...], value)`, not with '+='"),
    ("min_on_max", "for i, j in T.Parallel(64, 64):\n"
     "    rmax[i] = T.min(rmax[i], a[i, j])  # HERE",
     "update it as `rmax[...] = T.max(rmax[...], value)`, not with T.min"),
    ("times_on_sum", "for i, j in T.Parallel(64, 64):\n"
     "    r[i] *= a[i, j]  # HERE",
     "'r' is a T.alloc_reducer(op=\"sum\") reducer: update it as "
     "`r[...] += value`, not with '*='"),
    ("max_on_sum", "for i, j in T.Parallel(64, 64):\n"
     "    r[i] = T.max(r[i], a[i, j])  # HERE",
     "update it as `r[...] += value`, not with T.max"),
    ("bad_op", "p = T.alloc_reducer(64, 'float32', op='prod')  # HERE",
     "T.alloc_reducer op='prod': expected 'sum', 'max' or 'min'"),
    ("bitwise_op", "p = T.alloc_reducer(64, 'int32', op='bitor')  # HERE",
     "(TileLang's bitwise reducers are not supported)"),
    ("bad_replication",
     "p = T.alloc_reducer(64, 'float32', replication='some')  # HERE",
     "T.alloc_reducer replication='some': expected 'all' or 'none'"),
    ("finalize_a_fragment", "T.finalize_reducer(f)  # HERE",
     "T.finalize_reducer takes a tile made by T.alloc_reducer; got 'f', a "
     "fragment tile"),
    ("read_in_the_loop", "for i, j in T.Parallel(64, 64):\n"
     "    r[i] += a[i, j]\n    a[i, j] = r[i]  # HERE",
     "reducer 'r' is read or stored in the T.Parallel that reduces into "
     "it; its value is whole only after the loop"),
    ("scaled_index", "for i, j in T.Parallel(32, 64):\n"
     "    r[i * 2] += a[i, j]  # HERE",
     "reducer 'r' index 'i * 2' is not the loop variable 'i' plus an "
     "offset"),
    ("index_from_the_body", "for i, j in T.Parallel(64, 64):\n"
     "    for k in T.serial(2):\n        r[k] += a[i, j]  # HERE",
     "reducer 'r' index 'k' is not a value that the code after the "
     "T.Parallel can compute"),
]


@pytest.mark.parametrize("name,stmt,message", CASES,
                         ids=[c[0] for c in CASES])
def test_reducer_misuse_points_at_the_python_line(tmp_path, name, stmt,
                                                  message):
    body = textwrap.indent(stmt, " " * 20)
    module, path = load(tmp_path, HEADER.format(body=body))
    with pytest.raises(kiln.KilnSourceError) as info:
        module.build().ir
    err = info.value
    line = line_of(path, "# HERE")
    assert str(err).startswith(f"{path}:{line}: "), str(err)
    assert message in str(err)


def test_tilelangs_newer_reducer_calls_say_what_to_write(tmp_path):
    module, path = load(tmp_path, HEADER.format(body=" " * 20 + (
        "T.reducer_update(r[0], 1.0)  # HERE")))
    with pytest.raises(kiln.KilnSourceError) as info:
        module.build().ir
    assert info.value.lineno == line_of(path, "# HERE")
    assert "T.reducer_update is not supported: initialise a T.alloc_reducer" \
        " tile with T.clear or T.fill" in str(info.value)
