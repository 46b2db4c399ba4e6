"""The Python package on the GPU (tests/gpu/run.sh, where python3 has torch):
the GEMM, FlashAttention forward, softmax and RMSNorm kernels of
tests/python/kernels.py compiled for CUDA through libkiln (embedded mode)
and checked against torch on fresh random data with ragged shapes. Skipped,
saying why, without torch, a CUDA device or libkiln."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))

torch = pytest.importorskip("torch", reason="torch not installed")
if not torch.cuda.is_available():
    pytest.skip("torch has no CUDA device", allow_module_level=True)

import kiln  # noqa: E402
import kiln.language as T  # noqa: E402
from kiln import _capi  # noqa: E402

import kernels  # noqa: E402

if _capi.library_path() is None:
    pytest.skip("libkiln not found: set KILN_LIBRARY", allow_module_level=True)

M, N, K = T.symbolic("M"), T.symbolic("N"), T.symbolic("K")
gen = torch.Generator(device="cuda")
gen.seed()
print(f"torch seed {gen.initial_seed()}")


def randn(*shape, dtype=torch.float16):
    return torch.randn(*shape, device="cuda", dtype=dtype, generator=gen)


@pytest.mark.parametrize("shape", [(512, 256, 128), (333, 517, 200)])
def test_gemm(shape):
    m, n, k = shape
    kernel = kernels.matmul(M, N, K, 128, 128, 32)
    a, b = randn(m, k), randn(k, n)
    c = kernel(a, b)
    torch.cuda.synchronize()
    assert c.is_cuda and c.shape == (m, n)
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2,
                               atol=5e-2)


def test_gemm_with_a_non_power_of_two_chunk_count():
    # block_K=48: the A tile's rows are six 16-byte chunks, which the
    # swizzled shared layout must keep inside the row.
    kernel = kernels.matmul(M, N, K, 64, 64, 48)
    a, b = randn(300, 240), randn(240, 200)
    c = kernel(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2,
                               atol=5e-2)


@pytest.mark.parametrize("causal", [False, True])
def test_flash_attention_forward(causal):
    batch, heads, dim, seq = 2, 4, 64, 333
    kernel = kernels.flashattn(batch, heads, seq, dim, causal)
    q, k, v = (randn(batch, seq, heads, dim) for _ in range(3))
    out = kernel(q, k, v)
    ref = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2).float(), k.transpose(1, 2).float(),
        v.transpose(1, 2).float(), is_causal=causal).transpose(1, 2)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=5e-3)


def test_softmax():
    kernel = kernels.softmax(M, N)
    x = randn(27, 777) * 3
    torch.testing.assert_close(kernel(x).float(),
                               torch.softmax(x.float(), dim=1), rtol=1e-2,
                               atol=1e-4)


def test_rms_norm():
    kernel = kernels.rms_norm(M, N, dtype="bfloat16")
    x, w = randn(13, 1111, dtype=torch.bfloat16), randn(1111,
                                                        dtype=torch.bfloat16)
    xf = x.float()
    ref = xf * torch.rsqrt(xf.pow(2).mean(1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(kernel(x, w).float(), ref, rtol=2e-2,
                               atol=2e-2)


@pytest.mark.parametrize("m,n,blk_m", [(4097, 4096, 1), (999, 1024, 4),
                                       (1001, 4096, 4)])
def test_tilelang_rms_norm_example_on_cuda(m, n, blk_m):
    # TileLang's one-pass example: the row staged through a shared tile
    # that the plan holds in registers, its sum of squares in the row's
    # lanes (a row wider than the block's chunks).
    x = randn(m, n, dtype=torch.float32)
    y = kernels.rms_norm_row(m, n, blk_m=blk_m)(x)
    torch.cuda.synchronize()
    want = x * (torch.rsqrt(x.pow(2).mean(-1, keepdim=True)) + 1e-12)
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("block_M,block_N,threads",
                         [(32, 32, 128), (128, 128, 128), (64, 256, 256)])
def test_tilelang_elementwise_add_on_cuda(block_M, block_N, threads):
    # Staging tiles of 8 to 128 elements per thread: the ones live at once
    # past the register budget go through shared memory.
    a = randn(1000, 3001, dtype=torch.float32)
    b = randn(1000, 3001, dtype=torch.float32)
    c = kernels.elementwise_add(1000, 3001, block_M, block_N, threads)(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a + b, rtol=0, atol=0)


@pytest.mark.parametrize("m,d,threads", [(1025, 4096, 256), (77, 1536, 128)])
def test_tilelang_layer_norm_example_on_cuda(m, d, threads):
    # Gamma and beta staged in shared tiles read by the trailing loop
    # variable; Mean and Rstd stored by one lane per row.
    x = randn(m, d, dtype=torch.bfloat16) * 2 + 0.5
    g, b = randn(d, dtype=torch.bfloat16), randn(d, dtype=torch.bfloat16)
    y, mean, rstd = kernels.layer_norm_fwd(m, d, threads=threads)(x, g, b)
    torch.cuda.synchronize()
    xf = x.float()
    torch.testing.assert_close(mean, xf.mean(-1), rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(
        rstd, torch.rsqrt(xf.var(-1, unbiased=False) + 1e-5), rtol=1e-3,
        atol=1e-3)
    torch.testing.assert_close(
        y.float(), torch.nn.functional.layer_norm(xf, (d,), g.float(),
                                                  b.float(), eps=1e-5),
        rtol=2e-2, atol=5e-2)


@pytest.mark.parametrize("m,n", [(333, 4096), (64, 1000), (5, 9000)])
def test_tilelang_online_softmax_example_on_cuda(m, n):
    x = randn(m, n) * 3
    y = kernels.online_softmax(m, n)(x)
    torch.cuda.synchronize()
    torch.testing.assert_close(y.float(), torch.softmax(x.float(), -1),
                               rtol=1e-2, atol=1e-3)


def test_launches_on_the_current_stream():
    kernel = kernels.scale_add()
    x, bias = randn(10000, dtype=torch.float32), randn(4, dtype=torch.float32)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        y = kernel(x, bias, 2.0)
    stream.synchronize()
    idx = torch.arange(10000, device="cuda") % 4
    torch.testing.assert_close(y, 2.0 * x + bias[idx])


def test_repeated_calls_reuse_the_checked_launch():
    """A call like the last one takes the fast path (only pointers change);
    a different shape, dtype or scalar takes the full path again."""
    kernel = kernels.scale_add()
    bias = randn(4, dtype=torch.float32)
    for n, alpha in [(5000, 2.0), (5000, 2.0), (5000, 2.0), (777, 2.0),
                     (777, -1.5), (5000, 2.0)]:
        x = randn(n, dtype=torch.float32)
        y = kernel(x, bias, alpha)
        idx = torch.arange(n, device="cuda") % 4
        torch.testing.assert_close(y, alpha * x + bias[idx])
    assert kernel._fast is not None
    with pytest.raises(kiln.KilnArgumentError, match="expected dtype"):
        kernel(randn(5000, dtype=torch.float16), bias, 2.0)


def test_autotune_on_cuda_tensors_tunes_on_the_gpu(tmp_path):
    # Embedded client with its own cache: the daemon's tuner runs the
    # candidates on the GPU (target auto) at the launch's shape.
    from kiln import _client
    _client.set_default(_capi.Client.embedded(str(tmp_path / "cache")))
    try:
        configs = [{"block": 256, "num_stages": 1},
                   {"block": 512, "num_stages": 2},
                   {"block": 1024, "num_stages": 2}]
        tuned = kiln.autotune(configs=configs)(kernels.double)()
        x = torch.randn(100003, device="cuda", generator=gen)
        y = tuned(x)
        torch.cuda.synchronize()
        torch.testing.assert_close(y, 2 * x)
        assert tuned.answer["result"]["device_sku"].startswith("NVIDIA")
        assert tuned.config in configs and not tuned.cached
        assert all(r["status"] == "benchmarked" for r in tuned.results)
        # Small shape: checked against the CPU target.
        assert tuned.answer["result"]["reference"].startswith(
            "the CPU target")
    finally:
        _client.set_default(None)


def test_profiler_of_a_tilelang_example_main():
    # The host side every TileLang example's main() uses: inputs are torch
    # CUDA tensors made from the signature, checked against a torch
    # reference, timed with CUDA events.
    kernel = kernels.matmul(512, 384, 256, 128, 128, 32)
    profiler = kernel.get_profiler(
        tensor_supply_type=kiln.TensorSupplyType.Integer)
    a, b = profiler.inputs()
    assert a.is_cuda and a.dtype == torch.float16 and a.shape == (512, 256)
    profiler.assert_allclose(lambda x, y: x @ y, rtol=1e-2, atol=1e-2)
    ms = profiler.do_bench(warmup=5, rep=20)
    ref_ms = profiler.do_bench(lambda x, y: x @ y, warmup=5, rep=20)
    assert 0 < ms < 100 and 0 < ref_ms < 100


def test_kv_cache_write_scatters_by_slot():
    # Element stores into global tensors at data-dependent indices (the
    # paged KV-cache write of tests/compiler/corpus/kv_cache_write.tile,
    # TileLang-style): distinct slots, padding tokens (-1) not stored.
    Tk, P, S = T.symbolic("T"), T.symbolic("P"), T.symbolic("S")

    @kiln.jit(out_idx=[])
    def kv_write(heads=8, dim=128, block=16):
        @T.prim_func
        def main(K: T.Tensor((Tk, heads, dim), "bfloat16"),
                 Slots: T.Tensor((Tk,), "int32"),
                 Cache: T.Tensor((P, S, heads, dim), "bfloat16")):
            with T.Kernel(T.ceildiv(Tk, block), heads, threads=128) as (bx, h):
                k = T.alloc_fragment((block, dim), "bfloat16")
                slot = T.alloc_fragment((block,), "int32")
                T.copy(K[bx * block:(bx + 1) * block, h, :], k)
                T.copy(Slots[bx * block], slot)
                for i, d in T.Parallel(block, dim):
                    s = slot[i]
                    if bx * block + i < Tk and s >= 0:
                        Cache[s // S, s % S, h, d] = k[i, d]
        return main

    kernel = kv_write()
    tokens, pages, page = 300, 40, 16
    k = randn(tokens, 8, 128, dtype=torch.bfloat16)
    slots = torch.randperm(pages * page, device="cuda",
                           generator=gen)[:tokens].to(torch.int32)
    slots[::5] = -1
    cache = randn(pages, page, 8, 128, dtype=torch.bfloat16)
    want = cache.clone().view(pages * page, 8, 128)
    keep = slots >= 0
    want[slots[keep].long()] = k[keep]
    kernel(k, slots, cache)
    torch.cuda.synchronize()
    assert torch.equal(cache.view(pages * page, 8, 128), want)


def paged_decode_torch(q, kc, vc, table, lens):
    """torch SDPA per sequence over its gathered (unpaged) K and V."""
    batch, heads, dim = q.shape
    page, kv_heads = kc.shape[1], kc.shape[2]
    out = torch.zeros_like(q, dtype=torch.float32)
    for b in range(batch):
        n = int(lens[b])
        if n == 0:
            continue
        t = torch.arange(n, device=q.device)
        rows = table[b, t // page].long() * page + t % page
        k = kc.reshape(-1, kv_heads, dim)[rows].float()
        v = vc.reshape(-1, kv_heads, dim)[rows].float()
        k = k.repeat_interleave(heads // kv_heads, dim=1).transpose(0, 1)
        v = v.repeat_interleave(heads // kv_heads, dim=1).transpose(0, 1)
        out[b] = torch.nn.functional.scaled_dot_product_attention(
            q[b].float().unsqueeze(1), k, v).squeeze(1)
    return out


@pytest.mark.parametrize("page,block_n,splits", [(16, 16, 4), (64, 64, 2),
                                                 (128, 64, 3)])
def test_paged_decode_split_kv(page, block_n, splits):
    # Two T.Kernel blocks (split-KV, then the combine) sharing
    # T.alloc_global tensors; page indices from the block table.
    batch, heads, kv_heads = 4, 32, 8
    lens = torch.tensor([1000, 1, 0, 777], dtype=torch.int32, device="cuda")
    max_pages = -(-1000 // page)
    pages = batch * max_pages + 3
    table = torch.randperm(pages, device="cuda", generator=gen)[
        :batch * max_pages].view(batch, max_pages).to(torch.int32)
    q = randn(batch, heads, 128, dtype=torch.bfloat16)
    kc = randn(pages, page, kv_heads, 128, dtype=torch.bfloat16)
    vc = randn(pages, page, kv_heads, 128, dtype=torch.bfloat16)
    kernel = kernels.paged_decode(batch, heads, kv_heads, 128, page,
                                  max_pages, pages, num_split=splits,
                                  block_N=block_n)
    out = kernel(q, kc, vc, table, lens)
    torch.cuda.synchronize()
    ref = paged_decode_torch(q, kc, vc, table, lens)
    assert (out.float() - ref).abs().max().item() < 2e-2
    assert not out[2].any()


@pytest.mark.parametrize("heads,splits,block_n,stages", [(128, 1, 64, 1),
                                                         (128, 2, 64, 2),
                                                         (16, 4, 32, 2)])
def test_mla_decode_paged_on_cuda(heads, splits, block_n, stages):
    # TileLang's paged MLA decode as written (one latent KV of 512 + 64
    # dims shared by every head, T.If on the first chunk, split-KV then
    # the combine), ragged lengths, against f32 torch per sequence.
    page, d, dpe = 64, 512, 64
    lens = [1000, 1, 0, 777]
    batch = len(lens)
    max_pages = -(-1000 // page)
    pages = batch * max_pages + 3
    table = torch.randperm(pages, device="cuda", generator=gen)[
        :batch * max_pages].view(batch, max_pages).to(torch.int32)
    q = randn(batch, heads, d, dtype=torch.bfloat16)
    q_pe = randn(batch, heads, dpe, dtype=torch.bfloat16)
    kv = randn(pages * page, 1, d, dtype=torch.bfloat16)
    k_pe = randn(pages * page, 1, dpe, dtype=torch.bfloat16)
    kernel = kernels.mla_decode_paged(
        batch, heads, max_pages * page, d, dpe, page, pages, block_N=block_n,
        num_split=splits, num_stages=stages)
    out = kernel(q, q_pe, kv, k_pe, table,
                 torch.tensor(lens, dtype=torch.int32, device="cuda"))
    torch.cuda.synchronize()
    for b, n in enumerate(lens):
        if n == 0:
            assert not out[b].any()
            continue
        t = torch.arange(n, device="cuda")
        rows = table[b, t // page].long() * page + t % page
        c, r = kv[rows, 0].float(), k_pe[rows, 0].float()
        s = (q[b].float() @ c.T + q_pe[b].float() @ r.T) / (d + dpe) ** 0.5
        want = torch.softmax(s, dim=-1) @ c
        assert (out[b].float() - want).abs().max().item() < 2e-2, b


def test_element_atomic_add_on_cuda():
    # Element-wise T.atomic_add into repeated rows (an embedding gradient).
    rows, dim, tokens = 50, 256, 5000
    kernel = kernels.scatter_add(rows, dim, tokens)
    dy = torch.randint(-50, 50, (tokens, dim), device="cuda",
                       generator=gen).float()
    index = torch.randint(0, rows, (tokens,), device="cuda",
                          generator=gen).to(torch.int32)
    grad = torch.zeros(rows, dim, device="cuda")
    want = torch.zeros(rows, dim, device="cuda").index_add_(
        0, index.long(), dy)
    kernel(dy, index, grad)
    torch.cuda.synchronize()
    assert torch.equal(grad, want)


@pytest.mark.parametrize("dtype", (torch.float32, torch.float16,
                                   torch.int32))
def test_element_atomic_max_on_cuda(dtype):
    # T.atomic_max from many blocks into repeated segment rows
    # (tests/python/test_atomics.py), against torch's scatter_reduce.
    import test_atomics
    tokens, width, segments = 4099, 96, 37
    name = {torch.float32: "float32", torch.float16: "float16",
            torch.int32: "int32"}[dtype]
    kernel = test_atomics.segment_max(tokens, width, segments, dtype=name)
    if dtype == torch.int32:
        rows = torch.randint(-10**6, 10**6, (tokens, width), device="cuda",
                             generator=gen).to(dtype)
    else:
        rows = randn(tokens, width, dtype=dtype)
        rows[17, 3] = float("nan")
    seg = torch.randint(0, segments, (tokens,), device="cuda",
                        generator=gen).to(torch.int32)
    best = torch.zeros(segments, width, device="cuda", dtype=dtype)
    want = best.clone().scatter_reduce_(
        0, seg.long()[:, None].expand(-1, width), rows, "amax")
    if dtype != torch.int32:
        want[seg[17], 3] = float("nan")  # Kiln's max: a NaN wins
    kernel(rows, seg, best)
    torch.cuda.synchronize()
    torch.testing.assert_close(best, want, rtol=0, atol=0, equal_nan=True)
    if dtype != torch.int32:
        assert torch.isnan(best[seg[17], 3])


def test_region_atomic_min_on_cuda():
    import test_atomics
    rows, cols = 1000, 333
    kernel = test_atomics.column_min(rows, cols)
    data = randn(rows, cols, dtype=torch.float32)
    low = torch.zeros(cols, device="cuda")
    want = torch.minimum(low, data.min(dim=0).values)
    kernel(data, low)
    torch.cuda.synchronize()
    assert torch.equal(low, want)


@pytest.mark.parametrize("spelled_as_call, tally_in", [
    (True, "shared"), (False, "shared"), (True, "fragment")])
def test_shared_bins_on_cuda(spelled_as_call, tally_in):
    # A block-local histogram in shared memory (tests/python/
    # test_shared_atomics.py): keys read from memory, a third of them in
    # one bin, so the shared-memory atomics collide; against torch.
    import test_shared_atomics
    n, bins = 200_003, 32
    kernel = test_shared_atomics.binned(n, bins,
                                        spelled_as_call=spelled_as_call,
                                        tally_in=tally_in)
    keys = torch.randint(-1000, 1000, (n,), device="cuda",
                         generator=gen).to(torch.int32)
    keys[::3] = 7
    vals = randn(n, dtype=torch.float32)
    count = torch.zeros(bins, device="cuda", dtype=torch.int32)
    peak = torch.full((bins,), -100.0, device="cuda")
    k = keys.long() % bins
    want_count = torch.bincount(k, minlength=bins).to(torch.int32)
    want_peak = peak.clone().scatter_reduce_(0, k, vals, "amax")
    kernel(keys, vals, count, peak)
    torch.cuda.synchronize()
    assert torch.equal(count, want_count)
    assert torch.equal(peak, want_peak)


def test_local_tiles_and_vectorized_loops_on_cuda():
    # T.vectorized as TileLang means it (tests/python/test_local_tiles.py):
    # per-iteration registers inside a T.Parallel, and register staging
    # every thread runs whole; against torch.
    import test_local_tiles
    x = randn(1000, 8, dtype=torch.float32)
    y = test_local_tiles.scaled_rows()(x)
    torch.testing.assert_close(y, 2 * x + 2 * x.flip(1))
    a = randn(8, dtype=torch.float32)
    b = randn(517, 8, dtype=torch.float32)
    c = test_local_tiles.staged_dot()(a, b)
    torch.testing.assert_close(c, b @ a, rtol=1e-5, atol=1e-5)


def test_reshaped_fragment_on_cuda():
    # The lightning indexer's T.reshape (tests/python/test_tile_reshape.py):
    # a GEMM's fragment seen as [n, q, h], weighted and reduced over h.
    import test_tile_reshape
    keys = randn(1000, 16, dtype=torch.float32)
    qs = randn(32, 16, dtype=torch.float32)
    w = randn(4, 8, dtype=torch.float32)
    out = test_tile_reshape.weighted_head_sum()(keys, qs, w)
    s = torch.relu(keys @ qs.T).reshape(1000, 4, 8) * w
    torch.testing.assert_close(out, s.sum(-1), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("heads,dim,block_q,block_n", [
    (4, 32, 4, 32), (16, 64, 4, 64)])
def test_fp8_indexer_on_cuda(heads, dim, block_q, block_n):
    # tests/python/test_indexer.py in FP8 e4m3: T.reshape of a tensor and
    # of a GEMM fragment, a pipelined loop over a window read from memory.
    import test_indexer
    kernel = test_indexer.indexer_logits(heads=heads, dim=dim,
                                         block_q=block_q, block_n=block_n,
                                         dtype="float8_e4m3")
    queries, keys = 301, 1000
    fp8 = torch.float8_e4m3fn
    q = torch.randint(-3, 4, (queries, heads, dim), device="cuda",
                      generator=gen).to(fp8)
    k = torch.randint(-3, 4, (keys, dim), device="cuda",
                      generator=gen).to(fp8)
    k_scale = torch.rand(keys, device="cuda", generator=gen) + 0.5
    w = randn(queries, heads, dtype=torch.float32)
    mid = torch.arange(queries, device="cuda") * 3
    start = (mid - 200).clamp(min=0).to(torch.int32)
    end = (mid + 57).to(torch.int32)
    end[::7] = start[::7]
    out = torch.full((queries, keys), float("-inf"), device="cuda")
    kernel(q, k, k_scale, w, start, end, out)
    dots = torch.einsum("shd,td->sht", q.float(), k.float())
    want = torch.einsum("sht,sh->st", dots.relu(), w) * k_scale[None, :]
    t = torch.arange(keys, device="cuda")[None, :]
    inside = (t >= start[:, None]) & (t < end.clamp(max=keys)[:, None])
    want = torch.where(inside, want, torch.full_like(want, float("-inf")))
    torch.testing.assert_close(out, want, rtol=1e-4, atol=1e-3)


def test_fragment_elements_outside_parallel_on_cuda():
    batch, heads, splits = 4, 32, 9
    lse = torch.rand(batch, heads, splits, device="cuda", generator=gen) * 6 - 3
    part = torch.randn(batch, heads, splits, 128, device="cuda", generator=gen)
    out = kernels.split_combine(batch, heads, splits)(lse, part)
    torch.cuda.synchronize()
    w = torch.softmax(lse * 0.6931471805599453, dim=-1)  # 2^lse normalised
    want = (part * w[..., None]).sum(2)
    torch.testing.assert_close(out.float(), want, atol=2e-3, rtol=2e-3)


def test_eager_style_gemm_and_add_on_cuda():
    # TileLang's eager style on torch CUDA tensors: dims from the tensors,
    # then .compile(...) with the same dims gives the same kernel.
    import test_eager
    a, b = randn(300, 200), randn(200, 250)
    c = test_eager.matmul(a, b, 128, 128, 32)
    torch.cuda.synchronize()
    assert c.is_cuda and c.shape == (300, 250) and c.dtype == torch.float16
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2,
                               atol=5e-2)
    x, y = randn(70, 45, dtype=torch.float32), randn(70, 45,
                                                     dtype=torch.float32)
    kernel = test_eager.add.compile(M=70, N=45, block_M=32, block_N=32,
                                    threads=128)
    torch.testing.assert_close(kernel(x, y), x + y)
    torch.testing.assert_close(test_eager.add(x, y, 32, 32, 128), x + y)


def test_nan_propagates_through_reductions_on_cuda():
    import test_numeric
    x = randn(9, 64, dtype=torch.float32)
    x[1, 0] = float("nan")
    x[3, :] = float("nan")
    x[5, :] = float("-inf")
    mx, am, nans = test_numeric.nan_row_stats(9, 64)(x)
    torch.cuda.synchronize()
    torch.testing.assert_close(mx, torch.amax(x, dim=1), equal_nan=True)
    torch.testing.assert_close(am, torch.amax(x.abs(), dim=1),
                               equal_nan=True)
    assert nans.tolist() == torch.isnan(x).sum(1).tolist()


def test_explicit_autotuner_on_cuda():
    import test_autotune
    x = randn(4096, dtype=torch.float32)
    with kiln.set_autotune_inputs(x):
        tuner = kiln.AutoTuner.from_kernel(
            kernel=lambda **c: test_autotune.scaled_copy(4096, **c),
            configs=[{"block": 128}, {"block": 256, "bug": True},
                     {"block": 512}])
    result = tuner.set_compile_args(out_idx=[-1]).set_profile_args(
        ref_prog=lambda a: 2 * a).run(warmup=5, rep=20)
    assert result.config["block"] in (128, 512)
    assert result.latency > 0 and result.ref_latency > 0
    torch.testing.assert_close(result.kernel(x), 2 * x)


@pytest.mark.parametrize("block_M,threads", [(128, 256), (64, 128)])
def test_moe_grouped_gemm_on_cuda(block_M, threads):
    # Skewed segments on torch tensors: empty experts, one row, several
    # tiles; the tile map from the host helper; ragged N.
    counts = [300, 0, 1, 129, 64, 0, 17]
    experts, n, k = len(counts), 520, 192
    offsets = torch.zeros(experts + 1, dtype=torch.int32)
    offsets[1:] = torch.cumsum(torch.tensor(counts), 0)
    m = int(offsets[-1])
    tiles = torch.from_numpy(kernels.moe_tile_map(offsets.numpy(), block_M))
    kernel = kernels.moe_gemm(experts, n, k, block_M=block_M,
                              threads=threads)
    a = randn(m, k, dtype=torch.bfloat16)
    w = randn(experts, n, k, dtype=torch.bfloat16)
    y = kernel(a, w, offsets.cuda(), tiles.cuda())
    want = torch.empty(m, n, device="cuda")
    for e in range(experts):
        s, t = int(offsets[e]), int(offsets[e + 1])
        want[s:t] = a[s:t].float() @ w[e].float().t()
    torch.testing.assert_close(y.float(), want, atol=0.1, rtol=2e-2)


@pytest.mark.parametrize("block_M,threads", [(64, 128), (128, 256)])
def test_fp8_blockwise_gemm_on_cuda(block_M, threads):
    # TileLang's FP8 blockwise GEMM as written (T.Pipelined, a scalar
    # b_scale per step, the promotion into C_local_accum), on torch FP8
    # tensors: ragged M and N, a last K-group of 64 columns.
    m, n, k = 1000, 2056, 576
    kernel = kernels.fp8_blockwise_gemm(n, k, block_M=block_M,
                                        threads=threads)
    a = randn(m, k).to(torch.float8_e4m3fn)
    b = randn(n, k).to(torch.float8_e4m3fn)
    groups = -(-k // 128)
    sa = torch.rand(m, groups, device="cuda") + 0.01
    sb = torch.rand(-(-n // 128), groups, device="cuda") + 0.01
    c = kernel(a, b, sa, sb)
    want = torch.zeros(m, n, device="cuda")
    for g in range(groups):
        cols = slice(g * 128, (g + 1) * 128)
        part = a[:, cols].float() @ b[:, cols].float().t()
        want += part * sa[:, g:g + 1] * sb[:, g].repeat_interleave(128)[:n]
    torch.testing.assert_close(c.float(), want, atol=0.1, rtol=2e-2)


@pytest.mark.parametrize("causal", [False, True])
def test_varlen_gqa_prefill_on_cuda(causal):
    # TileLang's varlen GQA forward as written: packed sequences of ragged
    # lengths (one token, one a whole number of tiles, one ending inside a
    # tile), 4 query heads per KV head, against SDPA per sequence.
    lens = [1, 256, 700, 129, 1000]
    cu = torch.tensor([0] + lens, device="cuda").cumsum(0).to(torch.int32)
    heads, groups, dim = 16, 4, 128
    total = int(cu[-1])
    q = randn(total, heads, dim, dtype=torch.bfloat16)
    k = randn(total, heads // groups, dim, dtype=torch.bfloat16)
    v = randn(total, heads // groups, dim, dtype=torch.bfloat16)
    kernel = kernels.flashattn_varlen(
        len(lens), groups, total, total, heads, dim, causal, block_M=128,
        block_N=128, num_stages=2, threads=256, dtype="bfloat16")
    out = kernel(q, k, v, cu, cu, max(lens))
    for b, n in enumerate(lens):
        rows = slice(int(cu[b]), int(cu[b + 1]))
        want = torch.nn.functional.scaled_dot_product_attention(
            q[rows].transpose(0, 1).float(),
            k[rows].transpose(0, 1).float().repeat_interleave(groups, 0),
            v[rows].transpose(0, 1).float().repeat_interleave(groups, 0),
            is_causal=causal).transpose(0, 1)
        torch.testing.assert_close(out[rows].float(), want, atol=2e-2,
                                   rtol=2e-2)


@pytest.mark.parametrize("is_neox,rotary_dim,index_dtype", [
    (True, None, torch.int32), (False, 64, torch.int64)])
def test_rope_kv_cache_write_on_cuda(is_neox, rotary_dim, index_dtype):
    # RoPE fused with the paged cache write (tests/python/kernels.py),
    # against torch: Llama's rotate-half with int32 indices, and GPT-J's
    # interleaved partial rotation with vLLM's int64 positions and slots.
    tokens, heads, kv_heads, dim, page, pages, max_pos = 301, 8, 2, 128, \
        16, 25, 4096
    rot = rotary_dim or dim
    q = randn(tokens, heads, dim, dtype=torch.bfloat16)
    k = randn(tokens, kv_heads, dim, dtype=torch.bfloat16)
    v = randn(tokens, kv_heads, dim, dtype=torch.bfloat16)
    pos = torch.randint(0, max_pos, (tokens,), device="cuda", generator=gen)
    freqs = 10000.0 ** (-torch.arange(0, rot, 2, device="cuda") / rot)
    angles = torch.arange(max_pos, device="cuda")[:, None] * freqs
    cos_sin = torch.cat([angles.cos(), angles.sin()], 1).float()
    slots = torch.randperm(pages * page, device="cuda",
                           generator=gen)[:tokens]
    slots[::7] = -1
    kc = randn(pages, page, kv_heads, dim, dtype=torch.bfloat16)
    vc = randn(pages, page, kv_heads, dim, dtype=torch.bfloat16)

    def rope(x):
        c = cos_sin[pos, :rot // 2][:, None, :]
        s = cos_sin[pos, rot // 2:][:, None, :]
        y = x.float().clone()
        if is_neox:
            x1, x2 = y[..., :rot // 2].clone(), y[..., rot // 2:rot].clone()
            y[..., :rot // 2], y[..., rot // 2:rot] = (x1 * c - x2 * s,
                                                       x2 * c + x1 * s)
        else:
            x1, x2 = y[..., 0:rot:2].clone(), y[..., 1:rot:2].clone()
            y[..., 0:rot:2], y[..., 1:rot:2] = (x1 * c - x2 * s,
                                                x2 * c + x1 * s)
        return y

    want_q = rope(q)
    keep = slots >= 0
    want_kc = kc.float().clone().view(pages * page, kv_heads, dim)
    want_kc[slots[keep]] = rope(k)[keep]
    want_vc = vc.clone().view(pages * page, kv_heads, dim)
    want_vc[slots[keep]] = v[keep]
    kernel = kernels.rope_kv_cache_write(
        heads, kv_heads, dim, rotary_dim, is_neox,
        index_dtype=str(index_dtype).replace("torch.", ""))
    kernel(pos.to(index_dtype), q, k, v, cos_sin, slots.to(index_dtype), kc,
           vc)
    torch.cuda.synchronize()
    torch.testing.assert_close(q.float(), want_q, atol=2e-2, rtol=1e-2)
    torch.testing.assert_close(kc.float().view(want_kc.shape), want_kc,
                               atol=2e-2, rtol=1e-2)
    assert torch.equal(vc.view(want_vc.shape), want_vc)


# --- kiln.torch: operators under torch.compile and in CUDA graphs ----------

def _attention_reference(q, k, v, causal):
    return torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2).float(), k.transpose(1, 2).float(),
        v.transpose(1, 2).float(), is_causal=causal).transpose(1, 2)


def test_torch_compile_traces_kiln_ops_in_one_graph():
    import kiln.torch as ktorch
    gemm = ktorch.op(kernels.matmul(M, N, K, 128, 128, 32), name="gpu_gemm")
    norm = ktorch.op(kernels.rms_norm(M, N), name="gpu_rms_norm")

    def block(a, b, w):
        h = gemm(a, b).to(torch.bfloat16)
        return norm(h, w).float() * 2.0 + 1.0

    a, b = randn(200, 96), randn(96, 520)
    w = randn(520, dtype=torch.bfloat16)
    compiled = torch.compile(block, fullgraph=True, dynamic=False)
    got = compiled(a, b, w)
    torch.testing.assert_close(got, block(a, b, w), rtol=0, atol=0)
    h = (a.float() @ b.float()).to(torch.bfloat16).float()
    ref = h * torch.rsqrt(h.pow(2).mean(1, keepdim=True) + 1e-6) * w.float()
    torch.testing.assert_close(got, ref * 2.0 + 1.0, rtol=3e-2, atol=6e-2)
    # A second shape goes through the fake implementation again.
    a2, b2 = randn(77, 96), randn(96, 520)
    torch.testing.assert_close(compiled(a2, b2, w), block(a2, b2, w),
                               rtol=0, atol=0)


def test_torch_compile_keeps_the_writes_of_a_mutating_op():
    # The paged-cache write mutates query and the caches (Tensor(a!) in its
    # schema, from the `writes` metadata): functionalisation must keep them.
    import kiln.torch as ktorch
    heads, kv_heads, dim, page, pages, tokens = 8, 2, 128, 16, 12, 150
    op = ktorch.op(kernels.rope_kv_cache_write(heads, kv_heads, dim),
                   name="gpu_rope_kv_cache_write")
    assert op.mutated == ["query", "key_cache", "value_cache"]
    pos = torch.randint(0, 1024, (tokens,), device="cuda", generator=gen,
                        dtype=torch.int32)
    angles = torch.arange(1024, device="cuda")[:, None] * \
        10000.0 ** (-torch.arange(0, dim, 2, device="cuda") / dim)
    cos_sin = torch.cat([angles.cos(), angles.sin()], 1).float()
    slots = torch.randperm(pages * page, device="cuda", generator=gen)[
        :tokens].to(torch.int32)
    q0 = randn(tokens, heads, dim, dtype=torch.bfloat16)
    k = randn(tokens, kv_heads, dim, dtype=torch.bfloat16)
    v = randn(tokens, kv_heads, dim, dtype=torch.bfloat16)

    def step(q, kc, vc):
        op(pos, q, k, v, cos_sin, slots, kc, vc)
        return q.float().sum()

    def caches():
        return (torch.zeros(pages, page, kv_heads, dim, device="cuda",
                            dtype=torch.bfloat16) for _ in range(2))
    q_eager, (kc_eager, vc_eager) = q0.clone(), caches()
    step(q_eager, kc_eager, vc_eager)
    q_comp, (kc_comp, vc_comp) = q0.clone(), caches()
    total = torch.compile(step, fullgraph=True)(q_comp, kc_comp, vc_comp)
    assert torch.equal(q_comp, q_eager) and not torch.equal(q_comp, q0)
    assert torch.equal(kc_comp, kc_eager) and torch.equal(vc_comp, vc_eager)
    assert torch.equal(vc_comp.view(-1, kv_heads, dim)[slots.long()], v)
    torch.testing.assert_close(total, q_eager.float().sum())


def test_cuda_graph_replays_gemm_and_attention():
    # Launches on the capturing stream, no host synchronisation: captured
    # once, replayed on new data in the same input buffers.
    import kiln.torch as ktorch
    gemm = kernels.matmul(M, N, K, 128, 128, 32)
    attn = kernels.flashattn(2, 4, 200, 64, True)
    attn_op = ktorch.op(attn, name="gpu_graph_attention")
    a, b = randn(300, 128), randn(128, 260)
    q, k, v = (randn(2, 200, 4, 64) for _ in range(3))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # compile and load before capturing
        for _ in range(2):
            gemm(a, b)
            attn_op(q, k, v)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        c = gemm(a, b)
        o = attn_op(q, k, v)
        o2 = attn(q, k, v)  # the kernel called directly, too
    for _ in range(2):
        a.copy_(randn(300, 128))
        b.copy_(randn(128, 260))
        for t in (q, k, v):
            t.copy_(randn(2, 200, 4, 64))
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(c.float(), a.float() @ b.float(),
                                   rtol=2e-2, atol=5e-2)
        ref = _attention_reference(q, k, v, True)
        torch.testing.assert_close(o.float(), ref, rtol=2e-2, atol=5e-3)
        assert torch.equal(o, o2)


def test_cuda_dlpack_tensors_launch_in_place():
    # A CUDA array of another library (here torch's, seen only through
    # DLPack) is launched on without a copy.
    class Foreign:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__()

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    kernel = kernels.scale_add()
    x, bias = randn(5000, dtype=torch.float32), randn(4, dtype=torch.float32)
    y = kernel(Foreign(x), Foreign(bias), 3.0)
    torch.cuda.synchronize()
    idx = torch.arange(5000, device="cuda") % 4
    torch.testing.assert_close(y, 3.0 * x + bias[idx])


# --- issue 30: attention backward -----------------------------------------

def _sdpa_grads(q, k, v, do, causal):
    """SDPA in float32 on the expanded KV heads: O and dQ, dK, dV."""
    groups = q.shape[2] // k.shape[2]
    q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
    ke, ve = (t.repeat_interleave(groups, 2) for t in (k32, v32))
    o = torch.nn.functional.scaled_dot_product_attention(
        q32.transpose(1, 2), ke.transpose(1, 2), ve.transpose(1, 2),
        is_causal=causal).transpose(1, 2)
    o.backward(do.float())
    return o, q32.grad, k32.grad, v32.grad


@pytest.mark.parametrize("seq,heads,kv_heads,dim,causal,dtype", [
    (333, 4, 4, 64, False, torch.float16),
    (1000, 8, 2, 128, True, torch.bfloat16),
    (257, 4, 1, 256, True, torch.float16),
])
def test_flash_attention_backward_on_cuda(seq, heads, kv_heads, dim, causal,
                                          dtype):
    from kiln.ops import flash_attention
    q = randn(2, seq, heads, dim, dtype=dtype).requires_grad_()
    k = randn(2, seq, kv_heads, dim, dtype=dtype).requires_grad_()
    v = randn(2, seq, kv_heads, dim, dtype=dtype).requires_grad_()
    do = randn(2, seq, heads, dim, dtype=dtype)
    o = flash_attention(q, k, v, causal=causal)
    o.backward(do)
    torch.cuda.synchronize()
    ref = _sdpa_grads(q, k, v, do, causal)
    tol = 2e-2 if dtype == torch.bfloat16 else 5e-3
    for name, got, want in zip(("o", "dq", "dk", "dv"),
                               (o, q.grad, k.grad, v.grad), ref):
        assert got.is_cuda and got.dtype == dtype, name
        scale = max(want.abs().max().item(), 1.0)
        err = (got.float() - want).abs().max().item()
        assert err <= tol * scale, f"{name}: max error {err} (scale {scale})"


def test_tilelang_mha_backward_example_on_cuda():
    from kiln.ops.attention import flashattn_fwd
    b, h, seq, d = 2, 4, 320, 64
    q, k, v, do = (randn(b, seq, h, d) for _ in range(4))
    o, lse = flashattn_fwd(h, h, d, True)(q, k, v)
    delta = kernels.mha_bwd_prep(b, h, seq, d)(o, do)
    dq = torch.zeros(b, seq, h, d, device="cuda")
    dk, dv = torch.empty_like(q), torch.empty_like(q)
    kernels.mha_bwd(b, h, seq, d, True)(q, k, v, do, lse, delta, dq, dk, dv)
    dq16 = kernels.mha_bwd_post(b, h, seq, d)(dq)
    torch.cuda.synchronize()
    ref = _sdpa_grads(q, k, v, do, True)
    for got, want in zip((o, dq16, dk, dv), ref):
        scale = max(want.abs().max().item(), 1.0)
        assert (got.float() - want).abs().max().item() <= 5e-3 * scale


def test_float64_gemm_on_cuda():
    # f64 gemms (the CPU target's gradient checks) run on the GPU too.
    @T.prim_func
    def g64(A: T.Tensor((M, 32), "float64"), B: T.Tensor((32, 64), "float64"),
            C: T.Tensor((M, 64), "float64")):
        with T.Kernel(T.ceildiv(M, 64), threads=128) as bx:
            a_s = T.alloc_shared((64, 32), "float64")
            b_s = T.alloc_shared((32, 64), "float64")
            acc = T.alloc_fragment((64, 64), "float64")
            T.copy(A[bx * 64, 0], a_s)
            T.copy(B, b_s)
            T.clear(acc)
            T.gemm(a_s, b_s, acc)
            T.copy(acc, C[bx * 64, 0])

    a = randn(100, 32, dtype=torch.float64)
    b = randn(32, 64, dtype=torch.float64)
    c = kiln.compile(g64, out_idx=[2])(a, b)
    torch.cuda.synchronize()
    torch.testing.assert_close(c, a @ b, rtol=1e-12, atol=1e-12)


# --- issue 30: norm, softmax and cross-entropy backward -------------------

def _grads_close(got, want, tol):
    for name, g, w in zip(("out", "dx", "dw", "db"), got, want):
        scale = max(w.abs().max().item(), 1.0)
        err = (g.float() - w.float()).abs().max().item()
        assert err <= tol * scale, f"{name}: max error {err} (scale {scale})"


@pytest.mark.parametrize("m,n", [(1000, 4096), (77, 3000)])
def test_norm_backwards_on_cuda(m, n):
    from kiln.ops import layer_norm, rms_norm
    F = torch.nn.functional
    x = randn(m, n, dtype=torch.bfloat16)
    w = randn(n, dtype=torch.bfloat16)
    b = randn(n, dtype=torch.bfloat16)
    dy = randn(m, n, dtype=torch.bfloat16)

    def run(fn, *params):
        ins = [t.detach().clone().requires_grad_() for t in (x,) + params]
        y = fn(*ins)
        y.backward(dy)
        return [y] + [t.grad for t in ins]

    def ref_rms(xx, ww):
        xf = xx.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)
                * ww.float())
    got = run(lambda a, c: rms_norm(a, c), w)
    want = run(lambda a, c: ref_rms(a, c), w)
    torch.cuda.synchronize()
    _grads_close(got, want, 3e-2)
    got = run(lambda a, c, d: layer_norm(a, c, d), w, b)
    want = run(lambda a, c, d: F.layer_norm(a.float(), (n,), c.float(),
                                            d.float()), w, b)
    torch.cuda.synchronize()
    _grads_close(got, want, 3e-2)


@pytest.mark.parametrize("m,n", [(333, 4096), (16, 40000)])
def test_softmax_backward_on_cuda(m, n):
    from kiln.ops import softmax
    x = randn(m, n).requires_grad_()
    dy = randn(m, n)
    y = softmax(x)
    y.backward(dy)
    x32 = x.detach().float().requires_grad_()
    y32 = torch.softmax(x32, -1)
    y32.backward(dy.float())
    torch.cuda.synchronize()
    _grads_close((y, x.grad), (y32, x32.grad), 1e-2)


def test_cross_entropy_large_vocab_on_cuda():
    from kiln.ops import cross_entropy
    m, v = 64, 128256
    logits = (randn(m, v, dtype=torch.bfloat16) * 3).requires_grad_()
    target = torch.randint(0, v, (m,), device="cuda", generator=gen)
    target[::7] = -100
    loss = cross_entropy(logits, target)
    loss.backward()
    l32 = logits.detach().float().requires_grad_()
    ref = torch.nn.functional.cross_entropy(l32, target, ignore_index=-100)
    ref.backward()
    torch.cuda.synchronize()
    # The loss comes back in the logits' dtype (bf16), as torch's does.
    assert loss.dtype == torch.bfloat16
    assert abs(loss.item() - ref.item()) <= 8e-3 * max(1.0, abs(ref.item()))
    err = (logits.grad.float() - l32.grad).abs().max().item()
    assert err <= 2e-2 * l32.grad.abs().max().item()
