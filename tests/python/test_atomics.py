"""T.atomic_max and T.atomic_min (issue 25, item 4): one element of a
global tensor inside T.Parallel (the tile IR's ``max=`` / ``min=`` store),
or a tile into a global region outside it. Run on the CPU target against
NumPy with ragged shapes, repeated indices, indices out of range and NaN;
misuse is a located error."""

import numpy as np
import pytest

import kiln
import kiln.language as T

from test_errors import line_of, load


# Per-segment maxima of token rows: tokens that share a segment update the
# same output row from different threads and blocks.
@kiln.jit(out_idx=[])
def segment_max(tokens, width, segments, chunk=32, dtype="float32"):
    @T.prim_func
    def main(Rows: T.Tensor((tokens, width), dtype),
             Seg: T.Tensor((tokens,), "int32"),
             Best: T.Tensor((segments, width), dtype)):
        with T.Kernel(T.ceildiv(tokens, chunk), threads=128) as blk:
            vals = T.alloc_fragment((chunk, width), dtype)
            owner = T.alloc_fragment((chunk,), "int32")
            T.copy(Rows[blk * chunk, 0], vals)
            T.copy(Seg[blk * chunk], owner)
            for t, c in T.Parallel(chunk, width):
                if blk * chunk + t < tokens:
                    T.atomic_max(Best[owner[t], c], vals[t, c])

    return main


# Column minima: each block folds its rows into one row, then merges that
# row into the output with a region-form T.atomic_min.
@kiln.jit(out_idx=[])
def column_min(rows, cols, block_rows=16, block_cols=64):
    @T.prim_func
    def main(Data: T.Tensor((rows, cols), "float32"),
             Low: T.Tensor((cols,), "float32")):
        with T.Kernel(T.ceildiv(cols, block_cols),
                      T.ceildiv(rows, block_rows), threads=128) as (cx, ry):
            part = T.alloc_fragment((block_rows, block_cols), "float32")
            T.copy(Data[ry * block_rows, cx * block_cols], part)
            for r, c in T.Parallel(block_rows, block_cols):
                # Rows past the end read zero: keep them out of the min.
                if ry * block_rows + r >= rows:
                    part[r, c] = T.infinity("float32")
            lowest = T.alloc_fragment((block_cols,), "float32")
            T.reduce_min(part, lowest, dim=0)
            T.atomic_min(Low[cx * block_cols:(cx + 1) * block_cols], lowest)

    return main


@pytest.mark.parametrize("dtype", ("float32", "int32", "float16"))
def test_element_atomic_max_keeps_each_segments_largest(backend, rng, dtype):
    tokens, width, segments = 203, 40, 6
    kernel = segment_max(tokens, width, segments, dtype=dtype)
    assert "Best[owner[t], c] max= vals[t, c]" in kernel.ir
    if dtype == "int32":
        rows = rng.integers(-1000, 1000, (tokens, width)).astype(dtype)
    else:
        rows = rng.uniform(-4, 4, (tokens, width)).astype(dtype)
    seg = rng.integers(0, segments, tokens).astype(np.int32)
    seg[::11] = segments + 2  # out of range: skipped
    seg[5] = -1
    if dtype != "int32":
        rows[17, 3] = np.nan  # a NaN wins its segment's column
    best = (rng.integers(-5, 5, (segments, width)) * 100).astype(dtype)
    want = best.copy()
    for t in range(tokens):
        if 0 <= seg[t] < segments:
            want[seg[t]] = np.maximum(want[seg[t]], rows[t])
    kernel(rows, seg, best)
    if dtype != "int32" and 0 <= seg[17] < segments:
        assert np.isnan(best[seg[17], 3])
    np.testing.assert_array_equal(best, want)


def test_region_atomic_min_merges_every_blocks_row(backend, rng):
    rows, cols = 150, 170  # ragged in both: the last column block is cut
    kernel = column_min(rows, cols)
    lines = [line.strip() for line in kernel.ir.splitlines()]
    assert any(line.startswith("Low[cx * 64 + ") and
               line.endswith("min= lowest[e]") for line in lines), lines
    data = rng.uniform(-10, 10, (rows, cols)).astype(np.float32)
    data[77, 150] = -np.inf
    low = rng.uniform(-9, 9, cols).astype(np.float32)
    want = np.minimum(low, data.min(axis=0))
    kernel(data, low)
    np.testing.assert_array_equal(low, want)
    assert low[150] == -np.inf


def test_atomic_min_of_one_element_region(backend, rng):
    @T.prim_func
    def least(X: T.Tensor((100,), "float32"), Out: T.Tensor((1,), "float32")):
        with T.Kernel(T.ceildiv(100, 32), threads=32) as bx:
            chunk = T.alloc_fragment((32,), "float32")
            T.fill(chunk, T.infinity("float32"))
            for i in T.Parallel(32):
                if bx * 32 + i < 100:
                    chunk[i] = X[bx * 32 + i]
            one = T.alloc_fragment((1,), "float32")
            T.reduce_min(chunk, one, dim=0)
            T.atomic_min(Out[0:1], one)
    x = rng.uniform(-3, 3, 100).astype(np.float32)
    out = np.array([0.5], np.float32)
    kiln.compile(least)(x, out)
    assert out[0] == min(0.5, x.min())


@pytest.mark.parametrize("call, message", [
    ("T.atomic_max(Out[i], v[i], return_prev=True)",
     r"return_prev=True\) is not supported"),
    ("T.atomic_min(r[0], s[i])", "updates an element of a global tensor, "
     "a shared tile or a fragment; 'r' is a local tile"),
    ("T.atomic_max(Out[0:4], v[i])", "updates one element"),
])
def test_element_atomic_misuse_is_located(tmp_path, call, message):
    mod, path = load(tmp_path, f"""
        @T.prim_func
        def main(Out: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                v = T.alloc_fragment((64,), "float32")
                s = T.alloc_shared((64,), "float32")
                r = T.alloc_local((1,), "float32")
                T.fill(v, 1.0)
                T.fill(s, 0.0)
                for i in T.Parallel(64):
                    {call}  # HERE
        """)
    with pytest.raises(kiln.KilnSourceError, match=message) as info:
        mod.main.ir
    assert f"{path}:{line_of(path, '# HERE')}" in str(info.value)


def test_region_atomic_max_into_a_tile_is_refused(tmp_path):
    mod, path = load(tmp_path, """
        @T.prim_func
        def main(Out: T.Tensor((64,), "float32")):
            with T.Kernel(1, threads=64) as bx:
                v = T.alloc_fragment((64,), "float32")
                w = T.alloc_fragment((64,), "float32")
                T.fill(v, 1.0)
                T.atomic_max(w, v)  # HERE
        """)
    with pytest.raises(kiln.KilnSourceError,
                       match="writes into a global tensor; 'w' is a "
                             "fragment tile") as info:
        mod.main.ir
    assert f"{path}:{line_of(path, '# HERE')}" in str(info.value)
