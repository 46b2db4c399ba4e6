#!/usr/bin/env python3
"""Norm, softmax and cross-entropy forward and backward (issue 30): the
kernels of client/python/kiln/ops/norms.py, first checked against torch in
f32, then timed in CUDA graphs (REPS launches per replay, medians of
paired rounds) against a device copy of the bytes each must move and
against torch eager. Tile variants are timed beside the defaults.
Usage: KILN_LIBRARY=... python3 bench/gpu/norms_bwd.py [rms|ln|softmax|ce]
Prints one line per kernel (time, GB/s, ratio to the copy), the list last.
"""
import os, statistics, sys, time
import torch
import torch.nn.functional as F
ROOT = os.getcwd()
sys.path.insert(0, os.path.join(ROOT, "client", "python"))
from kiln.ops import norms as K
import kiln.ops as ops

REPS = 10
ONLY = sys.argv[1:]


def graph_of(fn):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(); fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(REPS):
            fn()
    torch.cuda.synchronize()
    return g


def graph_ms(g, replays):
    s = torch.cuda.Event(enable_timing=True); e = torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(replays):
        g.replay()
    e.record(); torch.cuda.synchronize()
    return s.elapsed_time(e) / (replays * REPS)


def paired(fns, rounds=5):
    graphs = []
    for f in fns:
        try:
            graphs.append(graph_of(f))
        except Exception as ex:
            print("   graph failed:", type(ex).__name__, str(ex)[:200], flush=True)
            graphs.append(None)
    per = max(graph_ms(g, 1) for g in graphs if g is not None)
    replays = max(2, min(200, int(3.0 / max(per * REPS, 1e-4))))
    for g in graphs:
        if g is not None:
            graph_ms(g, max(1, int(100 / max(per * REPS, 1e-4))))
    times = [[] for _ in graphs]
    for _ in range(rounds):
        for g, t in zip(graphs, times):
            if g is not None:
                t.append(graph_ms(g, replays))
    return [statistics.median(t) if t else float("nan") for t in times]


def rel(a, b):
    a, b = a.float(), b.float()
    return ((a - b).abs().max() / b.abs().max().clamp_min(1e-6)).item()


rows = []


def bench(label, moved, cands, refs=()):
    """cands: [(name, fn)] kiln; refs: [(name, fn)] torch. Prints GB/s and
    ratio vs a copy of `moved` bytes."""
    src = torch.empty(moved // 4, dtype=torch.float16, device="cuda")
    dst = torch.empty_like(src)
    fns = [f for _, f in cands] + [f for _, f in refs] + [lambda: dst.copy_(src)]
    t0 = time.time()
    ts = paired(fns)
    tc = ts[-1]
    for (name, _), t in zip(list(cands) + list(refs), ts):
        line = f"{label} | {name} | {t*1e3:.1f} us | {moved/t/1e6:.0f} GB/s | {tc/t:.2f}x copy"
        rows.append(line); print("  " + line, flush=True)
    print(f"  ({label}: copy {moved/tc/1e6:.0f} GB/s; {time.time()-t0:.1f}s)", flush=True)


def want(name):
    return not ONLY or any(o in name for o in ONLY)


torch.manual_seed(0)
dev = "cuda"
M, N = 16384, 4096
print(torch.cuda.get_device_name(), torch.__version__, flush=True)

# ---------------- RMSNorm
if want("rms"):
    dt = torch.bfloat16
    x = torch.randn(M, N, device=dev, dtype=dt); w = torch.randn(N, device=dev, dtype=dt) * 0.1 + 1
    dy = torch.randn(M, N, device=dev, dtype=dt)
    t = time.time()
    kf = K.rms_norm_fwd(N, 1e-6, "bfloat16"); y, r = kf(x, w); torch.cuda.synchronize()
    print("rms fwd compile+run", time.time() - t, flush=True)
    yref = F.rms_norm(x.float(), (N,), w.float(), 1e-6)
    print("  rms fwd err", rel(y, yref), "rstd err", rel(r, torch.rsqrt(x.float().pow(2).mean(-1) + 1e-6)), flush=True)
    kf32 = K.rms_norm_fwd(N, 1e-6, "bfloat16", threads=128, block_N=4096)
    bench("rms fwd bf16 16k x 4k", 2 * M * N * 2 + M * 4,
          [("kiln 256x16", lambda: kf(x, w)), ("kiln 128x32", lambda: kf32(x, w))],
          [("torch F.rms_norm", lambda: F.rms_norm(x, (N,), w, 1e-6))])
    xf = x.float().requires_grad_(); wf = w.float().requires_grad_()
    F.rms_norm(xf, (N,), wf, 1e-6).backward(dy.float())
    cands = []
    for parts in (128, 256):
      for wr in (True,):
        kb = K.rms_norm_bwd(N, parts, "bfloat16", weight_regs=wr)
        dx, dw = kb(dy, x, w, r); torch.cuda.synchronize()
        print(f"  rms bwd parts={parts} wr={wr} err dx", rel(dx, xf.grad), "dw", rel(dw, wf.grad), flush=True)
        cands.append((f"kiln bwd parts={parts} wr={wr}", lambda kb=kb: kb(dy, x, w, r)))
    xt = x.clone().requires_grad_(); wt = w.clone().requires_grad_()
    def torch_fb():
        return torch.autograd.grad(F.rms_norm(xt, (N,), wt, 1e-6), (xt, wt), dy)
    xk = x.clone().requires_grad_(); wk = w.clone().requires_grad_()
    def kiln_fb():
        return torch.autograd.grad(ops.rms_norm(xk, wk, 1e-6), (xk, wk), dy)
    bench("rms bwd bf16 16k x 4k", 3 * M * N * 2 + M * 4, cands)
    bench("rms fwd+bwd bf16 16k x 4k", 5 * M * N * 2, [("kiln autograd", kiln_fb)], [("torch eager", torch_fb)])

# ---------------- LayerNorm
if want("ln"):
    dt = torch.bfloat16
    x = torch.randn(M, N, device=dev, dtype=dt) + 1; w = torch.randn(N, device=dev, dtype=dt); b = torch.randn(N, device=dev, dtype=dt)
    dy = torch.randn(M, N, device=dev, dtype=dt)
    kf = K.layer_norm_fwd(N, 1e-5, "bfloat16")
    y, mu, rs = kf(x, w, b)
    xf = x.float().requires_grad_(); wf = w.float().requires_grad_(); bf = b.float().requires_grad_()
    yr = F.layer_norm(xf, (N,), wf, bf, 1e-5); yr.backward(dy.float())
    print("  ln fwd err", rel(y, yr), flush=True)
    kb = K.layer_norm_bwd(N, 256, "bfloat16")
    dx, dw, db = kb(dy, x, w, mu, rs); torch.cuda.synchronize()
    print("  ln bwd err dx", rel(dx, xf.grad), "dw", rel(dw, wf.grad), "db", rel(db, bf.grad), flush=True)
    kfn = K.layer_norm_fwd(N, 1e-5, "bfloat16", weight_regs=True)
    y2, _, _ = kfn(x, w, b); print("  ln fwd wr=False err", rel(y2, yr), flush=True)
    bench("ln fwd bf16 16k x 4k", 2 * M * N * 2 + 2 * M * 4, [("kiln", lambda: kf(x, w, b)), ("kiln wr=True", lambda: kfn(x, w, b))],
          [("torch F.layer_norm", lambda: F.layer_norm(x, (N,), w, b, 1e-5))])
    lcands = []
    for parts in (128, 256):
      for wr in (True,):
        kb2 = K.layer_norm_bwd(N, parts, "bfloat16", weight_regs=wr)
        dx, dw, db = kb2(dy, x, w, mu, rs); torch.cuda.synchronize()
        print(f"  ln bwd parts={parts} wr={wr} err", rel(dx, xf.grad), rel(dw, wf.grad), rel(db, bf.grad), flush=True)
        lcands.append((f"kiln bwd parts={parts} wr={wr}", lambda kb2=kb2: kb2(dy, x, w, mu, rs)))
    xt = x.clone().requires_grad_(); wt = w.clone().requires_grad_(); bt = b.clone().requires_grad_()
    xk = x.clone().requires_grad_(); wk = w.clone().requires_grad_(); bk = b.clone().requires_grad_()
    bench("ln bwd bf16 16k x 4k", 3 * M * N * 2, lcands)
    bench("ln fwd+bwd bf16 16k x 4k", 5 * M * N * 2,
          [("kiln autograd", lambda: torch.autograd.grad(ops.layer_norm(xk, wk, bk), (xk, wk, bk), dy))],
          [("torch eager", lambda: torch.autograd.grad(F.layer_norm(xt, (N,), wt, bt, 1e-5), (xt, wt, bt), dy))])

# ---------------- softmax
if want("softmax"):
    for n in (4096, 32768):
        m = M if n == 4096 else 2048
        dt = torch.float16
        x = torch.randn(m, n, device=dev, dtype=dt) * 3; dy = torch.randn(m, n, device=dev, dtype=dt)
        kf = K.softmax_fwd(n, "float16"); y = kf(x)
        yr = torch.softmax(x.float(), -1)
        kb = K.softmax_bwd(n, "float16"); dx = kb(y, dy)
        dxr = yr * (dy.float() - (dy.float() * yr).sum(-1, keepdim=True))
        torch.cuda.synchronize()
        print(f"  softmax {n} err", rel(y, yr), "bwd", rel(dx, dxr), flush=True)
        bench(f"softmax fwd f16 {m} x {n}", 2 * m * n * 2, [("kiln", lambda: kf(x))], [("torch", lambda: torch.softmax(x, -1))])
        bench(f"softmax bwd f16 {m} x {n}", 3 * m * n * 2, [("kiln", lambda: kb(y, dy))],
              [("torch _softmax_backward_data", lambda: torch._softmax_backward_data(dy, y, -1, x.dtype))])

# ---------------- cross-entropy
if want("ce"):
    m, v = 4096, 128256
    dt = torch.bfloat16
    lg = torch.randn(m, v, device=dev, dtype=dt) * 2
    tg = torch.randint(0, v, (m,), device=dev); tg[::7] = -100
    kf = K.cross_entropy_fwd(v, -100, "bfloat16", "int64")
    loss, lse = kf(lg, tg)
    lf = lg.float().requires_grad_()
    lr = F.cross_entropy(lf, tg, reduction="none")
    print("  ce fwd err", rel(loss, lr), "lse", rel(lse, torch.logsumexp(lg.float(), -1)), flush=True)
    g = torch.randn(m, device=dev)
    kb = K.cross_entropy_bwd(v, -100, "bfloat16", "int64")
    dx = kb(lg, tg, lse, g)
    (dxr,) = torch.autograd.grad(lr, lf, g)
    torch.cuda.synchronize()
    print("  ce bwd err", rel(dx, dxr), flush=True)
    kf8 = K.cross_entropy_fwd(v, -100, "bfloat16", "int64", threads=128, block_V=4096)
    kf5 = K.cross_entropy_fwd(v, -100, "bfloat16", "int64", threads=512, block_V=4096)
    kf1 = K.cross_entropy_fwd(v, -100, "bfloat16", "int64", threads=128, block_V=2048)
    for kk in (kf8, kf5, kf1):
        l2, s2 = kk(lg, tg); print("  ce variant err", rel(l2, lr), rel(s2, lse), flush=True)
    bench("ce fwd bf16 4096 x 128256", m * v * 2, [("kiln 256x16", lambda: kf(lg, tg)), ("kiln 128x32", lambda: kf8(lg, tg)), ("kiln 512x8", lambda: kf5(lg, tg)), ("kiln 128x16", lambda: kf1(lg, tg))],
          [("torch F.cross_entropy none", lambda: F.cross_entropy(lg, tg, reduction="none"))])
    bench("ce bwd bf16 4096 x 128256", 2 * m * v * 2, [("kiln", lambda: kb(lg, tg, lse, g))])
    lt = lg.clone().requires_grad_(); lk = lg.clone().requires_grad_()
    bench("ce fwd+bwd bf16 4096 x 128256", 3 * m * v * 2,
          [("kiln autograd", lambda: torch.autograd.grad(ops.cross_entropy(lk, tg), lk))],
          [("torch eager", lambda: torch.autograd.grad(F.cross_entropy(lt, tg), lt))])

print("\n".join(rows))
