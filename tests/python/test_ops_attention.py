"""FlashAttention backward on the CPU target (issue 30): kiln.ops'
flash_attention as an autograd function (MHA and GQA, causal or not,
ragged lengths, every head dim, gradcheck in float64), TileLang's own
backward example as TileLang writes it, and the DSL pieces it needed."""

import os

import numpy as np
import pytest

import kiln
import kiln.language as T

import kernels

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _client(libkiln_embedded):
    yield


def _close(got, want, tol):
    got = np.asarray(got, np.float64)
    err = np.abs(got - want).max()
    scale = max(np.abs(want).max(), 1.0)
    assert err <= tol * scale, f"max error {err} (scale {scale})"


@pytest.mark.parametrize("seq,heads,kv_heads,dim,causal,dtype", [
    (200, 4, 2, 64, True, "float16"),     # GQA, ragged last tiles
    (130, 2, 2, 128, False, "float16"),   # MHA, d128
    (77, 8, 1, 64, True, "bfloat16"),     # MQA
    (65, 2, 1, 256, True, "float16"),     # d256
    (100, 3, 3, 32, False, "float32"),
])
def test_flash_attention_grads_match_float64(seq, heads, kv_heads, dim,
                                             causal, dtype):
    from kiln.ops import flash_attention
    g = torch.Generator().manual_seed(seq * heads + dim)
    dt = getattr(torch, dtype)
    q = torch.randn(2, seq, heads, dim, generator=g).to(dt)
    k = torch.randn(2, seq, kv_heads, dim, generator=g).to(dt)
    v = torch.randn(2, seq, kv_heads, dim, generator=g).to(dt)
    do = torch.randn(2, seq, heads, dim, generator=g).to(dt)
    for t in (q, k, v):
        t.requires_grad_()
    o = flash_attention(q, k, v, causal=causal)
    o.backward(do)
    ref = kernels.attention_grads_reference(
        *(t.detach().double().numpy() for t in (q, k, v, do)), causal)
    tol = {"float16": 2e-3, "bfloat16": 2e-2, "float32": 1e-5}[dtype]
    for got, want in zip((o, q.grad, k.grad, v.grad), ref):
        assert got.dtype == dt
        _close(got.detach().double().numpy(), want, tol)


def test_flash_attention_custom_scale_and_strided_inputs():
    from kiln.ops import flash_attention
    g = torch.Generator().manual_seed(3)
    # q, k, v as views of one packed [b, s, 3, h, d] tensor (not dense).
    qkv = torch.randn(1, 90, 3, 2, 64, generator=g).half()
    q, k, v = (qkv[:, :, i].requires_grad_() for i in range(3))
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    assert not q.is_contiguous()
    do = torch.randn(1, 90, 2, 64, generator=g).half()
    o = flash_attention(q, k, v, causal=True, sm_scale=0.05)
    o.backward(do)
    ref = kernels.attention_grads_reference(
        *(t.detach().double().numpy() for t in (q, k, v, do)), True, 0.05)
    for got, want in zip((o, q.grad, k.grad, v.grad), ref):
        _close(got.detach().double().numpy(), want, 2e-3)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_gradcheck_float64(causal):
    from kiln.ops import flash_attention
    g = torch.Generator().manual_seed(7)
    q = torch.randn(1, 19, 2, 16, generator=g, dtype=torch.float64)
    k = torch.randn(1, 19, 1, 16, generator=g, dtype=torch.float64)
    v = torch.randn(1, 19, 1, 16, generator=g, dtype=torch.float64)
    inputs = tuple(t.requires_grad_() for t in (q, k, v))
    assert torch.autograd.gradcheck(
        lambda a, b, c: flash_attention(a, b, c, causal=causal), inputs)


def test_flash_attention_bad_inputs_are_refused():
    from kiln.ops import flash_attention
    q = torch.zeros(1, 8, 3, 16, dtype=torch.float16)
    k = torch.zeros(1, 8, 2, 16, dtype=torch.float16)
    with pytest.raises(kiln.KilnArgumentError, match="split evenly"):
        flash_attention(q, k, k)
    with pytest.raises(kiln.KilnArgumentError, match="one dtype"):
        flash_attention(q, q.float(), q)
    with pytest.raises(kiln.KilnArgumentError, match="int32 tensors"):
        flash_attention(*(torch.zeros(1, 8, 2, 16, dtype=torch.int32),) * 3)
    with pytest.raises(kiln.KilnArgumentError, match="sm_scale"):
        flash_attention(q, q, q, sm_scale=float("nan"))


@pytest.mark.parametrize("seq,causal", [(128, False), (200, True)])
def test_tilelang_mha_backward_example(rng, seq, causal):
    """TileLang's example_mha_bwd spelling: its dQ index map, the
    tensor-to-tensor copy that undoes it, element atomics into dQ."""
    from kiln.ops.attention import flashattn_fwd
    b, h, d = 1, 2, 64
    q, k, v, do = (rng.standard_normal((b, seq, h, d)).astype(np.float16)
                   for _ in range(4))
    o, lse = flashattn_fwd(h, h, d, causal)(q, k, v)
    delta = kernels.mha_bwd_prep(b, h, seq, d)(o, do)
    dq = np.zeros((b, seq, h, d), np.float32)
    dk, dv = np.zeros_like(q), np.zeros_like(q)
    kernels.mha_bwd(b, h, seq, d, causal)(q, k, v, do, lse, delta, dq, dk,
                                          dv)
    dq16 = kernels.mha_bwd_post(b, h, seq, d)(dq)
    assert dq16.dtype == np.float16
    ref = kernels.attention_grads_reference(q, k, v, do, causal)
    for got, want in zip((o, dq16, dk, dv), ref):
        _close(got, want, 2e-3)


def _lower(fn):
    return kiln.compile(fn).ir


def test_index_map_layout_is_checked_and_keeps_tensors_logical():
    @T.prim_func
    def copy_through(A: T.Tensor((64, 16), "float32"),
                     B: T.Tensor((64, 16), "float32")):
        with T.Kernel(1, threads=128) as bx:
            T.annotate_layout({A: T.Layout(A.shape, lambda i, j: [j, i])})
            T.copy(A, B)

    ir = _lower(copy_through)
    assert "layout" not in ir and "copy A" in ir

    @T.prim_func
    def wrong_arity(A: T.Tensor((64, 16), "float32")):
        with T.Kernel(1, threads=128) as bx:
            T.annotate_layout({A: T.Layout(A.shape, lambda i: [i])})

    with pytest.raises(kiln.KilnSourceError, match="takes 1 indices"):
        _lower(wrong_arity)

    @T.prim_func
    def on_a_tile(A: T.Tensor((64, 16), "float32")):
        with T.Kernel(1, threads=128) as bx:
            s = T.alloc_shared((64, 16), "float32")
            T.annotate_layout({s: T.Layout(s.shape, lambda i, j: [j, i])})
            T.copy(A, s)

    with pytest.raises(kiln.KilnSourceError, match="global tensors only"):
        _lower(on_a_tile)


def test_tensor_to_tensor_copy_converts_and_needs_a_constant_box(rng):
    n = T.symbolic("n")

    @T.prim_func
    def cast(X: T.Tensor((n, 48), "float32"), Y: T.Tensor((n, 48), "float16")):
        with T.Kernel(T.ceildiv(n, 16), threads=128) as bx:
            T.copy(X[bx * 16:(bx + 1) * 16, :], Y[bx * 16:(bx + 1) * 16, :])

    x = rng.standard_normal((37, 48)).astype(np.float32)
    y = np.zeros((37, 48), np.float16)
    kiln.compile(cast)(x, y)
    np.testing.assert_array_equal(y, x.astype(np.float16))

    @T.prim_func
    def ragged(X: T.Tensor((n,), "float32"), Y: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            T.copy(X[0:n], Y[0:n])

    with pytest.raises(kiln.KilnSourceError, match="compile-time shape"):
        _lower(ragged)


def test_floordiv_and_floormod_round_toward_negative_infinity(rng):
    @T.prim_func
    def f(X: T.Tensor((8,), "int32"), Y: T.Tensor((8,), "int32"),
          Z: T.Tensor((8,), "int32")):
        with T.Kernel(1, threads=32) as bx:
            for i in T.Parallel(8):
                Y[i] = T.floordiv(X[i], 3)
                Z[i] = T.floormod(X[i], 3)

    x = np.array([-7, -6, -1, 0, 1, 5, 6, 8], np.int32)
    y, z = np.zeros_like(x), np.zeros_like(x)
    kiln.compile(f)(x, y, z)
    np.testing.assert_array_equal(y, x // 3)
    np.testing.assert_array_equal(z, x % 3)


_CORPUS = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), "compiler", "corpus",
    "flash_attention_bwd.tile")


@pytest.mark.parametrize("causal,groups,seq,bn", [(False, 1, 150, 32),
                                                  (True, 3, 200, 64)])
def test_corpus_backward_matches_numpy(rng, causal, groups, seq, bn):
    """tests/compiler/corpus/flash_attention_bwd.tile (the tile IR the GPU
    corpus tests run) on the CPU target, against NumPy."""
    from kiln.ops.attention import flashattn_fwd
    with open(_CORPUS) as f:
        text = f.read()
    name = "flash_attention_bwd_causal" if causal else "flash_attention_bwd"
    prep = kiln.compile_ir(text, kernel="flash_attention_bwd_preprocess",
                           target="cpu", bindings={"BR": 32},
                           filename=_CORPUS)
    bwd = kiln.compile_ir(text, kernel=name, target="cpu",
                          bindings={"BN": bn, "STAGES": 2}, filename=_CORPUS)
    b, hk, d = 2, 2, 64
    h = hk * groups
    q, do = (rng.standard_normal((b, seq, h, d)).astype(np.float16)
             for _ in range(2))
    k, v = (rng.standard_normal((b, seq, hk, d)).astype(np.float16)
            for _ in range(2))
    o, lse = flashattn_fwd(h, hk, d, causal)(q, k, v)
    delta = np.zeros((b, h, seq), np.float32)
    prep(o, do, delta)
    dq = np.zeros((b, seq, h, d), np.float32)
    dk, dv = np.zeros_like(k), np.zeros_like(v)
    bwd(q, k, v, do, lse, delta, dq, dk, dv, d ** -0.5, groups)
    ref = kernels.attention_grads_reference(q, k, v, do, causal)
    for got, want in zip((dq, dk, dv), ref[1:]):
        _close(got, want, 2e-3)
    # The launch checks the GQA fact: H must be HK * G.
    with pytest.raises(kiln.KilnError, match="H == HK \\* G"):
        bwd(q, k, v, do, lse, delta, dq, dk, dv, d ** -0.5, groups + 1)


def test_factories_in_a_module_with_postponed_annotations(tmp_path, rng):
    # `from __future__ import annotations` makes annotations strings; names
    # a factory uses only there (N, dtype) still resolve.
    (tmp_path / "postponed.py").write_text(
        "from __future__ import annotations\n"
        "import kiln\n"
        "import kiln.language as T\n"
        "\n"
        "@kiln.jit(out_idx=[-1])\n"
        "def double(N, dtype='float32'):\n"
        "    @T.macro\n"
        "    def twice(src: T.Tensor((N,), dtype), i):\n"
        "        return src[i] * 2\n"
        "\n"
        "    @T.prim_func\n"
        "    def main(X: T.Tensor((N,), dtype), Y: T.Tensor((N,), dtype)):\n"
        "        with T.Kernel(1, threads=128) as bx:\n"
        "            for i in T.Parallel(N):\n"
        "                Y[i] = twice(X, i)\n"
        "    return main\n")
    import importlib
    import sys
    sys.path.insert(0, str(tmp_path))
    try:
        mod = importlib.import_module("postponed")
    finally:
        sys.path.remove(str(tmp_path))
    x = rng.standard_normal(40).astype(np.float64)
    np.testing.assert_array_equal(mod.double(40, "float64")(x), 2 * x)
