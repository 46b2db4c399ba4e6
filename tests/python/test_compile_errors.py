"""A kernel the DSL accepts but the compiler rejects: the error repeats each
diagnostic at the Python line that made the IR line (real compilers)."""

import inspect

import pytest

import kiln
import kiln.language as T


def test_verifier_error_points_at_the_python_line(backend):
    @T.prim_func
    def bad(A: T.Tensor((64, 32), "float16"),
            C: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((64, 32), "float16")
            c = T.alloc_fragment((64, 64), "float32")
            T.copy(A, a)
            T.gemm(a, a, c)  # [64, 32] x [64, 32]: K does not match
            T.copy(c, C)

    gemm_line = inspect.currentframe().f_lineno - 3
    with pytest.raises(kiln.KilnCompileError) as info:
        kiln.compile(bad).compile("cpu")
    msg = str(info.value)
    assert "bad.tile:6:" in msg
    assert f"{__file__}:{gemm_line}: error: gemm operand 'a'" in msg
    assert info.value.code == 3
