"""Memory-bound kernels as TileLang users write them (tests/python/kernels.py:
TileLang's RMSNorm, LayerNorm forward and online-softmax examples through
the Python DSL, unchanged but for the imports), on the H200, against the
device copy of the bytes each must move (issue 27's bar: >= 0.90x at
16k x 4k, >= 0.80x at 1k x 1k) and torch's own kernel.

Each kernel and its references are captured in CUDA graphs of REPS launches
and the graphs are timed in alternation, so host launch cost (Python's and
torch's alike) does not count: at 1k x 1k a launch from Python costs more
than the kernel. "GB/s" is the bytes the kernel must move (each input read
once, each output written once) over its time; "copy" is dst.copy_(src) of
the same number of bytes (read + write).

Usage:
  here:  python3 bench/gpu/memory_bound.py ir DIR   (each case's tile IR,
         DIR/NAME.tile, for `kiln compile` by two compilers: A/B below)
  GPU:   KILN_LIBRARY=... python3 bench/gpu/memory_bound.py [quick]
         [--ab DIR_A DIR_B]
         KILN_LIBRARY=... ncu -k regex:kiln_ python3 bench/gpu/memory_bound.py
         profile   (one launch of each kernel at 16k x 4k)
With --ab, the kernels compiled beforehand into DIR_A and DIR_B
(NAME.cubin + NAME.meta, as bench/gpu/make_kernels.sh writes them) are
timed beside the JIT-compiled one in the same alternation, their outputs
checked alike: a before/after of a compiler change in one run.
Prints one row per case; the table is last."""

import os
import statistics
import sys

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(
    __file__))))
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
sys.path.insert(0, os.path.join(ROOT, "tests", "python"))
import kernels  # noqa: E402

REPS = 20


def graph_of(fn):
    """A CUDA graph replaying fn REPS times (after one eager warm-up)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(REPS):
            fn()
    torch.cuda.synchronize()
    return g


def graph_ms(g, replays):
    begin, end = (torch.cuda.Event(enable_timing=True) for _ in range(2))
    begin.record()
    for _ in range(replays):
        g.replay()
    end.record()
    torch.cuda.synchronize()
    return begin.elapsed_time(end) / (replays * REPS)


def paired(fns, rounds=7, warm_ms=200.0):
    """Medians (ms per launch) of alternating graph timings of each fn."""
    graphs = [graph_of(f) for f in fns]
    per = max(graph_ms(g, 2) for g in graphs)
    replays = max(2, min(500, int(5.0 / max(per * REPS, 1e-4))))
    for g in graphs:  # each at its sustained clock before timing
        graph_ms(g, max(1, int(warm_ms / max(per * REPS, 1e-4))))
    times = [[] for _ in graphs]
    for _ in range(rounds):
        for g, t in zip(graphs, times):
            t.append(graph_ms(g, replays))
    return [statistics.median(t) for t in times]


def rel_err(got, want):
    got, want = got.float(), want.float()
    return ((got - want).abs().max() / want.abs().max().clamp_min(1e-6)).item()


class Case:
    """A kernel at one shape: `kernel` (the JIT kernel), `inputs`, the
    output tensors a prebuilt launch writes (`outputs`, in parameter order
    after the inputs), `ref` (torch's result of the checked output),
    `check` (which output is checked) and `moved` bytes."""

    def __init__(self, name, label, kernel, inputs, outputs, ref, moved,
                 check=0):
        self.name, self.label, self.kernel = name, label, kernel
        self.inputs, self.outputs, self.ref = inputs, outputs, ref
        self.moved, self.check = moved, check


def rms_norm_case(m, n, blk_m):
    x = torch.randn(m, n, device="cuda")
    return Case(f"rms_f32_{m}x{n}_b{blk_m}",
                f"rmsnorm f32 {m}x{n} blk_m={blk_m}",
                kernels.rms_norm_row(m, n, blk_m=blk_m), [x],
                [torch.empty_like(x)],
                lambda: x * (torch.rsqrt(x.pow(2).mean(-1, keepdim=True)) +
                             1e-12),
                2 * x.numel() * 4)


def elementwise_add_case(m, n, block_m, block_n, threads):
    a = torch.randn(m, n, device="cuda")
    b = torch.randn(m, n, device="cuda")
    return Case(f"add_f32_{m}x{n}_{block_m}x{block_n}",
                f"add f32 {m}x{n} {block_m}x{block_n}/{threads}",
                kernels.elementwise_add(m, n, block_m, block_n, threads),
                [a, b], [torch.empty_like(a)], lambda: a + b,
                3 * a.numel() * 4)


def layer_norm_case(m, d):
    x = torch.randn(m, d, device="cuda", dtype=torch.bfloat16)
    g = torch.randn(d, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(d, device="cuda", dtype=torch.bfloat16)
    outs = [torch.empty_like(x),
            torch.empty(m, device="cuda"), torch.empty(m, device="cuda")]
    return Case(f"ln_bf16_{m}x{d}", f"layernorm bf16 {m}x{d}",
                kernels.layer_norm_fwd(m, d), [x, g, b], outs,
                lambda: F.layer_norm(x, (d,), g, b, eps=1e-5),
                2 * x.numel() * 2 + 2 * m * 4 + 2 * d * 2)


def softmax_case(m, n):
    x = torch.randn(m, n, device="cuda", dtype=torch.float16) * 3
    return Case(f"softmax_f16_{m}x{n}", f"online softmax f16 {m}x{n}",
                kernels.online_softmax(m, n), [x], [torch.empty_like(x)],
                lambda: torch.softmax(x, -1), 2 * x.numel() * 2)


def two_pass_softmax_case(m, n):
    # The DSL's two-pass softmax (kernels.softmax: 4 rows x 256 columns per
    # step, TileLang's Serial loops), the phrasing bench's `dsl` spelling.
    x = torch.randn(m, n, device="cuda", dtype=torch.float16) * 3
    return Case(f"softmax2_f16_{m}x{n}", f"two-pass softmax f16 {m}x{n}",
                kernels.softmax(m, n), [x], [torch.empty_like(x)],
                lambda: torch.softmax(x, -1), 2 * x.numel() * 2)


def two_pass_rms_norm_case(m, n):
    x = torch.randn(m, n, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, device="cuda", dtype=torch.bfloat16)
    return Case(f"rms2_bf16_{m}x{n}", f"two-pass rmsnorm bf16 {m}x{n}",
                kernels.rms_norm(m, n), [x, w], [torch.empty_like(x)],
                lambda: F.rms_norm(x, (n,), w, eps=1e-6),
                2 * x.numel() * 2 + n * 2)


def cases(quick):
    sizes = ((16384, 4096),) if quick else ((16384, 4096), (1024, 1024))
    out = []
    for m, n in sizes:
        for blk_m in (1, 2, 4):
            out.append(lambda m=m, n=n, b=blk_m: rms_norm_case(m, n, b))
        for bm, bn, th in ((32, 32, 128), (128, 128, 128)):
            out.append(lambda m=m, n=n, bm=bm, bn=bn, th=th:
                       elementwise_add_case(m, n, bm, bn, th))
        out.append(lambda m=m, n=n: layer_norm_case(m, n))
        out.append(lambda m=m, n=n: softmax_case(m, n))
        out.append(lambda m=m, n=n: two_pass_softmax_case(m, n))
        out.append(lambda m=m, n=n: two_pass_rms_norm_case(m, n))
    return out


def prebuilt(directory, case):
    """A launch of DIR/NAME's cubin on the case's tensors (bench.Kernel)."""
    sys.path.insert(0, os.path.join(ROOT, "bench", "gpu"))
    import bench
    bench.KERNELS = directory
    outs = [torch.empty_like(o) for o in case.outputs]
    return bench.Kernel(case.name).launcher(*case.inputs, *outs), outs


def write_ir(directory):
    """Each case's tile IR, for `kiln compile` here (no GPU needed)."""
    import kiln.language as T  # noqa: F401 (the DSL, no device)
    os.makedirs(directory, exist_ok=True)
    shapes = ((16384, 4096), (1024, 1024))
    for m, n in shapes:
        for blk_m in (1, 2, 4):
            with open(os.path.join(directory,
                                   f"rms_f32_{m}x{n}_b{blk_m}.tile"), "w") as f:
                f.write(kernels.rms_norm_row(m, n, blk_m=blk_m).ir)
        with open(os.path.join(directory, f"ln_bf16_{m}x{n}.tile"), "w") as f:
            f.write(kernels.layer_norm_fwd(m, n).ir)
        with open(os.path.join(directory, f"softmax_f16_{m}x{n}.tile"),
                  "w") as f:
            f.write(kernels.online_softmax(m, n).ir)


def main():
    args = sys.argv[1:]
    if args[:1] == ["ir"]:
        write_ir(args[1])
        return
    if args[:1] == ["profile"]:
        # One launch of each kernel at 16k x 4k, for Nsight Compute
        # (`ncu -k regex:kiln_ python3 bench/gpu/memory_bound.py profile`).
        for make in cases(True):
            case = make()
            case.kernel(*case.inputs)
        torch.cuda.synchronize()
        return
    ab = None
    if "--ab" in args:
        i = args.index("--ab")
        ab = args[i + 1:i + 3]
        del args[i:i + 3]
    torch.manual_seed(0)
    rows = []
    for make in cases(args == ["quick"]):
        try:
            case = make()
            got = case.kernel(*case.inputs)
            got = got[case.check] if isinstance(got, (tuple, list)) else got
            want = case.ref()
            fns = [lambda c=case: c.kernel(*c.inputs)]
            errs = [rel_err(got, want)]
            for d in ab or []:
                run, outs = prebuilt(d, case)
                run()
                torch.cuda.synchronize()
                errs.append(rel_err(outs[case.check], want))
                fns.append(run)
        except Exception as e:  # a kernel that does not build is a row too
            print(f"  FAILED: {type(e).__name__}: {str(e)[:300]}", flush=True)
            continue
        src = torch.empty(case.moved // 4, dtype=torch.float16, device="cuda")
        dst = torch.empty_like(src)
        times = paired(fns + [lambda: dst.copy_(src), case.ref])
        t_k, t_copy, t_torch = times[0], times[-2], times[-1]
        gbs = case.moved / t_k / 1e6
        row = [case.label, case.moved / 2 ** 20, t_k * 1e3, gbs,
               case.moved / t_copy / 1e6, t_copy / t_k, t_torch / t_k,
               max(errs)]
        if ab:
            row += [t_copy / times[1], t_copy / times[2]]
        rows.append(row)
        print("  " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v)
                                for v in row), flush=True)
    head = ("| case | MiB moved | us | GB/s | copy GB/s | vs copy | vs torch "
            "| max rel err |")
    rule = "|---|---|---|---|---|---|---|---|"
    if ab:
        head += " A vs copy | B vs copy |"
        rule += "---|---|"
    print(head)
    print(rule)
    for r in rows:
        line = (f"| {r[0]} | {r[1]:.1f} | {r[2]:.1f} | {r[3]:.0f} | "
                f"{r[4]:.0f} | {r[5]:.2f}x | {r[6]:.2f}x | {r[7]:.2g} |")
        if ab:
            line += f" {r[8]:.2f}x | {r[9]:.2f}x |"
        print(line)


if __name__ == "__main__":
    main()
