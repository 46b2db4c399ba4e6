"""The sparse-attention indexer written the TileLang way
(tests/python/test_indexer.py: T.reshape of the queries and of the GEMM
fragment, FP8 e4m3 operands, a key window per query token), on the GPU.
DeepSeek-V3.2's shape: 32 index heads of 64 dims, 4096 query tokens over
8192 keys, windows averaging 2048 keys. Reported: the kernel's time, its
TFLOP/s over the window's products (2 * H * D per query and key inside its
window, as TileLang's example counts them) and, in the same run, torch
computing the same logits (FP8 values in f32 through einsum, then the
mask), which is not a fused kernel: the bar for this kernel is FP8 wgmma
throughput, and the ratio says how far from it we are.

Usage (GPU machine, kiln importable, libkiln with the embedded compiler):
  KILN_LIBRARY=... python3 bench/gpu/indexer.py
Prints one row per configuration; the table is last."""

import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import test_indexer  # noqa: E402
from paged_decode import paired  # noqa: E402

S, L, H, D = 4096, 8192, 32, 64


def main():
    gen = torch.Generator(device="cuda")
    gen.manual_seed(0)
    fp8 = torch.float8_e4m3fn
    # Small integers: exact in FP8 and in the tensor cores' FP8
    # accumulation, so the error column checks the kernel, not the
    # hardware's accumulation precision.
    q = torch.randint(-3, 4, (S, H, D), device="cuda",
                      generator=gen).to(fp8)
    k = torch.randint(-3, 4, (L, D), device="cuda", generator=gen).to(fp8)
    k_scale = torch.rand(L, device="cuda", generator=gen) + 0.5
    w = torch.randn(S, H, device="cuda", generator=gen)
    # Windows of 1024-3072 keys ending near each query's diagonal.
    end = (torch.arange(S, device="cuda") * 2 + 1).clamp(max=L)
    length = torch.randint(1024, 3072, (S,), device="cuda", generator=gen)
    start = (end - length).clamp(min=0).to(torch.int32)
    end = end.to(torch.int32)
    products = int((end - start).sum()) * H * D * 2
    t = torch.arange(L, device="cuda")[None, :]
    inside = (t >= start[:, None]) & (t < end[:, None])

    def reference():
        dots = torch.einsum("shd,td->sht", q.float(), k.float())
        out = torch.einsum("sht,sh->st", dots.relu(), w) * k_scale[None, :]
        return out.masked_fill(~inside, float("-inf"))

    want = reference()
    rows = []
    for block_q, block_n, stages, threads in [
            (4, 128, 2, 128), (2, 128, 3, 128), (4, 64, 2, 128),
            (2, 64, 3, 128), (4, 128, 2, 256)]:
        name = f"bq{block_q} bn{block_n} st{stages} t{threads}"
        try:
            kernel = test_indexer.indexer_logits(
                heads=H, dim=D, block_q=block_q, block_n=block_n,
                stages=stages, threads=threads, dtype="float8_e4m3")
            out = torch.full((S, L), float("-inf"), device="cuda")
            kernel(q, k, k_scale, w, start, end, out)
            err = ((out - want).abs() / (want.abs() + 1))[inside].max()
            ms, ref_ms = paired(
                lambda: kernel(q, k, k_scale, w, start, end, out), reference)
        except Exception as e:  # a configuration that does not compile
            print(f"{name}: {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        row = (name, ms * 1e3, products / ms / 1e9, ref_ms * 1e3,
               ref_ms / ms, float(err))
        print(row, flush=True)
        rows.append(row)
    print(f"\nindexer S={S} L={L} H={H} D={D} fp8, "
          f"{torch.cuda.get_device_name()}")
    print("| config | kiln us | kiln TFLOP/s | torch us | vs torch | "
          "max rel err |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.0f} | {r[2]:.0f} | {r[3]:.0f} | "
              f"{r[4]:.1f}x | {r[5]:.1e} |")


if __name__ == "__main__":
    main()
