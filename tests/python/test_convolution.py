"""TileLang's convolution example ported by changing imports only (issue
25): examples/convolution/example_convolution.py's ``convolution`` and
``ref_program``, copied with

    import tilelang
    from tilelang.autotuner import *
    import tilelang.language as T

changed to

    import kiln as tilelang
    from kiln.autotuner import *
    import kiln.language as T

run on the CPU target against torch.conv2d at small ragged shapes (N * OH *
OW, F and KH * KW * C not multiples of the blocks). It needs buffer views
(``T.Tensor(shape, dtype, x.data)``, kiln/_dsl/views.py) and ``T.im2col``
(kiln/_dsl/im2col.py), which are also checked on their own here, with the
errors a view can raise. Left out of the copy: the argparse mains (their
CUDA tensors and cupti benchmark); the reference runs in float32, since
CPU torch has no float16 conv2d.
"""

import numpy as np
import pytest

import kiln
import kiln as tilelang
from kiln.autotuner import *  # noqa: F401,F403 (as the example)
import kiln.language as T
from kiln.errors import KilnArgumentError, KilnSourceError

torch = pytest.importorskip("torch")


def line_of(marker):
    """The line of this file that holds ``marker`` (once)."""
    with open(__file__) as f:
        hits = [n for n, line in enumerate(f, 1)
                if line.rstrip().endswith(marker)]
    assert len(hits) == 1, marker
    return hits[0]


@pytest.fixture
def gen():
    seed = int(torch.randint(0, 1 << 30, (1,)))
    print(f"random seed {seed}")
    return torch.Generator().manual_seed(seed)


# --- examples/convolution/example_convolution.py --------------------------

def ref_program(stride, padding, dilation):
    def main(A, B):
        A = A.permute(0, 3, 1, 2)  # N, H, W, C -> N, C, H, W
        B = B.permute(3, 2, 0, 1)  # H, W, C, F -> F, C, H, W
        C = torch.conv2d(A, B, stride=stride, padding=padding, dilation=dilation)
        C = C.permute(0, 2, 3, 1)  # N, C, H, W -> N, H, W, C
        return C

    return main


@tilelang.jit
def convolution(data, kernel, S, D, P, block_M, block_N, block_K, num_stages, threads, dtype=T.float16, accum_dtype=T.float32):
    N, C, H, W, F, K = T.const("N, C, H, W, F, K")
    KH, KW = K, K
    OH = (H + 2 * P - D * (K - 1) - 1) // S + 1
    OW = (W + 2 * P - D * (K - 1) - 1) // S + 1
    dtype = T.float16
    accum_dtype = T.float32

    data: T.Tensor((N, H, W, C), dtype)
    kernel: T.Tensor((KH, KW, C, F), dtype)
    out = T.empty((N, OH, OW, F), dtype)

    with T.Kernel(T.ceildiv(F, block_N), T.ceildiv(N * OH * OW, block_M), threads=threads) as (bx, by):
        data_shared = T.alloc_shared((block_M, block_K), dtype)
        kernel_shared = T.alloc_shared((block_K, block_N), dtype)
        out_local = T.alloc_fragment((block_M, block_N), accum_dtype)
        out_shared = T.alloc_shared((block_M, block_N), dtype)

        kernel_flat = T.Tensor((KH * KW * C, F), dtype, kernel.data)
        out_flat = T.Tensor((N * OH * OW, F), dtype, out.data)

        T.clear(out_local)
        for k_iter in T.Pipelined(T.ceildiv(KH * KW * C, block_K), num_stages=num_stages):
            T.im2col(data, data_shared, by, k_iter, KH, S, D, P)
            T.copy(kernel_flat[k_iter * block_K, bx * block_N], kernel_shared)
            T.gemm(data_shared, kernel_shared, out_local)

        T.copy(out_local, out_shared)
        T.copy(out_shared, out_flat[by * block_M, bx * block_N])

    return out


# --- the example's check, at small ragged shapes ---------------------------

def _reference(a, b, S, D, P):
    return ref_program(S, P, D)(a.float(), b.float())


# (N, H, W, C, F, K, S, D, P): stride 1 and 2, dilation 1 and 2, padding
# 0 and 1; N * OH * OW, F = 20 and KH * KW * C ragged against 32 / 16 / 16.
SHAPES = [
    (2, 9, 7, 5, 20, 3, 1, 1, 1),
    (2, 9, 7, 5, 20, 3, 1, 1, 0),
    (1, 11, 10, 6, 20, 3, 2, 1, 1),
    (3, 8, 9, 5, 20, 3, 1, 2, 1),
    (2, 12, 13, 3, 20, 3, 2, 2, 0),
    (2, 10, 6, 7, 20, 2, 2, 1, 1),
]


@pytest.mark.parametrize("n,h,w,c,f,k,s,d,p", SHAPES,
                         ids=[f"s{s[6]}d{s[7]}p{s[8]}k{s[5]}" for s in SHAPES])
def test_convolution_example_matches_torch_conv2d(gen, n, h, w, c, f, k, s,
                                                  d, p):
    a = torch.randn(n, h, w, c, generator=gen).half()
    b = torch.randn(k, k, c, f, generator=gen).half()
    out_c = convolution(a, b, s, d, p, 32, 16, 16, 2, 128)
    ref_c = _reference(a, b, s, d, p)
    assert out_c.dtype == torch.float16 and out_c.shape == ref_c.shape
    torch.testing.assert_close(out_c.float(), ref_c, rtol=1e-2, atol=1e-2)


def test_convolution_compiled_up_front_as_the_regression_run_does(gen):
    kernel = convolution.compile(N=2, C=5, H=9, W=7, F=20, K=3, S=2, D=1,
                                 P=1, block_M=32, block_N=16, block_K=16,
                                 num_stages=2, threads=128)
    # The views are parameters of the kernel over their bases' storage.
    assert ("kernel convolution(data: f16[2, 9, 7, 5], kernel_: f16[3, 3, "
            "5, 20], out: f16[2, 5, 4, 20], kernel_flat: f16[45, 20], "
            "out_flat: f16[40, 20])") in kernel.ir
    assert "copy out_shared -> out_flat[by * 32:+32, bx * 16:+16]" \
        in kernel.ir
    a = torch.randn(2, 9, 7, 5, generator=gen).half()
    b = torch.randn(3, 3, 5, 20, generator=gen).half()
    torch.testing.assert_close(kernel(a, b).float(),
                               _reference(a, b, 2, 1, 1), rtol=1e-2,
                               atol=1e-2)


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
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, str(path)


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
