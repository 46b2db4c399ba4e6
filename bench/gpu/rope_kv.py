"""RoPE fused with the paged KV-cache write, written the TileLang way
(tests/python/kernels.py rope_kv_cache_write: vLLM's rotary_embedding and
reshape_and_cache in one pass, through the Python DSL), on the H200.
Llama-3 8B and 70B (TP 2) shapes, head 128, bf16, page 16, tokens in
consecutive slots of shuffled pages (as a server's prefill writes them) and
decode batches. The kernel reads Q, K, V and writes Q, K and V (the cache
rows): "GB/s" is those bytes over its time, "copy" the device copy of the
same bytes (read + write), timed in alternation; "torch" is the unfused
eager equivalent (the rotations, then the cache rows by index).

Usage (GPU machine, kiln importable, libkiln with the embedded compiler):
  KILN_LIBRARY=... python3 bench/gpu/rope_kv.py [quick]
Prints one row per case; the table is last."""

import os
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import kernels  # noqa: E402
from paged_decode import paired  # noqa: E402

DIM, PAGE, MAX_POS = 128, 16, 32768


def rope_torch(x, pos, cos_sin):
    half = DIM // 2
    c = cos_sin[pos.long(), :half][:, None, :]
    s = cos_sin[pos.long(), half:][:, None, :]
    x1, x2 = x[..., :half].float(), x[..., half:].float()
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], -1).to(x.dtype)


def unfused(q, k, v, pos, cos_sin, slots, kc, vc):
    q.copy_(rope_torch(q, pos, cos_sin))
    rows = slots.long()
    kc.view(-1, *kc.shape[2:])[rows] = rope_torch(k, pos, cos_sin)
    vc.view(-1, *vc.shape[2:])[rows] = v


def case(tokens, heads, kv_heads, sweep):
    pages = -(-tokens // PAGE) + 8
    order = torch.randperm(pages, device="cuda")
    t = torch.arange(tokens, device="cuda")
    slots = (order[t // PAGE] * PAGE + t % PAGE).to(torch.int32)
    pos = torch.randint(0, MAX_POS, (tokens,), device="cuda",
                        dtype=torch.int32)
    freqs = 10000.0 ** (-torch.arange(0, DIM, 2, device="cuda") / DIM)
    angles = torch.arange(MAX_POS, device="cuda")[:, None] * freqs
    cos_sin = torch.cat([angles.cos(), angles.sin()], 1).float()
    q0 = torch.randn(tokens, heads, DIM, device="cuda", dtype=torch.bfloat16)
    k = torch.randn(tokens, kv_heads, DIM, device="cuda",
                    dtype=torch.bfloat16)
    v = torch.randn_like(k)
    kc = torch.zeros(pages, PAGE, kv_heads, DIM, device="cuda",
                     dtype=torch.bfloat16)
    vc = torch.zeros_like(kc)
    want_q, want_kc, want_vc = q0.clone(), kc.clone(), vc.clone()
    unfused(want_q, k, v, pos, cos_sin, slots, want_kc, want_vc)
    moved = 2 * (q0.numel() + k.numel() + v.numel()) * 2  # read + write
    src = torch.empty(moved // 4, dtype=torch.bfloat16, device="cuda")
    dst = torch.empty_like(src)
    best = None
    for block_t in sweep:
        kernel = kernels.rope_kv_cache_write(heads, kv_heads, DIM,
                                             block_T=block_t)
        q = q0.clone()
        kernel(pos, q, k, v, cos_sin, slots, kc, vc)
        torch.cuda.synchronize()
        err = max((q.float() - want_q.float()).abs().max().item(),
                  (kc.float() - want_kc.float()).abs().max().item())
        if err > 2e-2 or not torch.equal(vc, want_vc):
            print(f"  WRONG t{tokens} bt{block_t}: max error {err:.3g}")
            continue
        run = lambda: kernel(pos, q, k, v, cos_sin, slots, kc,  # noqa: E731
                             vc)
        t_k, t_copy = paired(run, lambda: dst.copy_(src))
        if best is None or t_k < best[0]:
            best = (t_k, t_copy, block_t, err)
    if best is None:
        return None
    t_k, t_copy, block_t, err = best
    qt = q0.clone()
    t_torch, _ = paired(
        lambda: unfused(qt, k, v, pos, cos_sin, slots, kc, vc),
        lambda: dst.copy_(src), rounds=3)
    gbs = moved / t_k / 1e6
    copy = moved / t_copy / 1e6
    return (f"t{tokens} h{heads}/{kv_heads}", moved / 2 ** 20,
            f"bt{block_t}", t_k * 1e3, gbs, copy, gbs / copy,
            t_torch / t_k, err)


def main():
    torch.manual_seed(0)
    quick = sys.argv[1:] == ["quick"]
    shapes = ((16384, 32, 8),) if quick else \
        ((64, 32, 8), (512, 32, 8), (4096, 32, 8), (16384, 32, 8),
         (16384, 32, 4), (65536, 32, 8))
    rows = []
    for tokens, heads, kv_heads in shapes:
        r = case(tokens, heads, kv_heads, (16, 32))
        if r is not None:
            rows.append(r)
            print("  " + " | ".join(str(x) for x in r), flush=True)
    print("| case | MiB moved | config | us | GB/s | copy GB/s | vs copy | "
          "vs torch | max err |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.1f} | {r[2]} | {r[3]:.1f} | {r[4]:.0f} | "
              f"{r[5]:.0f} | {r[6]:.2f}x | {r[7]:.1f}x | {r[8]:.3f} |")


if __name__ == "__main__":
    main()
