#!/usr/bin/env python3
"""Mixture-of-experts grouped GEMM on the GPU (issue 26): Kiln's
moe_gemm / moe_gemm_fp8 (tests/compiler/corpus/moe_gemm.tile, compiled by
bench/gpu/make_moe.sh) against a dense GEMM of the same FLOPs (cuBLAS;
cuBLASLt's row-wise scaled _scaled_mm for FP8) and, where torch has it,
torch._grouped_mm on the same segments, timed in alternation (bench.py's
method). Rows are routed tokens sorted by expert with skewed counts (Zipf
weights in a random order, one expert empty); the tile map comes from the
moe_tile_map kernel on the device. Prints a table (markdown) last.
Usage: KILN_LIBRARY=... KILN_BENCH_KERNELS=... python3 bench/gpu/moe.py
"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench  # noqa: E402

CASES = [  # label, experts, routed rows, N, K
    ("Mixtral w1: 8 experts, 8192 rows", 8, 8192, 14336, 4096),
    ("DeepSeek-V3 up: 64 experts, 8192 rows", 64, 8192, 4096, 7168),
    ("DeepSeek-V3 up: 64 experts, 32768 rows", 64, 32768, 4096, 7168),
    ("Qwen3 up: 128 experts, 16384 rows", 128, 16384, 1536, 4096),
]


def skewed_counts(experts, rows, gen):
    w = 1.0 / torch.arange(1, experts + 1, dtype=torch.float64) ** 0.8
    w = w[torch.randperm(experts, generator=gen)]
    w[torch.randint(experts, (1,), generator=gen)] = 0
    counts = torch.floor(w / w.sum() * rows).long()
    counts[torch.argmax(w)] += rows - counts.sum()
    return counts


def tile_map(counts, bm):
    """Offsets (device i32) and the device tile map of BM-row tiles, built
    by moe_tile_map; T from the counts (the host knows them here)."""
    offsets = torch.zeros(len(counts) + 1, dtype=torch.int32)
    offsets[1:] = torch.cumsum(counts, 0).to(torch.int32)
    offsets = offsets.cuda()
    slots = int(((counts + bm - 1) // bm).sum())
    tiles = torch.empty(slots, 2, dtype=torch.int32, device="cuda")
    bench.Kernel("moe_map" if bm == 128 else "moe_map64").launcher(offsets, tiles)()
    # The map against the host's.
    want = [(e, int(offsets[e]) + r) for e, c in enumerate(counts.tolist())
            for r in range(0, c, bm)]
    assert tiles.cpu().tolist() == [list(x) for x in want], "tile map"
    return offsets, tiles


def bm_of(kern):
    return 64 if "_64x" in kern.name else 128


def run_case(rows_out, label, experts, rows, n, k, fp8, gen):
    counts = skewed_counts(experts, rows, gen)
    maps = {bm: tile_map(counts, bm) for bm in (64, 128)}
    offsets = maps[128][0]
    flops = 2 * rows * n * k
    pad = int((((counts + 127) // 128) * 128).sum()) / rows
    a = torch.randn(rows, k, device="cuda")
    w = torch.randn(experts, n, k, device="cuda") / k ** 0.5
    y = torch.empty(rows, n, device="cuda", dtype=torch.bfloat16)
    ends = offsets[1:].tolist()
    starts = offsets[:-1].tolist()
    if fp8:
        a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
        sa = torch.rand(rows, device="cuda") * 0.1 + 0.01
        sw = torch.rand(experts, n, device="cuda") * 0.1 + 0.01
        ref = torch.empty(rows, n, device="cuda")
        for e in range(experts):
            s, t = starts[e], ends[e]
            ref[s:t] = (a8[s:t].float() @ w8[e].float().t()) * sa[s:t, None] * sw[e][None, :]
        dense_b = w8[0]
        sa_col, sb_row = sa[:, None].contiguous(), sw[0][None, :].contiguous()

        def dense():
            return torch._scaled_mm(a8, dense_b.t(), scale_a=sa_col, scale_b=sb_row,
                                    out_dtype=torch.bfloat16)
        dense_name = "cuBLASLt _scaled_mm row-wise, dense"
        args = lambda kern: (a8, w8, sa, sw, offsets, maps[bm_of(kern)][1], y)  # noqa: E731
        ks = bench.kernels("moe_fp8")
    else:
        a16, w16 = a.to(torch.bfloat16), w.to(torch.bfloat16)
        ref = torch.empty(rows, n, device="cuda")
        for e in range(experts):
            s, t = starts[e], ends[e]
            ref[s:t] = a16[s:t].float() @ w16[e].float().t()
        dense_b = w16[0]

        def dense():
            return torch.matmul(a16, dense_b.t())
        dense_name = "cuBLAS dense"
        args = lambda kern: (a16, w16, offsets, maps[bm_of(kern)][1], y)  # noqa: E731
        ks = bench.kernels("moe_bf16")
        if (experts, n, k) == (64, 4096, 7168):  # the DSL spelling's shapes
            ks += bench.kernels("moedsl_bf16")
    tag = "fp8" if fp8 else "bf16"
    full = f"MoE {tag} {label} (N {n}, K {k}; tile rows / routed rows {pad:.2f})"
    best = None
    print(full, flush=True)
    for kern in ks:
        y.fill_(float("nan"))
        run = kern.launcher(*args(kern))
        run()
        torch.cuda.synchronize()
        err = ((y.float() - ref).abs().max() / ref.abs().max()).item()
        t = bench.median_ms(run, warm_ms=bench.SWEEP_WARM_MS)
        best = bench.pick(best, kern, t, err, bench.GEMM_TOL, flops, run)
    if best is None:
        print("no correct variant", flush=True)
        return
    bench.paired_row(rows_out, full, best, flops, dense, dense_name)
    if not fp8 and hasattr(torch, "_grouped_mm"):
        offs = offsets[1:].contiguous()
        wt = w16.transpose(-2, -1)

        def grouped():
            return torch._grouped_mm(a16, wt, offs=offs)
        try:
            g = grouped().float()
            gerr = ((g - ref).abs().max() / ref.abs().max()).item()
            print(f"  torch._grouped_mm err {gerr:.2g}", flush=True)
            bench.paired_row(rows_out, full, best, flops, grouped, "torch._grouped_mm")
        except RuntimeError as e:
            print("  torch._grouped_mm:", str(e).split("\n")[0], flush=True)


def main():
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    rows_out = []
    for fp8 in (False, True):
        for label, experts, rows, n, k in CASES:
            run_case(rows_out, label, experts, rows, n, k, fp8, gen)
    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}\n")
    print("\n".join(bench.table(rows_out)))


if __name__ == "__main__":
    main()
