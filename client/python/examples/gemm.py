"""A float16 GEMM with a ReLU epilogue, in TileLang's dialect.

Only the imports say Kiln, each under the name TileLang's would take; with
TileLang they read:

    import tilelang
    import tilelang.language as T

Run: python3 examples/gemm.py  (needs libkiln: KILN_LIBRARY=.../libkiln.so;
NumPy arrays run on the CPU target, torch CUDA tensors on the GPU.)
"""

import kiln as tilelang
import kiln.language as T


@tilelang.jit(out_idx=[-1])
def matmul(M, N, K, block_M, block_N, block_K, dtype="float16",
           accum_dtype="float"):
    """C = relu(A @ B) for A: [M, K], B: [K, N]. Every block owns one
    block_M x block_N tile of C and walks K block_K at a time through a
    three-stage pipeline, accumulating in accum_dtype."""
    a_panel, b_panel = (block_M, block_K), (block_K, block_N)
    c_tile = (block_M, block_N)

    @T.prim_func
    def gemm(
            A: T.Tensor((M, K), dtype),
            B: T.Tensor((K, N), dtype),
            C: T.Tensor((M, N), dtype),
    ):
        # x walks the columns of C, y its rows.
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=128) as (x, y):
            a_s = T.alloc_shared(a_panel, dtype)
            b_s = T.alloc_shared(b_panel, dtype)
            acc = T.alloc_fragment(c_tile, accum_dtype)

            # Blocks launch in panels of 10 so neighbours reuse B from L2.
            T.use_swizzle(panel_size=10)
            T.clear(acc)
            for kk in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[y * block_M, kk * block_K], a_s)
                T.copy(B[kk * block_K, x * block_N], b_s)
                T.gemm(a_s, b_s, acc)
            # ReLU on the accumulator before it leaves the registers.
            for r, c in T.Parallel(*c_tile):
                acc[r, c] = T.max(acc[r, c], 0)
            T.copy(acc, C[y * block_M, x * block_N])

    return gemm


def main(M=1000, N=777, K=512):
    kernel = matmul(M, N, K, 128, 128, 32)
    print(kernel.ir)
    try:
        import torch
        cuda = torch.cuda.is_available()
    except ImportError:
        cuda = False
    if cuda:
        a, b = (torch.randn(rows, cols, dtype=torch.float16, device="cuda")
                for rows, cols in ((M, K), (K, N)))
        torch.testing.assert_close(kernel(a, b), torch.relu(a @ b),
                                   atol=1e-2, rtol=1e-2)
    else:
        import numpy as np
        rng = np.random.default_rng()
        a = rng.standard_normal((M, K)).astype(np.float16)
        b = rng.standard_normal((K, N)).astype(np.float16)
        c = kernel(a, b)
        ref = np.maximum(a.astype(np.float32) @ b.astype(np.float32), 0)
        np.testing.assert_allclose(c.astype(np.float32), ref, rtol=1e-2,
                                   atol=0.5)
    print("gemm matches the reference")


if __name__ == "__main__":
    main()
