#!/usr/bin/env python3
"""Kiln GPU benchmark: our GEMM vs torch.matmul (cuBLAS) and our FlashAttention
forward vs PyTorch SDPA (FlashAttention-2 and cuDNN backends), in one run.

Kernels are compiled beforehand with bench/gpu/make_kernels.sh (cubin +
launch metadata, no GPU needed); this script loads them through libkiln
(KILN_LIBRARY: the bundled libkiln.so), launches them on torch's current
stream, checks each result against torch, times everything with CUDA events
(median of batched launches after warm-up) and writes bench/RESULTS.md.
"""
import ctypes
import datetime
import os
import statistics
import struct
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.environ.get("KILN_BENCH_KERNELS", os.path.join(HERE, "..", "..", ".gpu", "bench-kernels"))
# The kiln Python package from this checkout; KILN_LIBRARY names libkiln.
sys.path.insert(0, os.path.join(HERE, "..", "..", "client", "python"))
from kiln import _capi as kiln_capi  # noqa: E402


class Kernel:
    """A compiled kernel loaded through libkiln (kiln_kernel_from_parts), so
    that it launches the way users launch it: the runtime binds the
    arguments, builds and caches TMA tensor maps, and enqueues."""

    def __init__(self, name):
        self.name = name
        meta = open(os.path.join(KERNELS, name + ".meta")).read()
        self.params = []
        for line in meta.split("\n"):
            f = line.split()
            if f and f[0] == "param":
                self.params.append((f[1], f[2], f[3]))
            elif f and f[0] == "ptxas":
                self.ptxas = " ".join(f[1:])
        torch.cuda.init()
        torch.zeros(1, device="cuda")
        image = open(os.path.join(KERNELS, name + ".cubin"), "rb").read()
        self.kernel = kiln_capi.Kernel.from_parts(image, meta)

    def launcher(self, *args):
        """A no-argument function that launches with these arguments."""
        arr = kiln_capi.make_args(len(self.params))
        keep = [arr]
        for i, ((_, kind, dtype), a) in enumerate(zip(self.params, args)):
            d = dtype.encode()
            keep.append(d)
            arr[i].dtype = d
            if kind == "tensor":
                arr[i].is_tensor = 1
                arr[i].data = a.data_ptr()
                arr[i].rank = a.dim()
                shape = (ctypes.c_int64 * a.dim())(*a.shape)
                keep.append(shape)
                arr[i].shape = shape
            elif dtype == "f32":
                ctypes.memmove(arr[i].scalar, struct.pack("<f", a), 4)
            else:
                raise ValueError(dtype)

        def launch():
            _ = keep
            self.kernel.launch(arr, torch._C._cuda_getCurrentRawStream(
                torch.cuda.current_device()))
        return launch


def kernels(prefix):
    """Every compiled kernel named PREFIX or PREFIX_*: the variants of a case."""
    names = sorted(f[:-5] for f in os.listdir(KERNELS) if f.endswith(".meta"))
    return [Kernel(n) for n in names if n == prefix or n.startswith(prefix + "_")]


# Milliseconds of GPU time each kernel runs before it is timed against its
# reference. The H200 runs these kernels at its 700 W cap; the clock
# controller settles a few hundred ms after the load changes, so a kernel
# timed right after another one runs for a while at the clock that one
# left (a power-hungry reference timed after a lighter kernel looks up to
# ~15% faster than it can stay). A time-based warm-up measures each at its
# own sustained clock.
WARM_MS = float(os.environ.get("KILN_BENCH_WARM_MS", "300"))
# The same warm-up before each variant of the sweep, so that variants are
# compared (and the best picked) at their sustained clocks: without it each
# runs at the clock the one before it left, which favours a variant timed
# after a lighter one (2026-11-30: a persistent attention kernel read +13%
# over its predecessor timed right after it, +6% with the warm-up).
# KILN_BENCH_SWEEP_WARM_MS=0 turns it off for a quicker sweep.
SWEEP_WARM_MS = float(os.environ.get("KILN_BENCH_SWEEP_WARM_MS", str(WARM_MS)))


def run_for_ms(fn, ms):
    """Launches fn until `ms` of GPU time has passed."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    while True:
        for _ in range(5):
            fn()
        b.record()
        b.synchronize()
        if a.elapsed_time(b) >= ms:
            return


def median_ms(fn, warmup=5, iters=20, batch=5, warm_ms=0.0):
    """Median over `iters` samples of the mean time of `batch` back-to-back
    launches (so that host launch gaps do not count), after `warmup`
    launches and at least `warm_ms` of GPU time running fn."""
    for _ in range(warmup):
        fn()
    if warm_ms > 0:
        run_for_ms(fn, warm_ms)
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(batch):
            fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / batch)
    return statistics.median(times)


# A variant whose error exceeds these is reported and never the best.
GEMM_TOL = 0.02   # max |diff| / max |ref|
ATTN_TOL = 0.05   # max |diff| (bf16 outputs of magnitude <= ~4)


def pick(best, kern, t, err, tol, flops, run):
    """Prints one variant's time and keeps the fastest correct one (time,
    name, error, launcher)."""
    ok = err == err and err <= tol  # (NaN fails)
    print(f"  {kern.name}: {flops / t / 1e9:.0f} TFLOP/s err {err:.2g}"
          f"{'' if ok else ' WRONG'} ({kern.ptxas})", flush=True)
    if ok and (best is None or t < best[0]):
        return (t, kern.name, err, run)
    return best


def paired_ms(ref_fn, run, warmup=5, iters=20, rounds=3, warm_ms=None):
    """The reference and the chosen variant timed in alternation (rounds of
    each, medians of the rounds), each after `warm_ms` (WARM_MS) of running
    alone: the sweep over variants heats the GPU, so a reference timed
    before it would run cooler, and without the warm-up each kernel would
    be timed at the clock the other one left."""
    warm_ms = WARM_MS if warm_ms is None else warm_ms
    t_ref, t_run = [], []
    for _ in range(rounds):
        t_ref.append(median_ms(ref_fn, warmup, iters, warm_ms=warm_ms))
        t_run.append(median_ms(run, warmup, iters, warm_ms=warm_ms))
    return statistics.median(t_ref), statistics.median(t_run)


def gemm_row(rows, label, ks, args, c, ref, ref_fn, flops, ref_name):
    """Times every kernel variant on `args` (output `c`, checked against
    `ref`), keeps the fastest correct one and appends its row, timed in
    alternation with the reference (`ref_fn`)."""
    best = None
    print(label, flush=True)
    for kern in ks:
        c.fill_(float("nan"))
        run = kern.launcher(*args)
        run()
        torch.cuda.synchronize()
        err = ((c.float() - ref.float()).abs().max() /
               ref.float().abs().max()).item()
        best = pick(best, kern, median_ms(run, warm_ms=SWEEP_WARM_MS), err,
                    GEMM_TOL, flops, run)
    if best is None:
        print("no correct variant for", label, flush=True)
        return
    paired_row(rows, label, best, flops, ref_fn, ref_name)


def paired_row(rows, label, best, flops, ref_fn, ref_name, warmup=5, iters=20):
    """Appends the row of `best` (time, name, error, launcher) against
    ref_fn, timed in alternation after WARM_MS of warm-up each; the ratio
    with a 5-launch warm-up only (each kernel at the clock the other left)
    is kept beside it, to show what the warm-up changes."""
    t_ref, t_best = paired_ms(ref_fn, best[3], warmup, iters)
    s_ref, s_best = paired_ms(ref_fn, best[3], warmup, iters, warm_ms=0)
    rows.append((label, best[1], flops / t_best / 1e9, flops / t_ref / 1e9,
                 ref_name, t_ref / t_best, best[2], s_ref / s_best))
    print(rows[-1], flush=True)


def bench_gemm(rows):
    for dtype, tag in ((torch.float16, "f16"), (torch.bfloat16, "bf16")):
        ks = kernels(f"gemm_{tag}")
        if not ks:  # (a partial kernel folder)
            continue
        for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192),
                        (8192, 28672, 8192), (8192, 8192, 28672)):
            a = torch.randn(m, k, device="cuda", dtype=dtype)
            b = torch.randn(k, n, device="cuda", dtype=dtype)
            c = torch.empty(m, n, device="cuda", dtype=dtype)
            ref = torch.matmul(a, b)
            gemm_row(rows, f"GEMM {tag} {m}x{n}x{k}", ks, (a, b, c), c, ref,
                     lambda: torch.matmul(a, b), 2 * m * n * k, "cuBLAS")
            del a, b, c, ref


def bench_fp8(rows):
    """FP8 e4m3 GEMM (per-tensor scales, bf16 out) vs torch._scaled_mm
    (cuBLASLt)."""
    ks = kernels("gemm_fp8")
    for m, n, k in ((4096, 4096, 4096), (8192, 8192, 8192)):
        a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
        c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        one = torch.ones((), device="cuda")

        def scaled_mm():
            return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one,
                                    out_dtype=torch.bfloat16)
        ref = scaled_mm()
        gemm_row(rows, f"GEMM fp8 e4m3 {m}x{n}x{k}", ks, (a, b, c, 1.0, 1.0),
                 c, ref, scaled_mm, 2 * m * n * k, "cuBLASLt _scaled_mm")
        del a, b, c, ref


def bench_attention(rows):
    total = 16384
    # KILN_BENCH_HEAD_DIMS="64,128" limits the run to those head dims.
    only = os.environ.get("KILN_BENCH_HEAD_DIMS")
    # KILN_BENCH_SEQS="1024,4096" limits the sequence lengths.
    seqs = [int(x) for x in os.environ.get(
        "KILN_BENCH_SEQS", "1024,2048,4096,8192,16384").split(",")]
    for d, heads in ((64, 32), (128, 16), (256, 8)):
        if only and str(d) not in only.split(","):
            continue
        for causal in (False, True):
            ks = kernels(f"fa{'_causal' if causal else ''}_d{d}")
            for s in seqs:
                b = total // s
                q, k, v = (torch.randn(b, s, heads, d, device="cuda",
                                       dtype=torch.bfloat16) for _ in range(3))
                o = torch.empty_like(q)
                lse = torch.empty(b, heads, s, device="cuda", dtype=torch.float32)
                scale = d ** -0.5
                qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
                ref = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal).transpose(1, 2)
                flops = 4 * b * heads * s * s * d / (2 if causal else 1)
                label = f"attn bf16 d{d} s{s} b{b} h{heads}{' causal' if causal else ''}"
                print(label, flush=True)
                best = None
                for kern in ks:
                    args = (q, k, v, o, lse, scale) if causal else (q, k, v, o, scale)
                    run = kern.launcher(*args)
                    o.fill_(float("nan"))
                    run()
                    torch.cuda.synchronize()
                    err = (o.float() - ref.float()).abs().max().item()
                    best = pick(best, kern,
                                median_ms(run, 3, 10, warm_ms=SWEEP_WARM_MS),
                                err, ATTN_TOL, flops, run)
                if best is None:
                    print("no correct variant for", label, flush=True)
                    continue
                for backend, ref_label in ((SDPBackend.FLASH_ATTENTION, "FA2"),
                                           (SDPBackend.CUDNN_ATTENTION, "cuDNN")):
                    def sdpa():
                        with sdpa_kernel(backend):
                            return F.scaled_dot_product_attention(
                                qt, kt, vt, is_causal=causal)
                    try:
                        sdpa()
                    except RuntimeError as e:
                        print("skip", ref_label, e)
                        continue
                    paired_row(rows, label, best, flops, sdpa, ref_label, 3, 10)
                del q, k, v, o, lse


def bench_phrasing(rows):
    """The same attention kernel in three spellings (make_phrasings.sh:
    the corpus program, TileLang's wording through the Python DSL, symbolic
    shapes with a let-bound bound), f16, head dim 128, batch 4, 16 heads,
    4096 tokens, causal and full: each is timed in alternation with cuDNN's
    SDPA, so the rows' ratios compare the spellings within one run."""
    b, s, h, d = 4, 4096, 16, 128
    q, k, v = (torch.randn(b, s, h, d, device="cuda", dtype=torch.float16)
               for _ in range(3))
    o = torch.empty_like(q)
    lse = torch.empty(b, h, s, device="cuda", dtype=torch.float32)
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
    for causal in (True, False):
        c = "causal" if causal else "full"
        ref = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal).transpose(1, 2)
        flops = 4 * b * h * s * s * d / (2 if causal else 1)

        def cudnn():
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
        for spelling in ("corpus", "tilelang", "letsym"):
            name = f"ph_{c}_{spelling}"
            if not os.path.exists(os.path.join(KERNELS, name + ".meta")):
                continue
            kern = Kernel(name)
            if spelling == "corpus":
                args = (q, k, v, o, lse, d ** -0.5) if causal else (q, k, v, o, d ** -0.5)
            else:
                args = (q, k, v, o)
            run = kern.launcher(*args)
            o.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            err = (o.float() - ref.float()).abs().max().item()
            best = pick(None, kern, median_ms(run, 3, 10, warm_ms=SWEEP_WARM_MS),
                        err, ATTN_TOL, flops, run)
            if best is None:
                continue
            paired_row(rows, f"attn f16 d{d} s{s} b{b} h{h} {c} ({spelling})",
                       best, flops, cudnn, "cuDNN", 3, 10)


def bench_phrasing_rows(rows):
    """The GEMM, softmax and RMSNorm of tests/codegen/phrasings in every
    spelling (make_phrasings.sh), each timed in alternation with its torch
    reference at the constant spelling's shape (GEMM f16 4096^3; softmax
    f16 and RMSNorm bf16 16384 x 4096)."""
    n = 4096
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    c = torch.empty(n, n, device="cuda", dtype=torch.float16)
    x16 = torch.randn(16384, n, device="cuda", dtype=torch.float16)
    y16 = torch.empty_like(x16)
    xb = torch.randn(16384, n, device="cuda", dtype=torch.bfloat16)
    wb = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    yb = torch.empty_like(xb)
    moved = 2 * x16.numel() * 2  # bytes read + written
    c16 = torch.empty_like(x16)
    cb = torch.empty_like(xb)
    # (name, args, output, the result to check against, the reference
    # timed beside the kernel and its name, work, tolerance): memory-bound
    # kernels are timed against the device copy of the bytes they move
    # (issue 27's bar); torch's own kernel is timed too, as a second row.
    cases = (
        ("gemm", (a, b, c), c, lambda: torch.matmul(a, b),
         [(lambda: torch.matmul(a, b), "cuBLAS")], 2 * n ** 3, GEMM_TOL),
        ("softmax", (x16, y16), y16, lambda: torch.softmax(x16, -1),
         [(lambda: c16.copy_(x16), "copy"),
          (lambda: torch.softmax(x16, -1), "torch")], moved * 1e3, 0.01),
        ("rmsnorm", (xb, wb, yb), yb,
         lambda: F.rms_norm(xb, (n,), wb, eps=1e-6),
         [(lambda: cb.copy_(xb), "copy"),
          (lambda: F.rms_norm(xb, (n,), wb, eps=1e-6), "torch")],
         moved * 1e3, 0.05),
    )
    for name, args, out, check_fn, refs, work, tol in cases:
        ref = check_fn()
        for kern in kernels(f"ph_{name}"):
            run = kern.launcher(*args)
            out.fill_(float("nan"))
            run()
            torch.cuda.synchronize()
            err = ((out.float() - ref.float()).abs().max() /
                   ref.float().abs().max()).item()
            best = pick(None, kern, median_ms(run, warm_ms=SWEEP_WARM_MS),
                        err, tol, work, run)
            if best is not None:
                # (softmax / RMSNorm "TFLOP/s" columns: GB/s of the bytes
                # read and written.)
                for ref_fn, ref_name in refs:
                    paired_row(rows,
                               f"{name} ({kern.name[len(name) + 4:]})",
                               best, work, ref_fn, ref_name)


def profile(picks):
    """One launch of each chosen kernel and of its reference, for Nsight
    Compute (ncu). `picks`: KIND=NAME words (KIND gemm: bf16 GEMM at 4096^3
    beside torch.matmul; fp8: e4m3 GEMM at 4096^3 beside torch._scaled_mm;
    attn: bf16 attention, head dim 128, 4k tokens, beside both SDPA
    backends); with none, the main sm_90a GEMM and attention kernels.
    `size=N` sets the GEMMs' M = N = K (4096 by default)."""
    picks = dict(p.split("=", 1) for p in picks) or {
        "gemm": "gemm_bf16_wg128x256s4", "attn": "fa_d128_t256bn128"}
    n = int(picks.pop("size", "4096"))
    if "gemm" in picks:
        a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        Kernel(picks["gemm"]).launcher(a, b, c)()
        torch.matmul(a, b)
    if "fp8" in picks:
        a = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        b = torch.randn(n, n, device="cuda").to(torch.float8_e4m3fn)
        c = torch.empty(n, n, device="cuda", dtype=torch.bfloat16)
        Kernel(picks["fp8"]).launcher(a, b, c, 1.0, 1.0)()
        one = torch.ones((), device="cuda")
        torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
    if "attn" in picks:
        q, k, v = (torch.randn(4, 4096, 16, 128, device="cuda", dtype=torch.bfloat16)
                   for _ in range(3))
        o = torch.empty_like(q)
        Kernel(picks["attn"]).launcher(q, k, v, o, 128 ** -0.5)()
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))
        for backend in (SDPBackend.FLASH_ATTENTION, SDPBackend.CUDNN_ATTENTION):
            with sdpa_kernel(backend):
                F.scaled_dot_product_attention(qt, kt, vt)
    torch.cuda.synchronize()


def table(rows):
    """The markdown table of paired_row's rows."""
    lines = ["| case | kiln kernel | kiln TFLOP/s | ref TFLOP/s | ref | ratio | 5-launch | err |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r[0]} | {r[1]} | {r[2]:.0f} | {r[3]:.0f} | {r[4]} | {r[5]:.2f} "
                     f"| {r[7]:.2f} | {r[6]:.2g} |")
    return lines


def main():
    torch.manual_seed(0)
    rows = []
    what = sys.argv[1:] or ["gemm", "fp8", "attention"]
    if what[0] == "profile":
        profile(what[1:])
        return
    if "gemm" in what:
        bench_gemm(rows)
    if "fp8" in what:
        bench_fp8(rows)
    if "attention" in what:
        bench_attention(rows)
    if "phrasing" in what:
        bench_phrasing(rows)
        bench_phrasing_rows(rows)
    gpu = torch.cuda.get_device_name()
    lines = [f"# Kiln GPU benchmark results", "",
             f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC, {gpu}, torch {torch.__version__}, "
             "CUDA-event medians after warm-up, random data; the fastest correct variant is "
             f"timed again in alternation with the reference (three rounds, medians), each "
             f"after {WARM_MS:.0f} ms of running alone (its sustained clock under the power cap). "
             "Ratio = reference time / Kiln time "
             "(> 1: Kiln faster); `5-launch`: the same pair with a 5-launch warm-up only. "
             "`err`: GEMM max |diff| / max |ref|; attention max |diff| vs torch SDPA.", "",
             *table(rows)]
    text = "\n".join(lines) + "\n"
    print(text)
    out = os.environ.get("OUT")
    if out:
        open(os.path.join(out, "RESULTS.md"), "w").write(text)


if __name__ == "__main__":
    main()
