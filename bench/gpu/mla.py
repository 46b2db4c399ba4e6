"""DeepSeek MLA decode over a paged latent cache written the TileLang way
(tests/python/kernels.py mla_decode_paged: split-KV then a combine, through
the Python DSL), on the H200: 128 query heads sharing one latent KV of
512 + 64 RoPE dims, page size 64, bf16, every sequence full length.
References in the same run: the device copy of the same cache bytes
(issue 26's bar: the kernel's bytes read per second over the copy's read +
write bandwidth; FlashMLA publishes about 90% of HBM) and the kernel's
TFLOP/s (MLA at 128 heads is near the ridge point: 2176 FLOP per head and
token against 1152 bytes per token). Per case the best of a small sweep
(chunk size, stages) with the split count that fills the GPU.

Usage (GPU machine, kiln importable, libkiln with the embedded compiler):
  KILN_LIBRARY=... python3 bench/gpu/mla.py [quick]
  KILN_LIBRARY=... python3 bench/gpu/mla.py one BATCH SEQ BLOCK_N STAGES
Prints one row per case; the table is last. `one` times a single
configuration (the split kernel's launches for bench/gpu/ncu_kernel.sh)."""

import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import kernels  # noqa: E402
from paged_decode import paired, time_ms  # noqa: E402

HEADS, D, DPE, PAGE = 128, 512, 64, 64


def reference(q, q_pe, kv, k_pe, table, batch, seq):
    rows = table.long().view(batch, -1)
    idx = (rows[:, :, None] * PAGE + torch.arange(PAGE, device="cuda"))
    idx = idx.reshape(batch, -1)[:, :seq]
    c = kv[idx, 0].float()              # [batch, seq, d]
    r = k_pe[idx, 0].float()
    s = (q.float() @ c.transpose(1, 2) + q_pe.float() @ r.transpose(1, 2))
    p = torch.softmax(s / (D + DPE) ** 0.5, dim=-1)
    return p @ c


def case(batch, seq, sms, sweep):
    max_pages = seq // PAGE
    pages = batch * max_pages
    table = torch.randperm(pages, device="cuda").view(
        batch, max_pages).to(torch.int32)
    lens = torch.full((batch,), seq, dtype=torch.int32, device="cuda")
    q = torch.randn(batch, HEADS, D, device="cuda", dtype=torch.bfloat16)
    q_pe = torch.randn(batch, HEADS, DPE, device="cuda", dtype=torch.bfloat16)
    kv = torch.randn(pages * PAGE, 1, D, device="cuda", dtype=torch.bfloat16)
    k_pe = torch.randn(pages * PAGE, 1, DPE, device="cuda",
                       dtype=torch.bfloat16)
    cache_bytes = (kv.numel() + k_pe.numel()) * 2
    want = reference(q, q_pe, kv, k_pe, table, batch, seq)
    src = torch.empty(cache_bytes // 2, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    blocks = batch * (HEADS // 64)
    best = None
    for block_n, stages in sweep:
        chunks = seq // block_n
        splits = max(1, min(-(-2 * sms // blocks), chunks // 8))
        kernel = kernels.mla_decode_paged(
            batch, HEADS, seq, D, DPE, PAGE, pages, block_N=block_n,
            num_split=splits, num_stages=stages)
        run = lambda: kernel(q, q_pe, kv, k_pe, table, lens)  # noqa: E731
        try:
            out = run()
        except Exception as e:  # noqa: BLE001 (a configuration that does not fit)
            print(f"  skip b{batch} s{seq} bn{block_n} st{stages}: "
                  f"{str(e).splitlines()[0][:160]}")
            continue
        torch.cuda.synchronize()
        err = (out.float() - want).abs().max().item()
        if err > 3e-2:
            print(f"  WRONG b{batch} s{seq} bn{block_n} st{stages}: "
                  f"max error {err:.3g}")
            continue
        t = time_ms(run, 20)
        if best is None or t < best[0]:
            best = (t, run, block_n, stages, splits, err)
    if best is None:
        return None
    _, run, block_n, stages, splits, err = best
    t, t_copy = paired(run, lambda: dst.copy_(src))
    read = cache_bytes / t / 1e6  # GB/s
    copy = 2 * cache_bytes / t_copy / 1e6
    flops = batch * HEADS * seq * 2 * (D + DPE + D)
    return (f"b{batch} s{seq}", cache_bytes / sms / 2 ** 20,
            f"bn{block_n} st{stages} ns{splits}", t * 1e3, read, copy,
            read / copy, flops / t / 1e9, err)


def main():
    torch.manual_seed(0)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    if sys.argv[1:2] == ["one"]:
        batch, seq, block_n, stages = (int(a) for a in sys.argv[2:6])
        r = case(batch, seq, sms, [(block_n, stages)])
        print(r)
        return
    quick = sys.argv[1:] == ["quick"]
    shapes = ((8, 4096), (64, 4096)) if quick else \
        ((1, 32768), (8, 8192), (32, 4096), (64, 8192), (128, 1024),
         (128, 4096))
    sweep = [(32, 2), (32, 4), (64, 1), (64, 2)]
    rows = []
    for batch, seq in shapes:
        r = case(batch, seq, sms, sweep)
        if r is not None:
            rows.append(r)
            print("  " + " | ".join(str(x) for x in r), flush=True)
    print("| case | cache MiB/SM | config | us | read GB/s | copy GB/s | "
          "vs copy | TFLOP/s | max err |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.2f} | {r[2]} | {r[3]:.1f} | {r[4]:.0f} | "
              f"{r[5]:.0f} | {r[6]:.2f}x | {r[7]:.0f} | {r[8]:.3f} |")


if __name__ == "__main__":
    main()
