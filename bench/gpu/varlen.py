#!/usr/bin/env python3
"""Variable-length (packed) prefill attention (issue 26), TileLang's varlen
spelling (tests/python/kernels.py flashattn_varlen, compiled through
libkiln), f16, head dim 128, causal and full. Two references in the same
run, timed in alternation (bench.py's paired method):
- "fixed": our own fixed-length kernel (TileLang's FlashAttention example,
  client/python/examples/flash_attention.py, same tiles) on the same batch
  when every sequence has one length (the issue's bar: >= 0.95x its
  TFLOP/s), MHA only (the example has no GQA);
- "SDPA": torch SDPA (FA2 and cuDNN backends) on the padded batch (every
  sequence padded to the longest, the padding masked out of the result by
  the caller) with enable_gqa for grouped heads (the bar: >= 1.0x FA2).
TFLOP/s count the useful work only (a causal row sees its own prefix).
Prints a markdown table last.
Usage: KILN_LIBRARY=... python3 bench/gpu/varlen.py
"""
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "python"))
import bench  # noqa: E402
import kernels  # noqa: E402

DIM = 128
TILES = dict(block_M=128, block_N=128, num_stages=2, threads=256)


def cases():
    # (label, lengths, heads, groups)
    yield "8 x 2048 equal", [2048] * 8, 32, 1
    yield "2 x 8192 equal", [8192] * 2, 32, 1
    g = torch.Generator().manual_seed(1)
    ragged = torch.randint(256, 4097, (16,), generator=g).tolist()
    yield "16 ragged 256-4096", ragged, 32, 1
    yield "16 ragged 256-4096 GQA 32/8", ragged, 32, 4
    yield "8 x 2048 equal GQA 32/8", [2048] * 8, 32, 4


def flops(lens, heads, causal):
    pairs = sum(n * (n + 1) // 2 if causal else n * n for n in lens)
    return 4 * pairs * heads * DIM


def main():
    torch.manual_seed(0)
    rows = []
    for label, lens, heads, groups in cases():
        batch, longest = len(lens), max(lens)
        cu = torch.tensor([0] + lens, device="cuda").cumsum(0).to(torch.int32)
        total = int(cu[-1])
        kvh = heads // groups
        q = torch.randn(total, heads, DIM, device="cuda", dtype=torch.half)
        k = torch.randn(total, kvh, DIM, device="cuda", dtype=torch.half)
        v = torch.randn(total, kvh, DIM, device="cuda", dtype=torch.half)
        # The padded batch, BHSD for SDPA; padding keys masked by a boolean
        # mask only when lengths differ (else SDPA's own causal flag).
        def pad(x):
            out = x.new_zeros(batch, longest, x.shape[1], DIM)
            for b, n in enumerate(lens):
                out[b, :n] = x[int(cu[b]):int(cu[b + 1])]
            return out
        qp, kp, vp = pad(q), pad(k), pad(v)
        qt, kt, vt = (x.transpose(1, 2) for x in (qp, kp, vp))
        equal = len(set(lens)) == 1
        for causal in (True, False):
            kern = kernels.flashattn_varlen(batch, groups, total, total, heads,
                                            DIM, causal, dtype="float16",
                                            **TILES)

            def run(kern=kern):
                return kern(q, k, v, cu, cu, longest)
            out = run()
            mask = None
            if not equal:
                t = torch.arange(longest, device="cuda")
                keep = t[None, :] < torch.tensor(lens, device="cuda")[:, None]
                mask = keep[:, None, None, :]
                if causal:
                    mask = mask & (t[None, :] <= t[:, None])[None, None]
            sdpa_causal = causal and mask is None

            def sdpa():
                return torch.nn.functional.scaled_dot_product_attention(
                    qt, kt, vt, attn_mask=mask, is_causal=sdpa_causal,
                    enable_gqa=groups > 1)
            with sdpa_kernel(SDPBackend.MATH if mask is not None
                             else SDPBackend.FLASH_ATTENTION):
                ref = sdpa().transpose(1, 2)
            err = max((out[int(cu[b]):int(cu[b + 1])].float() -
                       ref[b, :n].float()).abs().max().item()
                      for b, n in enumerate(lens))
            tag = f"{label} {'causal' if causal else 'full'}"
            best = (None, "dsl varlen bm128 bn128", err, run)
            f = flops(lens, heads, causal)
            if equal and groups == 1:
                fixed = kernels.flashattn_tilelang(batch, heads, longest, DIM,
                                                   causal, **TILES)
                bench.paired_row(rows, tag, best, f,
                                 lambda: fixed(qp, kp, vp), "fixed (ours)")
            # SDPA's fast backends take no boolean mask: ragged batches run
            # them on the padded batch unmasked (the same FLOPs and bytes as
            # the masked problem, a fair speed reference).
            for backend, name in ((SDPBackend.FLASH_ATTENTION, "FA2"),
                                  (SDPBackend.CUDNN_ATTENTION, "cuDNN")):
                def fast(backend=backend):
                    with sdpa_kernel(backend):
                        return torch.nn.functional.scaled_dot_product_attention(
                            qt, kt, vt, is_causal=causal,
                            enable_gqa=groups > 1)
                try:
                    fast()
                except RuntimeError as e:
                    print(f"{tag} {name}: {str(e).splitlines()[0]}")
                    continue
                bench.paired_row(rows, tag, best, f, fast,
                                 f"{name} (padded)")
    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("\n".join(bench.table(rows)))


if __name__ == "__main__":
    main()
