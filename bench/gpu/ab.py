#!/usr/bin/env python3
"""Paired A/B of the same kernels built by two compilers (before / after a
change): DIR_A and DIR_B hold NAME.cubin + NAME.meta from make_kernels.sh
(KILN_BENCH_KERNELS=DIR). Each case launches A and B in alternation, six
rounds, each round a median of batched launches after a warm-up, so clock
drift under the power cap falls on both alike; prints the medians and
B/A (> 1: B faster). Results are checked against each other.

  python3 bench/gpu/ab.py DIR_A DIR_B
"""
import statistics
import sys

import torch

import bench


def cases():
    """(label, kernel name, args, flops): the GEMM and attention shapes the
    before/after tables are closest on."""
    out = []
    for n in (4096, 8192):
        a = torch.randn(n, n, device="cuda", dtype=torch.float16)
        b = torch.randn(n, n, device="cuda", dtype=torch.float16)
        c = torch.empty(n, n, device="cuda", dtype=torch.float16)
        for k in ("gemm_f16_wg128x256s4", "gemm_f16_wg256x128s4"):
            out.append((f"GEMM f16 {n}^3", k, (a, b, c), 2 * n ** 3))
    d, h = 128, 16
    for s, bt in ((1024, 16), (2048, 8), (16384, 1)):
        q, k, v = (torch.randn(bt, s, h, d, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        o = torch.empty_like(q)
        lse = torch.empty(bt, h, s, device="cuda", dtype=torch.float32)
        flops = 4 * bt * h * s * s * d
        out.append((f"attn d{d} s{s} causal", "fa_causal_d128_t256bn128",
                    (q, k, v, o, lse, d ** -0.5), flops / 2))
        out.append((f"attn d{d} s{s}", "fa_d128_t256bn128",
                    (q, k, v, o, d ** -0.5), flops))
    return out


def main():
    dir_a, dir_b = sys.argv[1:3]
    torch.manual_seed(0)
    print("| case | kernel | A TFLOP/s | B TFLOP/s | B/A | max diff |")
    print("|---|---|---|---|---|---|")
    for label, name, args, flops in cases():
        runs, outs = [], []
        for d in (dir_a, dir_b):
            bench.KERNELS = d
            run = bench.Kernel(name).launcher(*args)
            run()
            torch.cuda.synchronize()
            outs.append(args[3 if len(args) > 3 else 2].clone())
            runs.append(run)
        diff = (outs[0].float() - outs[1].float()).abs().max().item()
        ta, tb = [], []
        bench.run_for_ms(runs[0], 300)
        for _ in range(6):
            ta.append(bench.median_ms(runs[0], iters=10))
            tb.append(bench.median_ms(runs[1], iters=10))
        a, b = statistics.median(ta), statistics.median(tb)
        print(f"| {label} | {name} | {flops / a / 1e9:.0f} | "
              f"{flops / b / 1e9:.0f} | {a / b:.3f} | {diff:.2g} |", flush=True)


if __name__ == "__main__":
    main()
