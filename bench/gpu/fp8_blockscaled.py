#!/usr/bin/env python3
"""Block-scaled FP8 GEMM (issue 26), TileLang's spelling
(tests/python/kernels.py fp8_blockwise_gemm, compiled through libkiln)
against torch._scaled_mm with per-tensor scales on the same shape (the
issue's reference: >= 0.9x its TFLOP/s), timed in alternation (bench.py's
paired method). Prints a markdown table last.
Usage: KILN_LIBRARY=... python3 bench/gpu/fp8_blockscaled.py
"""
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "..", "tests", "python"))
import bench  # noqa: E402
import kernels  # noqa: E402

SHAPES = [(4096, 4096, 4096), (8192, 4096, 4096), (8192, 7168, 2048),
          (8192, 8192, 8192)]


def main():
    torch.manual_seed(0)
    rows = []
    for m, n, k in SHAPES:
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        sa = torch.rand(m, k // 128, device="cuda") + 0.5
        sb = torch.rand(n // 128, k // 128, device="cuda") + 0.5
        one = torch.ones((), device="cuda")
        ref = torch.zeros(m, n, device="cuda")
        for g in range(k // 128):
            cols = slice(g * 128, (g + 1) * 128)
            ref += (a[:, cols].float() @ b[:, cols].float().t()) * \
                sa[:, g:g + 1] * sb[:, g].repeat_interleave(128)[None, :]
        flops = 2 * m * n * k
        best = None
        for bm, threads in ((128, 256), (64, 128)):
            for stages in (3, 4):
                kern = kernels.fp8_blockwise_gemm(n, k, block_M=bm,
                                                  num_stages=stages,
                                                  threads=threads)
                name = f"dsl bm{bm} s{stages}"

                def run(kern=kern):
                    return kern(a, b, sa, sb)  # (allocates C: out_idx)
                c = run()
                torch.cuda.synchronize()
                err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
                t = bench.median_ms(run, warm_ms=bench.SWEEP_WARM_MS)
                print(f"{m}x{n}x{k} {name}: {flops / t / 1e9:.0f} TFLOP/s "
                      f"err {err:.2g}", flush=True)
                if err < bench.GEMM_TOL and (best is None or t < best[0]):
                    best = (t, name, err, run)

        def scaled_mm():
            return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one,
                                    out_dtype=torch.bfloat16)
        if best is None:
            print("no correct variant", flush=True)
            continue
        bench.paired_row(rows, f"FP8 block-scaled {m}x{n}x{k}", best, flops,
                         scaled_mm, "_scaled_mm per-tensor")
    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("\n".join(bench.table(rows)))


if __name__ == "__main__":
    main()
