"""A 2-D convolution written the way a TileLang user writes one, with kiln
imports (``import kiln`` / ``import kiln.language as T``): an eager
``@kiln.jit`` function that lowers the convolution to a GEMM, loading
patch tiles with ``T.im2col`` and reading the filter and writing the result
through flat buffer views (``T.Tensor(shape, dtype, x.data)``,
kiln/_dsl/views.py) inside a ``T.Pipelined`` reduction.

It runs on the CPU target and is checked against torch's conv2d at small
ragged shapes (output pixels, filters and patch length not multiples of
the tile sizes). ``T.im2col`` (kiln/_dsl/im2col.py) and buffer views are
also checked on their own here, with the errors a view can raise. torch's
CPU conv2d has no float16, so the reference works in float32.
"""

import numpy as np
import pytest

import kiln
import kiln.language as T
from kiln.errors import KilnArgumentError, KilnSourceError

from source_lines import line_ending_with

torch = pytest.importorskip("torch")


def line_of(marker):
    return line_ending_with(__file__, marker)


@pytest.fixture
def gen():
    seed = int(torch.randint(0, 1 << 30, (1,)))
    print(f"random seed {seed}")
    return torch.Generator().manual_seed(seed)


# --- convolution as an implicit GEMM ---------------------------------------

@kiln.jit
def conv2d_nhwc(img, flt, stride, dilation, pad, tile_m, tile_n, tile_k,
                stages, nthreads):
    # img is [batch, rows, cols, channels]; flt is a square KS x KS filter
    # bank laid out [KS, KS, channels, filters]. Dims come from the
    # arguments (or from .compile's keywords).
    B, IH, IW, CI, CO, KS = T.const("B, IH, IW, CI, CO, KS")
    reach = dilation * (KS - 1) + 1  # input extent one output pixel sees
    OH = (IH + 2 * pad - reach) // stride + 1
    OW = (IW + 2 * pad - reach) // stride + 1
    pixels = B * OH * OW  # GEMM rows
    patch = KS * KS * CI  # GEMM reduction length

    img: T.Tensor((B, IH, IW, CI), T.float16)
    flt: T.Tensor((KS, KS, CI, CO), T.float16)
    res = T.empty((B, OH, OW, CO), T.float16)
    # The same memory seen as matrices: the filter as [patch, CO], the
    # result as [pixels, CO].
    flt_mat = T.Tensor((patch, CO), T.float16, flt.data)
    res_mat = T.Tensor((pixels, CO), T.float16, res.data)

    with T.Kernel(T.ceildiv(pixels, tile_m), T.ceildiv(CO, tile_n),
                  threads=nthreads) as (pm, pn):
        cols = T.alloc_shared((tile_m, tile_k), T.float16)
        wts = T.alloc_shared((tile_k, tile_n), T.float16)
        acc = T.alloc_fragment((tile_m, tile_n), T.float32)
        T.clear(acc)
        for kb in T.Pipelined(T.ceildiv(patch, tile_k), num_stages=stages):
            # Rows pm * tile_m.. of the patch matrix, columns kb * tile_k..
            T.im2col(img, cols, pm, kb, KS, stride, dilation, pad)
            T.copy(flt_mat[kb * tile_k, pn * tile_n], wts)
            T.gemm(cols, wts, acc)
        T.copy(acc, res_mat[pm * tile_m, pn * tile_n])

    return res


def conv2d_reference(img, flt, stride, dilation, pad):
    """torch's conv2d on the NHWC image and [KS, KS, CI, CO] filters, in
    float32, the result back in NHWC."""
    nchw = img.float().movedim(-1, 1)
    oihw = flt.float().permute(3, 2, 0, 1)
    out = torch.nn.functional.conv2d(nchw, oihw, stride=stride,
                                     padding=pad, dilation=dilation)
    return out.movedim(1, -1)


# (batch, rows, cols, channels, filters, KS, stride, dilation, pad): stride
# 1 and 2, dilation 1 and 2, pad 0 and 1; the pixel count, 20 filters and
# the patch length ragged against tiles of 32 x 16 x 16.
SHAPES = [
    (2, 9, 7, 5, 20, 3, 1, 1, 1),
    (2, 9, 7, 5, 20, 3, 1, 1, 0),
    (1, 11, 10, 6, 20, 3, 2, 1, 1),
    (3, 8, 9, 5, 20, 3, 1, 2, 1),
    (2, 12, 13, 3, 20, 3, 2, 2, 0),
    (2, 10, 6, 7, 20, 2, 2, 1, 1),
]


@pytest.mark.parametrize("b,ih,iw,ci,co,ks,st,dl,pd", SHAPES,
                         ids=[f"s{s[6]}d{s[7]}p{s[8]}k{s[5]}" for s in SHAPES])
def test_conv2d_matches_torch(gen, b, ih, iw, ci, co, ks, st, dl, pd):
    img = torch.randn(b, ih, iw, ci, generator=gen).half()
    flt = torch.randn(ks, ks, ci, co, generator=gen).half()
    got = conv2d_nhwc(img, flt, st, dl, pd, 32, 16, 16, 2, 128)
    want = conv2d_reference(img, flt, st, dl, pd)
    assert got.dtype == torch.float16 and got.shape == want.shape
    torch.testing.assert_close(got.float(), want, rtol=1e-2, atol=1e-2)


def test_conv2d_compiled_up_front(gen):
    kernel = conv2d_nhwc.compile(B=2, IH=9, IW=7, CI=5, CO=20, KS=3,
                                 stride=2, dilation=1, pad=1, tile_m=32,
                                 tile_n=16, tile_k=16, stages=2,
                                 nthreads=128)
    # The views are parameters of the kernel over their bases' storage.
    assert ("kernel conv2d_nhwc(img: f16[2, 9, 7, 5], flt: f16[3, 3, 5, "
            "20], res: f16[2, 5, 4, 20], flt_mat: f16[45, 20], "
            "res_mat: f16[40, 20])") in kernel.ir
    assert "copy acc -> res_mat[pm * 32:+32, pn * 16:+16]" in kernel.ir
    img = torch.randn(2, 9, 7, 5, generator=gen).half()
    flt = torch.randn(3, 3, 5, 20, generator=gen).half()
    torch.testing.assert_close(kernel(img, flt).float(),
                               conv2d_reference(img, flt, 2, 1, 1),
                               rtol=1e-2, atol=1e-2)


# --- T.im2col on its own ---------------------------------------------------

def _im2col_reference(img, k, s, d, p):
    """The [N * OH * OW, K * K * C] im2col matrix, columns (kh, kw, c)."""
    n, h, w, c = img.shape
    oh = (h + 2 * p - d * (k - 1) - 1) // s + 1
    ow = (w + 2 * p - d * (k - 1) - 1) // s + 1
    padded = np.zeros((n, h + 2 * p, w + 2 * p, c), img.dtype)
    padded[:, p:p + h, p:p + w] = img
    out = np.empty((n, oh, ow, k, k, c), img.dtype)
    for kh in range(k):
        for kw in range(k):
            h0, w0 = kh * d, kw * d
            out[:, :, :, kh, kw] = padded[:, h0:h0 + (oh - 1) * s + 1:s,
                                          w0:w0 + (ow - 1) * s + 1:s]
    return out.reshape(n * oh * ow, k * k * c)


def im2col_matrix(n, h, w, c, k, s, d, p, bm, bk, alias=False):
    oh = (h + 2 * p - d * (k - 1) - 1) // s + 1
    ow = (w + 2 * p - d * (k - 1) - 1) // s + 1
    rows, cols = n * oh * ow, k * k * c
    gx, gy = -(-rows // bm), -(-cols // bk)
    im2col = T.c2d_im2col if alias else T.im2col

    # Every tile of the matrix, the last row and column of tiles past its
    # end, stored whole into a padded matrix: what lies past the end must
    # be zero.
    @T.prim_func
    def main(Img: T.Tensor((n, h, w, c), "float32"),
             Col: T.Tensor((gx * bm, gy * bk), "float32")):
        with T.Kernel(gx, gy, threads=64) as (bx, by):
            tile = T.alloc_shared((bm, bk), "float32")
            im2col(Img, tile, bx, by, k, s, d, p)
            T.copy(tile, Col[bx * bm, by * bk])

    return kiln.compile(main), rows, cols


@pytest.mark.parametrize("k,s,d,p", [(3, 1, 1, 1), (3, 2, 2, 1), (2, 1, 1, 0),
                                     (3, 2, 1, 2), (1, 1, 1, 0)])
def test_im2col_fills_the_patch_matrix_with_zeros_outside(k, s, d, p):
    rng = np.random.default_rng(k * 100 + s * 10 + d + p)
    n, h, w, c = 2, 7, 6, 3
    kernel, rows, cols = im2col_matrix(n, h, w, c, k, s, d, p, 16, 8)
    img = rng.standard_normal((n, h, w, c)).astype(np.float32)
    out = np.full((-(-rows // 16) * 16, -(-cols // 8) * 8), np.nan,
                  np.float32)
    kernel(img, out)
    want = np.zeros_like(out)
    want[:rows, :cols] = _im2col_reference(img, k, s, d, p)
    np.testing.assert_array_equal(out, want)


def test_c2d_im2col_is_im2col():
    kernel, _, _ = im2col_matrix(1, 5, 5, 2, 3, 1, 1, 1, 8, 8, alias=True)
    other, _, _ = im2col_matrix(1, 5, 5, 2, 3, 1, 1, 1, 8, 8)
    assert kernel.ir == other.ir
    assert "select(pixel < 25 && patch < 18 && h >= 0 && h < 5 && " \
        "w >= 0 && w < 5, Img[n, h, w, c], 0)" in kernel.ir


def load(tmp_path, name, source):
    """A module of ``source`` (T imported) in a file, for translation,
    which reads the source of what it translates."""
    import importlib.util
    import textwrap
    path = tmp_path / f"{name}.py"
    path.write_text("import kiln.language as T\n" + textwrap.dedent(source))
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod, str(path)


def test_im2col_errors_name_the_argument(tmp_path):
    for index, (call, message) in enumerate([
            ("T.im2col(Img, tile, 0, 0, 0, 1, 1, 0)",
             "T.im2col kernel=0: expected a Python int >= 1"),
            ("T.im2col(Img, tile, 0, 0, 3, 1, 1, -1)",
             "T.im2col pad=-1: expected a Python int >= 0"),
            ("T.im2col(Img, tile, 0, 0, 9, 1, 1, 0)",
             "does not fit the padded image: OH = -1"),
            ("T.im2col(tile, tile, 0, 0, 3, 1, 1, 0)",
             "T.im2col img expects a global [N, H, W, C] tensor"),
            ("T.im2col(Img, Img, 0, 0, 3, 1, 1, 0)",
             "T.im2col writes a tile; 'Img' is a global tensor")]):
        module, path = load(tmp_path, f"im2col_{index}", f"""
            @T.prim_func
            def main(Img: T.Tensor((1, 7, 7, 2), "float32")):
                with T.Kernel(1, threads=32) as bx:
                    tile = T.alloc_shared((8, 8), "float32")
                    {call}
            """)
        with pytest.raises(KilnSourceError) as info:
            module.main.ir
        assert str(info.value).startswith(f"{path}:7: "), str(info.value)
        assert message in str(info.value), str(info.value)


# --- buffer views ----------------------------------------------------------

M = T.symbolic("M")


@kiln.jit
def doubled_rows(block=16):
    # Views whose first dim is an expression of a symbolic dim: each
    # becomes a symbol of its own, computed at launch. The output is
    # written only through its view, in place.
    @T.prim_func
    def main(X: T.Tensor((M, 4, 8), "float32"),
             Y: T.Tensor((M, 4, 8), "float32")):
        with T.Kernel(T.ceildiv(M * 4, block), threads=64) as bx:
            X_rows = T.Tensor((M * 4, 8), "float32", X.data)
            Y_rows = T.Tensor([M * 4, 8], "float32", Y.data)
            t = T.alloc_fragment((block, 8), "float32")
            T.copy(X_rows[bx * block, 0], t)
            for i, j in T.Parallel(block, 8):
                t[i, j] = t[i, j] * 2.0
            T.copy(t, Y_rows[bx * block, 0])

    return main


def test_views_with_symbolic_dims_share_the_arguments_memory():
    kernel = doubled_rows()
    assert ("kernel main(X: f32[M, 4, 8], Y: f32[M, 4, 8], "
            "X_rows: f32[X_rows_d0, 8], Y_rows: f32[Y_rows_d0, 8])") \
        in kernel.ir
    for m in (5, 9):  # 20 and 36 rows: ragged against the 16-row block
        x = np.arange(m * 32, dtype=np.float32).reshape(m, 4, 8)
        y = np.full_like(x, np.nan)
        kernel(x, y)
        np.testing.assert_array_equal(y, 2 * x)


def test_a_view_written_marks_its_base_mutated_for_torch():
    import kiln.torch
    op = kiln.torch.op(doubled_rows(), name="doubled_rows_view")
    assert op.mutated == ["Y"]
    x = torch.arange(3 * 32, dtype=torch.float32).reshape(3, 4, 8)
    y = torch.empty_like(x)
    op(x, y)
    torch.testing.assert_close(y, 2 * x)


def test_a_view_of_a_view_and_of_a_shared_global():
    @T.prim_func
    def main(X: T.Tensor((2, 3, 4), "float32"),
             Y: T.Tensor((6, 4), "float32")):
        G = T.alloc_global((24,), "float32")
        with T.Kernel(1, threads=32) as bx:
            flat = T.Tensor((24,), "float32", X.data)
            rows = T.Tensor((6, 4), "float32", flat.data)  # X's memory
            G2 = T.Tensor((6, 4), "float32", G.data)
            t = T.alloc_fragment((6, 4), "float32")
            T.copy(rows, t)
            T.copy(t, G2)
        with T.Kernel(1, threads=32) as bx:
            u = T.alloc_fragment((24,), "float32")
            T.copy(G, u)
            for i in T.Parallel(24):
                Y[i // 4, i % 4] = u[i] + 1.0

    kernel = kiln.compile(main)
    # Each kernel takes the views it uses (not `flat`, used by none).
    assert "kernel main_k0(X: f32[2, 3, 4], Y: f32[6, 4], rows: f32[6, 4], " \
        "G2: f32[6, 4])" in kernel.ir
    assert "kernel main_k1(X: f32[2, 3, 4], Y: f32[6, 4], G: f32[24])" \
        in kernel.ir
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y = np.zeros((6, 4), np.float32)
    kernel(x, y)
    np.testing.assert_array_equal(y, x.reshape(6, 4) + 1)


@kiln.jit
def plus_one_flat(X, block=8):
    # Eager style: views made before the kernel, of an input and of the
    # T.empty output (a direct call's probe sees them with stand-in dims).
    M, N = T.const("M, N")
    X: T.Tensor((M, N), T.float32)
    Y = T.empty((M, N), T.float32)
    Y_flat = T.Tensor((M * N,), T.float32, Y.data)
    X_flat = T.Tensor((M * N,), T.float32, X.data)
    with T.Kernel(T.ceildiv(M * N, block), threads=32) as bx:
        for i in T.Parallel(block):
            Y_flat[bx * block + i] = X_flat[bx * block + i] + 1.0
    return Y


def test_eager_views_made_before_the_kernel():
    x = np.arange(15, dtype=np.float32).reshape(3, 5)
    np.testing.assert_array_equal(plus_one_flat(x), x + 1)
    assert "kernel plus_one_flat(X: f32[3, 5], Y: f32[3, 5], " \
        "Y_flat: f32[15], X_flat: f32[15])" in \
        plus_one_flat.compile(M=3, N=5).ir


# Views that can fail; each error names the line marked in its comment.

@kiln.jit
def misfit(rows, cols):
    @T.prim_func
    def main(A: T.Tensor((4, 6), "float32")):
        with T.Kernel(1, threads=32) as bx:
            v = T.Tensor((rows, cols), "float32", A.data)  # HERE-misfit
            t = T.alloc_fragment((rows, cols), "float32")
            T.copy(v, t)

    return main


def test_a_view_of_another_element_count_names_both_shapes():
    with pytest.raises(KilnSourceError) as info:
        misfit(4, 5).ir
    line = line_of("# HERE-misfit")
    assert str(info.value) == (
        f"{__file__}:{line}: the view 'v' has shape [4, 5] (20 elements), "
        "but 'A' has shape [4, 6] (24 elements): a view keeps the element "
        "count")
    assert "kernel main(A: f32[4, 6], v: f32[3, 8])" in misfit(3, 8).ir


@kiln.jit
def symbolic_misfit():
    @T.prim_func
    def main(A: T.Tensor((M, 6), "float32")):
        with T.Kernel(1, threads=32) as bx:
            v = T.Tensor((M * 2, 4), "float32", A.data)  # HERE-symbolic
            t = T.alloc_fragment((2, 4), "float32")
            T.copy(v[0:2, :], t)

    return main


def test_a_view_mismatch_of_symbolic_dims_is_found_at_launch():
    kernel = symbolic_misfit()
    a = np.zeros((4, 6), np.float32)
    with pytest.raises(KilnArgumentError) as info:
        kernel(a)
    msg = str(info.value)
    assert f"test_convolution.py:{line_of('# HERE-symbolic')})" in msg
    assert "the view 'v' of 'A'" in msg
    assert "has shape [8, 4] (32 elements), but 'A' has shape [4, 6] " \
        "(24 elements)" in msg
    b = np.zeros((2, 6), np.float32)  # M * 2 * 4 == M * 6 for M = 0 only
    with pytest.raises(KilnArgumentError, match=r"\[4, 4\] \(16 elements\)"):
        kernel(b)


def test_a_view_of_a_non_contiguous_argument_is_refused():
    kernel = doubled_rows()
    x = np.zeros((3, 8, 4), np.float32).transpose(0, 2, 1)
    y = np.zeros((3, 4, 8), np.float32)
    with pytest.raises(KilnArgumentError) as info:
        kernel(x, y)
    msg = str(info.value)
    assert msg.startswith("argument 'X' of main: the view 'X_rows' of 'X' (")
    assert "reshapes its memory, which must be contiguous (row-major); got " \
        "strides [32, 1, 4] for shape [3, 4, 8]" in msg
    line = [n for n, text in enumerate(open(__file__), 1)
            if "X_rows = T.Tensor((M * 4, 8)" in text][0]
    assert f"test_convolution.py:{line})" in msg
    t = torch.zeros(3, 8, 4).transpose(1, 2)
    with pytest.raises(KilnArgumentError, match="must be contiguous"):
        kernel(t, torch.zeros(3, 4, 8))


@kiln.jit
def written_view_and_base():
    @T.prim_func
    def main(A: T.Tensor((4, 6), "float32")):
        with T.Kernel(1, threads=32) as bx:
            v = T.Tensor((24,), "float32", A.data)
            t = T.alloc_fragment((4, 6), "float32")
            T.copy(A, t)  # OTHER-written
            for i in T.Parallel(24):
                v[i] = 1.0  # HERE-written

    return main


@kiln.jit
def base_written_view_read():
    @T.prim_func
    def main(A: T.Tensor((4, 6), "float32")):
        with T.Kernel(1, threads=32) as bx:
            v = T.Tensor((24,), "float32", A.data)
            t = T.alloc_fragment((24,), "float32")
            T.copy(v, t)  # OTHER-base-written
            for i, j in T.Parallel(4, 6):
                A[i, j] = 0.0  # HERE-base-written

    return main


@kiln.jit
def two_written_views():
    @T.prim_func
    def main(A: T.Tensor((4, 6), "float32")):
        with T.Kernel(1, threads=32) as bx:
            v = T.Tensor((24,), "float32", A.data)
            u = T.Tensor((6, 4), "float32", A.data)
            for i in T.Parallel(24):
                u[i // 4, i % 4] = 2.0  # HERE-two
            for i in T.Parallel(24):
                v[i] = 1.0  # OTHER-two

    return main


@kiln.jit
def view_and_base_in_separate_kernels():
    @T.prim_func
    def main(A: T.Tensor((4, 6), "float32"),
             B: T.Tensor((4, 6), "float32")):
        with T.Kernel(1, threads=32) as bx:
            v = T.Tensor((24,), "float32", A.data)
            for i in T.Parallel(24):
                v[i] = 3.0
        with T.Kernel(1, threads=32) as bx:
            t = T.alloc_fragment((4, 6), "float32")
            T.copy(A, t)
            T.copy(t, B)

    return main


def test_a_written_view_and_its_base_in_one_kernel_are_refused():
    for fn, name, message in [
            (written_view_and_base, "written",
             "'v' is written here, and this kernel also uses 'A' (line "
             "{}); 'v' views 'A', the same memory, but the tile IR treats "
             "tensor parameters as distinct"),
            (base_written_view_read, "base-written",
             "'A' is written here, and this kernel also uses 'v' (line "
             "{}); 'v' views 'A', the same memory"),
            (two_written_views, "two",
             "'u' is written here, and this kernel also uses 'v' (line "
             "{}); both view 'A', the same memory")]:
        with pytest.raises(KilnSourceError) as info:
            fn().ir
        line = line_of(f"# HERE-{name}")
        assert str(info.value).startswith(f"{__file__}:{line}: "), \
            str(info.value)
        assert message.format(line_of(f"# OTHER-{name}")) in \
            str(info.value), str(info.value)
    # Kernels of one prim_func run in order: a view written in one and its
    # base read in the next is fine.
    a = np.zeros((4, 6), np.float32)
    b = np.zeros((4, 6), np.float32)
    view_and_base_in_separate_kernels()(a, b)
    np.testing.assert_array_equal(b, np.full((4, 6), 3.0, np.float32))


def test_view_misuse_is_refused_clearly(tmp_path):
    cases = [
        ("T.Tensor((24,), 'float16', A.data)",
         "a view keeps the dtype of 'A' (f32)"),
        ("T.Tensor((64,), 'float32', t.data)",
         "'t.data': only global tensors can be viewed"),
        ("T.Tensor((24,), 'float32', A)",
         "data must be a global tensor's .data inside a kernel"),
        ("T.Tensor((0, 24), 'float32', A.data)",
         "view dim 0 of 'v' is 0; dims are positive"),
        ("T.Tensor((bx, 24), 'float32', A.data)",
         "view dim 0 of 'v' ('bx'): it uses 'bx', which is not a symbolic "
         "dim of a tensor"),
        ("T.Tensor((24,), 'float32', S.data)",
         "'S' has explicit strides: a view reshapes row-major storage only"),
    ]
    for index, (expr, message) in enumerate(cases):
        module, path = load(tmp_path, f"views_{index}", f"""
            @T.prim_func
            def main(A: T.Tensor((4, 6), "float32"),
                     S: T.StridedTensor((4, 6), (1, 4), "float32")):
                with T.Kernel(1, threads=32) as bx:
                    t = T.alloc_shared((64,), "float32")
                    v = {expr}
            """)
        with pytest.raises(KilnSourceError) as info:
            module.main.ir
        assert str(info.value).startswith(f"{path}:8: "), str(info.value)
        assert message in str(info.value), str(info.value)
    with pytest.raises(KilnSourceError, match="data must be a global"):
        T.Tensor((4,), "float32", object())
    with pytest.raises(KilnSourceError, match="views are made of global"):
        T.SharedBuffer((4,), "float32", object())
