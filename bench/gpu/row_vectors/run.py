# Times the row-vector experiment's kernels (make.sh) on the GPU against a
# copy and torch.softmax: softmax f16, 16384 x 4096; GB/s of the bytes a
# softmax must move (read X, write Y). Each result is checked against torch.
import ctypes, torch, sys
cuda = ctypes.CDLL("libcuda.so.1")
torch.cuda.init(); torch.zeros(1, device="cuda")
def check(r):
    assert r == 0, r
M, N = 16384, 4096
x = torch.randn((M, N), dtype=torch.float16, device="cuda")
ref = torch.softmax(x.float(), -1).half()
moved = 2 * M * N * 2
def timeit(fn, iters=200):
    for _ in range(10): fn()
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(True), torch.cuda.Event(True)
    best = []
    for rep in range(5):
        s.record()
        for _ in range(iters): fn()
        e.record(); torch.cuda.synchronize()
        best.append(s.elapsed_time(e) / iters)
    best.sort(); return best[len(best)//2]
rows = []
y0 = torch.empty_like(x)
t_copy = timeit(lambda: y0.copy_(x)); rows.append(("copy", t_copy, True))
t_torch = timeit(lambda: torch.softmax(x, -1)); rows.append(("torch.softmax", t_torch, True))
# A1 / A2: Kiln's kernel with and without a minimum of blocks per SM (its
# row vectors in shared memory: 1408 bytes); B, B2, C: row vectors in
# registers.
for name, smem in [("A1", 1408), ("A2", 1408), ("B", 0), ("B2", 0), ("C", 0)]:
    data = open(name + ".cubin", "rb").read()
    mod = ctypes.c_void_p(); check(cuda.cuModuleLoadData(ctypes.byref(mod), data))
    fn = ctypes.c_void_p(); check(cuda.cuModuleGetFunction(ctypes.byref(fn), mod, b"kiln_main"))
    y = torch.empty_like(x)
    px, py = ctypes.c_uint64(x.data_ptr()), ctypes.c_uint64(y.data_ptr())
    pm, pn = ctypes.c_int64(M), ctypes.c_int64(N)
    params = (ctypes.c_void_p * 4)(*[ctypes.cast(ctypes.byref(v), ctypes.c_void_p) for v in (px, py, pm, pn)])
    cu_stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
    def launch():
        check(cuda.cuLaunchKernel(fn, (M + 3) // 4, 1, 1, 128, 1, 1, smem,
                                  cu_stream, params, None))
    launch(); torch.cuda.synchronize()
    ok = torch.allclose(y.float(), ref.float(), atol=2e-3, rtol=1e-2)
    rows.append((name, timeit(launch), ok))
print(f"{'kernel':16s} {'ms':>8s} {'GB/s':>8s} {'x copy':>7s} {'x torch':>8s} ok")
for name, t, ok in rows:
    print(f"{name:16s} {t:8.4f} {moved/t/1e6:8.0f} {t_copy/t:7.2f} {t_torch/t:8.2f} {ok}")
