#!/usr/bin/env python3
"""Attention backward (issue 30): kiln.ops.flash_attention's backward (the
DSL kernels of client/python/kiln/ops/attention.py: Delta, then dK/dV per
key block with dQ by f32 atomics, then dQ cast) against SDPA's backward
with the cuDNN and FlashAttention-2 backends, bf16, BSHD inputs.

What is timed is what a training step pays: torch.autograd.grad of the
forward's output with respect to q, k and v (the forward is not timed;
retain_graph keeps it), for Kiln and each SDPA backend alike, in
alternation (bench.py's paired method). TFLOP/s count the backward's five
GEMMs (2.5x the forward's FLOPs), halved when causal. First, every tile
variant in VARIANTS is timed on the raw kernels and the fastest correct
one is used. Prints a markdown table last.
Usage: KILN_LIBRARY=... python3 bench/gpu/attention_bwd.py [quick]
"""
import os
import sys

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "..", "client", "python"))
import bench  # noqa: E402
from kiln.ops import attention as attn  # noqa: E402

# (block_M keys per block, block_N query rows per step, threads, stages)
VARIANTS = {
    64: [(64, 64, 128, 2), (128, 64, 256, 2), (64, 32, 128, 2),
         (128, 32, 256, 2)],
    128: [(64, 32, 128, 2), (64, 64, 128, 2), (128, 32, 256, 2),
          (128, 64, 256, 2)],
}


def cases(quick):
    # (batch, seq, heads, kv_heads, dim)
    shapes = [(16, 1024, 16, 16, 128), (4, 4096, 16, 16, 128),
              (1, 16384, 16, 16, 128), (8, 2048, 32, 8, 128),
              (16, 1024, 32, 32, 64), (4, 4096, 32, 32, 64)]
    if quick:
        shapes = shapes[1:2] + shapes[-1:]
    for shape in shapes:
        for causal in (False, True):
            yield shape, causal


def main():
    quick = "quick" in sys.argv[1:]
    torch.manual_seed(0)
    rows = []
    dt = torch.bfloat16
    for (b, s, h, hk, d), causal in cases(quick):
        label = (f"b{b} s{s} h{h}/{hk} d{d} "
                 f"{'causal' if causal else 'full'}")
        print(label, flush=True)
        q = torch.randn(b, s, h, d, device="cuda", dtype=dt).requires_grad_()
        k = torch.randn(b, s, hk, d, device="cuda", dtype=dt).requires_grad_()
        v = torch.randn(b, s, hk, d, device="cuda", dtype=dt).requires_grad_()
        do = torch.randn(b, s, h, d, device="cuda", dtype=dt)
        flops = 2.5 * 4 * b * h * s * s * d * (0.5 if causal else 1.0)
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        # The reference gradients: SDPA in f32 would be too slow at 16k;
        # cuDNN's bf16 result is the yardstick for the error column.
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            o_ref = torch.nn.functional.scaled_dot_product_attention(
                qt, kt, vt, is_causal=causal, enable_gqa=h != hk)
            ref = torch.autograd.grad(o_ref, (q, k, v), do.transpose(1, 2),
                                      retain_graph=True)
        o, lse = attn.flashattn_fwd(h, hk, d, causal, dtype="bfloat16",
                                    **attn._tiles(d, "bfloat16")["fwd"])(
            q.detach(), k.detach(), v.detach())
        delta = attn.attention_bwd_preprocess(h, d, dtype="bfloat16")(o, do)
        dq = torch.zeros(q.shape, device="cuda")
        dk, dv = torch.empty_like(k), torch.empty_like(v)
        best = None
        for bm, bn, threads, stages in VARIANTS[d]:
            kern = attn.flashattn_bwd(h, hk, d, causal, block_M=bm,
                                      block_N=bn, threads=threads,
                                      num_stages=stages, dtype="bfloat16")
            args = (q.detach(), k.detach(), v.detach(), do, lse, delta, dq,
                    dk, dv)
            try:
                dq.zero_()
                kern(*args)
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001 (a variant may not fit)
                print(f"  bm{bm} bn{bn} t{threads}: {str(e).splitlines()[0]}")
                continue
            err = max(((got.float() - want.float()).abs().max() /
                       want.float().abs().max()).item()
                      for got, want in zip((dq, dk, dv), ref))

            def run(kern=kern, args=args):
                dq.zero_()
                kern(*args)
            t = bench.median_ms(run, warm_ms=bench.SWEEP_WARM_MS)
            name = f"bm{bm} bn{bn} t{threads} s{stages}"
            ok = err == err and err <= 0.02
            print(f"  {name}: {flops / t / 1e9:.0f} TFLOP/s (raw kernels) "
                  f"err {err:.2g}{'' if ok else ' WRONG'}", flush=True)
            if ok and (best is None or t < best[0]):
                best = (t, name, err, (bm, bn, threads, stages))
        if best is None:
            print("  no correct variant", flush=True)
            continue
        saved = attn._tiles

        def tiles(dim, dtype, cfg=best[3]):
            t = saved(dim, dtype)
            t["bwd"] = dict(zip(("block_M", "block_N", "threads",
                                 "num_stages"), cfg))
            return t
        attn._tiles = tiles
        o_kiln = attn.flash_attention(q, k, v, causal=causal)

        def kiln_bwd():
            return torch.autograd.grad(o_kiln, (q, k, v), do,
                                       retain_graph=True)
        got = kiln_bwd()
        err = max(((g.float() - r.float()).abs().max() /
                   r.float().abs().max()).item() for g, r in zip(got, ref))
        kbest = (None, f"ops {best[1]}", err, kiln_bwd)
        for backend, rname in ((SDPBackend.CUDNN_ATTENTION, "cuDNN"),
                               (SDPBackend.FLASH_ATTENTION, "FA2")):
            try:
                with sdpa_kernel(backend):
                    o_b = torch.nn.functional.scaled_dot_product_attention(
                        qt, kt, vt, is_causal=causal, enable_gqa=h != hk)
            except RuntimeError as e:
                print(f"  {rname}: {str(e).splitlines()[0]}")
                continue

            def ref_bwd(o_b=o_b, backend=backend):
                with sdpa_kernel(backend):
                    return torch.autograd.grad(o_b, (q, k, v),
                                               do.transpose(1, 2),
                                               retain_graph=True)
            try:
                ref_bwd()
            except RuntimeError as e:
                print(f"  {rname} backward: {str(e).splitlines()[0]}")
                continue
            bench.paired_row(rows, label, kbest, flops, ref_bwd,
                             f"SDPA {rname} bwd")
        attn._tiles = saved
    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("\n".join(bench.table(rows)))


if __name__ == "__main__":
    main()
