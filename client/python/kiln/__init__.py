"""Kiln: a TileLang-style kernel DSL and client for the Kiln compiler.

    import kiln
    import kiln.language as T

    @kiln.jit(out_idx=[-1])      # C, the last parameter, is made and returned
    def matmul(M, N, K, bm, bn, bk, dtype="float16"):
        @T.prim_func
        def gemm(A: T.Tensor((M, K), dtype), ...):
            with T.Kernel(T.ceildiv(N, bn), T.ceildiv(M, bm),
                          threads=128) as (x, y):
                ...
        return gemm

    kernel = matmul(4096, 4096, 4096, bm=128, bn=128, bk=64)
    print(kernel.ir)          # the tile IR
    c = kernel(a, b)          # NumPy: CPU target; torch CUDA: current stream
"""

from kiln import language, math, profiler
from kiln._client import connect, embedded
from kiln._dsl.dtypes import DType as DataType  # tilelang.DataType
from kiln.autotuner import AutoTuner, autotune, set_autotune_inputs
from kiln.errors import (KilnArgumentError, KilnCompileError, KilnError,
                         KilnLibraryError, KilnSourceError, KilnStatusError)
from kiln.jit import JITKernel, compile, compile_ir, jit
from kiln.profiler import TensorSupplyType

__version__ = "0.1.0"

cdiv = math.cdiv
next_power_of_2 = math.next_power_of_2


class _PassConfigKeys:
    """TileLang's ``PassConfigKey`` names, accepted so ports run unchanged;
    Kiln ignores pass configs."""

    def __getattr__(self, name: str) -> str:
        if name.startswith("TL_") or name.startswith("TIR_"):
            return name
        raise AttributeError(name)


PassConfigKey = _PassConfigKeys()

__all__ = ["DataType", "JITKernel", "KilnArgumentError", "KilnCompileError",
           "KilnError",
           "KilnLibraryError", "KilnSourceError", "KilnStatusError",
           "AutoTuner", "PassConfigKey", "__version__", "autotune", "compile",
           "compile_ir",
           "connect", "set_autotune_inputs",
           "embedded", "jit", "language"]
