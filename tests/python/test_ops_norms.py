"""kiln.ops.norms on the CPU target: RMSNorm, LayerNorm, softmax and
cross-entropy kernels against NumPy (float64) references on ragged shapes
(rows not a multiple of any block, N = 1000 / 3000, a 5000-word vocabulary
walked in chunks, ignored rows), then the autograd wrappers:
torch.autograd.gradcheck in float64 and float16 / bfloat16 against
torch.nn.functional. Kernels are compiled once per module (one client)."""

import os
import subprocess
import sys

import numpy as np
import pytest

from kiln import _capi, _client
import kiln
from kiln.ops import norms

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # the NumPy tests run without torch
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

ROWS = 37          # not a multiple of any block or of the backward's parts
RAGGED_N = (1000, 3000)
VOCAB = 5000       # two 4096-wide chunks, the second ragged


@pytest.fixture(scope="module", autouse=True)
def client(tmp_path_factory):
    """One embedded libkiln client (and cache) for the module, so that each
    kernel compiles once however many tests use it."""
    if _capi.library_path() is None:
        pytest.skip("libkiln not found: set KILN_LIBRARY")
    c = _capi.Client.embedded(str(tmp_path_factory.mktemp("norms-cache")))
    _client.set_default(c)
    yield c
    _client.set_default(None)


def close(got, want, tol):
    """Max error relative to the reference's largest magnitude."""
    got = np.asarray(got, np.float64)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.all(np.isfinite(got))
    err = np.abs(got - want).max() / max(np.abs(want).max(), 1e-30)
    assert err < tol, f"relative error {err:.3g} >= {tol}"


# --- NumPy references (float64) ---------------------------------------------

def rms_ref(x, w, dy, eps=1e-6):
    rstd = 1 / np.sqrt((x ** 2).mean(1) + eps)
    g = dy * w
    dx = rstd[:, None] * g - x * rstd[:, None] ** 3 * \
        (g * x).mean(1, keepdims=True)
    return x * rstd[:, None] * w, rstd, dx, (dy * x * rstd[:, None]).sum(0)


def ln_ref(x, w, b, dy, eps=1e-5):
    mean = x.mean(1)
    rstd = 1 / np.sqrt(x.var(1) + eps)
    xhat = (x - mean[:, None]) * rstd[:, None]
    g = dy * w
    dx = rstd[:, None] * (g - g.mean(1, keepdims=True) -
                          xhat * (g * xhat).mean(1, keepdims=True))
    return (xhat * w + b, mean, rstd, dx, (dy * xhat).sum(0), dy.sum(0))


def softmax_ref(x, dy):
    e = np.exp(x - x.max(1, keepdims=True))
    y = e / e.sum(1, keepdims=True)
    return y, y * (dy - (dy * y).sum(1, keepdims=True))


def ce_ref(logits, target, dloss, ignore_index=-100):
    m = logits.max(1)
    lse = m + np.log(np.exp(logits - m[:, None]).sum(1))
    ignored = target == ignore_index
    safe = np.where(ignored, 0, target)
    rows = np.arange(len(target))
    loss = np.where(ignored, 0, lse - logits[rows, safe])
    p = np.exp(logits - lse[:, None])
    p[rows, safe] -= 1
    dx = p * np.where(ignored, 0, dloss)[:, None]
    return loss, lse, dx


def f32(a):
    return a.astype(np.float32)


# --- tiles -------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float16", "float32", "float64"])
def test_row_tiles_cover_the_row_in_whole_chunks(dtype):
    vec = 16 // {"float16": 2, "float32": 4, "float64": 8}[dtype]
    for n in list(range(1, 300, 7)) + [1000, 3000, 4096, 5120, 12288,
                                       32768]:
        threads, bn = norms.row_tile(n, dtype)
        per = bn // threads
        assert threads % 32 == 0 and threads <= 1024
        assert bn % threads == 0 and n <= bn and per <= 32
        assert per % vec == 0 or (per < vec and per & (per - 1) == 0)
        assert bn - n < threads * max(per, vec)  # no whole idle chunk row
    with pytest.raises(kiln.KilnArgumentError, match="do not fit"):
        norms.row_tile(32768 + 1, dtype)
    assert norms.chunk_tile(128256, "bfloat16") == (256, 4096, 32)
    assert norms.default_parts(1) == 1
    assert norms.default_parts(ROWS) == 4
    assert norms.default_parts(1 << 20) == 256


# --- kernels against NumPy ---------------------------------------------------

@pytest.mark.parametrize("n", RAGGED_N)
def test_rms_norm_kernels(rng, n):
    m = ROWS
    x = f32(rng.standard_normal((m, n)) * 2)
    w = f32(rng.standard_normal(n))
    dy = f32(rng.standard_normal((m, n)))
    y, rstd = norms.rms_norm_fwd(n, 1e-6, "float32")(x, w)
    assert y.dtype == np.float32 and rstd.shape == (m,)
    ref = rms_ref(*(a.astype(np.float64) for a in (x, w, dy)))
    close(y, ref[0], 1e-5)
    close(rstd, ref[1], 1e-5)
    # 4 blocks of 10 rows (the last one 7): dW summed over their partials.
    parts = norms.default_parts(m)
    dx, dw = norms.rms_norm_bwd(n, parts, "float32")(dy, x, w, rstd)
    close(dx, ref[2], 1e-5)
    close(dw, ref[3], 1e-5)
    # More blocks than rows: the empty ones add zero partials.
    dx2, dw2 = norms.rms_norm_bwd(n, parts, "float32")(dy[:3], x[:3], w,
                                                        rstd[:3])
    close(dw2, rms_ref(*(a.astype(np.float64) for a in
                         (x[:3], w, dy[:3])))[3], 1e-5)


@pytest.mark.parametrize("n", RAGGED_N)
def test_layer_norm_kernels(rng, n):
    m = ROWS
    # An offset mean: the variance must not come from E[x^2] - mean^2.
    x = f32(rng.standard_normal((m, n)) * 0.5 + 30)
    w, b = f32(rng.standard_normal(n)), f32(rng.standard_normal(n))
    dy = f32(rng.standard_normal((m, n)))
    y, mean, rstd = norms.layer_norm_fwd(n, 1e-5, "float32")(x, w, b)
    ref = ln_ref(*(a.astype(np.float64) for a in (x, w, b, dy)))
    close(y, ref[0], 1e-4)
    close(mean, ref[1], 1e-5)
    close(rstd, ref[2], 1e-4)
    dx, dw, db = norms.layer_norm_bwd(n, norms.default_parts(m), "float32")(
        dy, x, w, mean, rstd)
    close(dx, ref[3], 1e-4)
    close(dw, ref[4], 1e-4)
    close(db, ref[5], 1e-5)


@pytest.mark.parametrize("n,tile", [(1000, None), (3000, None),
                                    (3000, dict(threads=64, block_N=512))])
def test_softmax_kernels(rng, n, tile):
    # The last case walks six 512-wide chunks (the row read twice), the
    # last one ragged; the others hold the row whole.
    m = ROWS
    x = f32(rng.standard_normal((m, n)) * 4)
    x[0, :] = -1e4  # a constant row
    x[1, n - 1] = 80  # a max in the padded tail's last chunk
    dy = f32(rng.standard_normal((m, n)))
    tile = tile or {}
    y = norms.softmax_fwd(n, "float32", **tile)(x)
    yr, dxr = softmax_ref(x.astype(np.float64), dy.astype(np.float64))
    # (The CPU target sums a row in order: f32 error grows with N.)
    close(y, yr, 5e-5)
    np.testing.assert_allclose(y[0], 1 / n, rtol=1e-5)
    dx = norms.softmax_bwd(n, "float32", **tile)(y, dy)
    close(dx, dxr, 1e-4)
    # From the kernel's own (rounded) y, tighter.
    y64, dy64 = y.astype(np.float64), dy.astype(np.float64)
    close(dx, y64 * (dy64 - (dy64 * y64).sum(1, keepdims=True)), 5e-5)


def _targets(rng, m, v):
    t = rng.integers(0, v, m).astype(np.int64)
    t[[2, 11, m - 1]] = -100          # ignored rows, the last one included
    t[[0, 1, 3, 4]] = [0, v - 1, 4095, 4096]  # edges and chunk boundary
    return t


@pytest.mark.parametrize("tile", [None, dict(threads=64, block_V=512)])
def test_cross_entropy_kernels(rng, tile):
    m, v = ROWS, VOCAB
    tile = tile or {}
    logits = f32(rng.standard_normal((m, v)) * 4)
    logits[5, 4500] = 60  # the max in the last (ragged) chunk
    target = _targets(rng, m, v)
    dloss = f32(rng.standard_normal(m))
    loss, lse = norms.cross_entropy_fwd(v, -100, "float32", "int64",
                                        **tile)(logits, target)
    assert loss.dtype == np.float32 and lse.shape == (m,)
    ref = ce_ref(logits.astype(np.float64), target, dloss.astype(np.float64))
    close(lse, ref[1], 1e-5)
    close(loss, ref[0], 5e-5)
    assert np.all(loss[target == -100] == 0)
    dx = norms.cross_entropy_bwd(v, -100, "float32", "int64", **tile)(
        logits, target, lse, dloss)
    close(dx, ref[2], 5e-5)
    assert np.all(dx[target == -100] == 0)


def test_cross_entropy_int32_targets_and_another_ignore_index(rng):
    m, v = 9, 300
    logits = f32(rng.standard_normal((m, v)))
    target = rng.integers(0, v, m).astype(np.int32)
    target[4] = 7  # ignore_index=7 is a class id here
    loss, lse = norms.cross_entropy_fwd(v, 7, "float32", "int32")(logits,
                                                                  target)
    ref = ce_ref(logits.astype(np.float64), target, np.ones(m), 7)
    close(loss, ref[0], 1e-5)
    assert loss[4] == 0


# --- autograd wrappers ----------------------------------------------------

def _t(a, dtype=None, grad=False):
    t = torch.from_numpy(np.ascontiguousarray(a))
    if dtype is not None:
        t = t.to(dtype)
    return t.requires_grad_(grad)


@needs_torch
def test_gradcheck_float64(rng):
    from kiln.ops import cross_entropy, layer_norm, rms_norm, softmax
    shape = (2, 3, 37)  # leading dims flattened to 6 rows of 37
    x = _t(rng.standard_normal(shape), grad=True)
    w = _t(rng.standard_normal(37), grad=True)
    b = _t(rng.standard_normal(37), grad=True)
    assert torch.autograd.gradcheck(lambda x, w: rms_norm(x, w, 1e-6),
                                    (x, w))
    assert torch.autograd.gradcheck(
        lambda x, w, b: layer_norm(x, w, b, 1e-5), (x, w, b))
    assert torch.autograd.gradcheck(softmax, (x,))
    logits = _t(rng.standard_normal((2, 4, 50)) * 3, grad=True)
    target = torch.from_numpy(rng.integers(0, 50, (2, 4)))
    target[0, 1] = -100
    for reduction in ("mean", "sum", "none"):
        assert torch.autograd.gradcheck(
            lambda lg: cross_entropy(lg, target, reduction=reduction),
            (logits,))


@needs_torch
def test_wrappers_match_torch_in_float64(rng):
    from kiln.ops import cross_entropy, layer_norm, rms_norm, softmax
    x = _t(rng.standard_normal((3, 5, 1000)), grad=True)
    w = _t(rng.standard_normal(1000), grad=True)
    b = _t(rng.standard_normal(1000), grad=True)
    dy = _t(rng.standard_normal((3, 5, 1000)))

    def ref_rms(x, w):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    cases = [
        (lambda x, w, b: rms_norm(x, w), lambda x, w, b: ref_rms(x, w)),
        (lambda x, w, b: layer_norm(x, w, b),
         lambda x, w, b: F.layer_norm(x, (1000,), w, b, 1e-5)),
        (lambda x, w, b: softmax(x) * w, lambda x, w, b: F.softmax(x, -1) * w),
    ]
    for ours, theirs in cases:
        got = ours(x, w, b)
        gg = torch.autograd.grad(got, (x, w), dy)
        want = theirs(x, w, b)
        gw = torch.autograd.grad(want, (x, w), dy)
        assert got.shape == want.shape and got.dtype == torch.float64
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
        for a, e in zip(gg, gw):
            torch.testing.assert_close(a, e, rtol=1e-9, atol=1e-9)
    # LayerNorm's bias gradient.
    db = torch.autograd.grad(layer_norm(x, w, b), b, dy)[0]
    torch.testing.assert_close(db, dy.sum((0, 1)))

    logits = _t(rng.standard_normal((4, 8, VOCAB)) * 3, grad=True)
    target = torch.from_numpy(_targets(rng, 32, VOCAB).reshape(4, 8))
    for reduction in ("mean", "sum", "none"):
        got = cross_entropy(logits, target, reduction=reduction)
        want = F.cross_entropy(logits.reshape(-1, VOCAB), target.reshape(-1),
                               reduction=reduction)
        if reduction == "none":
            want = want.reshape(4, 8)
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
        up = torch.randn_like(got)
        torch.testing.assert_close(torch.autograd.grad(got, logits, up)[0],
                                   torch.autograd.grad(want, logits, up)[0],
                                   rtol=1e-9, atol=1e-12)


@needs_torch
@pytest.mark.parametrize("dtype", ("float16", "bfloat16"))
def test_half_precision_matches_torch(rng, dtype):
    from kiln.ops import cross_entropy, layer_norm, rms_norm, softmax
    dt = getattr(torch, dtype)
    tol = dict(rtol=2e-2, atol=2e-2) if dtype == "bfloat16" else \
        dict(rtol=5e-3, atol=5e-3)
    n = 1000
    x = _t(rng.standard_normal((ROWS, n)), dt, grad=True)
    w = _t(1 + 0.1 * rng.standard_normal(n), dt, grad=True)
    b = _t(0.1 * rng.standard_normal(n), dt, grad=True)
    dy = _t(rng.standard_normal((ROWS, n)), dt)

    # torch's own ops on float32 copies (its CPU kernels lack half types
    # for some of these), the result rounded to the input's dtype.
    def ref(fn, *ts):
        c = [t.detach().float().requires_grad_() for t in ts]
        out = fn(*c)
        grads = torch.autograd.grad(out, c, dy.float())
        return out.to(dt), [g.to(dt) for g in grads]

    rms_f = getattr(F, "rms_norm", None)  # torch >= 2.4

    def rms32(x, w):
        if rms_f is not None:
            return rms_f(x, (n,), w, 1e-6)
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * w

    cases = [
        ("rms_norm", lambda: rms_norm(x, w), lambda: ref(rms32, x, w),
         (x, w)),
        ("layer_norm", lambda: layer_norm(x, w, b),
         lambda: ref(lambda x, w, b: F.layer_norm(x, (n,), w, b, 1e-5),
                     x, w, b), (x, w, b)),
        ("softmax", lambda: softmax(x * 4),
         lambda: ref(lambda x: F.softmax(x * 4, -1), x), (x,)),
    ]
    for name, ours, theirs, inputs in cases:
        got = ours()
        assert got.dtype == dt, name
        grads = torch.autograd.grad(got, inputs, dy)
        want, want_grads = theirs()
        torch.testing.assert_close(got, want, **tol, msg=name)
        for g, e in zip(grads, want_grads):
            assert g.dtype == dt
            # dW sums 37 rows: its scale grows with them.
            torch.testing.assert_close(g.float(), e.float(), rtol=tol["rtol"],
                                       atol=tol["atol"] * 8, msg=name)

    logits = _t(rng.standard_normal((ROWS, VOCAB)) * 3, dt, grad=True)
    target = torch.from_numpy(_targets(rng, ROWS, VOCAB))
    loss = cross_entropy(logits, target)
    assert loss.dtype == dt and loss.dim() == 0
    (dl,) = torch.autograd.grad(loss, logits)
    l32 = logits.detach().float().requires_grad_()
    want = F.cross_entropy(l32, target)
    (dwant,) = torch.autograd.grad(want, l32)
    torch.testing.assert_close(loss.float(), want, **tol)
    torch.testing.assert_close(dl.float(), dwant, rtol=tol["rtol"],
                               atol=1e-4)
    assert torch.all(dl[target == -100] == 0)


@needs_torch
def test_mixed_weight_dtype_and_noncontiguous_input(rng):
    # bf16 activations with an f32 weight (kept in f32, as its grad); an
    # input that is a transposed view.
    from kiln.ops import rms_norm
    n = 1000
    base = _t(rng.standard_normal((n, 8)), torch.bfloat16)
    x = base.t().requires_grad_()  # [8, n], not contiguous
    w = _t(1 + 0.1 * rng.standard_normal(n), torch.float32, grad=True)
    y = rms_norm(x, w)
    assert y.dtype == torch.bfloat16 and y.shape == (8, n)
    y.float().sum().backward()
    assert w.grad.dtype == torch.float32 and x.grad.dtype == torch.bfloat16
    xf = x.detach().float().requires_grad_()
    wf = w.detach().clone().requires_grad_()
    ref = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * wf
    ref.sum().backward()
    torch.testing.assert_close(y.float(), ref, rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(w.grad, wf.grad, rtol=1e-2, atol=1e-2)
    torch.testing.assert_close(x.grad.float(), xf.grad, rtol=2e-2, atol=2e-2)


@needs_torch
def test_empty_inputs_and_errors():
    from kiln.ops import cross_entropy, layer_norm, rms_norm, softmax
    x = torch.zeros(0, 16, dtype=torch.float64, requires_grad=True)
    w = torch.ones(16, dtype=torch.float64, requires_grad=True)
    y = rms_norm(x, w)
    y.sum().backward()
    assert y.shape == (0, 16) and torch.equal(w.grad, torch.zeros(16,
                                              dtype=torch.float64))
    assert softmax(x).shape == (0, 16)
    with pytest.raises(kiln.KilnArgumentError, match=r"shape \(16,\)"):
        rms_norm(torch.zeros(2, 16), torch.ones(15))
    with pytest.raises(kiln.KilnArgumentError, match="int64 tensors are not"):
        layer_norm(torch.zeros(2, 4, dtype=torch.int64), torch.ones(4),
                   torch.ones(4))
    with pytest.raises(kiln.KilnArgumentError, match="reduction"):
        cross_entropy(torch.zeros(2, 4), torch.zeros(2, dtype=torch.int64),
                      reduction="avg")
    with pytest.raises(kiln.KilnArgumentError, match="targets"):
        cross_entropy(torch.zeros(2, 4), torch.zeros(3, dtype=torch.int64))


def test_kiln_ops_imports_without_torch():
    # The wrappers import torch when called, not when kiln.ops loads.
    code = ("import sys; sys.modules['torch'] = None; import kiln.ops; "
            "import kiln.ops.norms as n; print(n.rms_norm_fwd.__name__)")
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=os.path.join(root, "client", "python"))
    out = subprocess.run([sys.executable, "-c", code], env=env,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "rms_norm_fwd"
