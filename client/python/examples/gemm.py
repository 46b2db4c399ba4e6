"""A TileLang GEMM, ported to Kiln by changing only the imports.

The original imports were:

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

    @T.prim_func
    def gemm(
            A: T.Tensor((M, K), dtype),
            B: T.Tensor((K, N), dtype),
            C: T.Tensor((M, N), dtype),
    ):
        with T.Kernel(T.ceildiv(N, block_N), T.ceildiv(M, block_M),
                      threads=128) as (bx, by):
            A_shared = T.alloc_shared((block_M, block_K), dtype)
            B_shared = T.alloc_shared((block_K, block_N), dtype)
            C_local = T.alloc_fragment((block_M, block_N), accum_dtype)

            # Rasterise blocks in panels so neighbours share B in L2.
            T.use_swizzle(panel_size=10)
            T.clear(C_local)
            for k in T.Pipelined(T.ceildiv(K, block_K), num_stages=3):
                T.copy(A[by * block_M, k * block_K], A_shared)
                T.copy(B[k * block_K, bx * block_N], B_shared)
                T.gemm(A_shared, B_shared, C_local)
            # A fused ReLU epilogue on the accumulator.
            for i, j in T.Parallel(block_M, block_N):
                C_local[i, j] = T.max(C_local[i, j], 0)
            T.copy(C_local, C[by * block_M, bx * block_N])

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
        a = torch.randn(M, K, device="cuda", dtype=torch.float16)
        b = torch.randn(K, N, device="cuda", dtype=torch.float16)
        c = kernel(a, b)
        ref = torch.relu(a @ b)
        torch.testing.assert_close(c, ref, rtol=1e-2, atol=1e-2)
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
