"""kiln.compile_ir: tile-IR text compiled and launched from Python (the
language-neutral IR without the DSL), on the CPU target through libkiln."""

import os

import numpy as np
import pytest

import kiln

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))

SAXPY = """\
kernel saxpy(X: f32[N], Y: f32[N], Out: f32[N], a: f32)
  tune B in [64, 256]
  grid(ceildiv(N, B)) threads(64) (bx) {
  alloc fragment x: f32[B]
  alloc fragment y: f32[B]
  copy X[bx * B:+B] -> x
  copy Y[bx * B:+B] -> y
  parallel (i) in (B) {
    y[i] = a * x[i] + y[i]
  }
  copy y -> Out[bx * B:+B]
}
"""


def test_compile_ir_launches_with_checked_arguments(libkiln_embedded):
    k = kiln.compile_ir(SAXPY, target="cpu", bindings={"B": 64},
                        out_idx=[2])
    assert k.name == "saxpy"
    assert [p.name for p in k.params] == ["X", "Y", "Out", "a"]
    assert k.params[0].shape == ("N",) and k.params[3].dtype == "f32"
    x = np.arange(300, dtype=np.float32)
    y = np.ones(300, dtype=np.float32)
    out = k(x, y, 2.0)
    np.testing.assert_allclose(out, 2 * x + 1)
    with pytest.raises(kiln.KilnArgumentError,
                       match=r"argument 'Y' of saxpy: dim 0 is N = 5, but "
                             r"argument 'X' has N = 300"):
        k(x, np.ones(5, dtype=np.float32), 1.0)
    # Outputs passed in (out_idx=None): the kernel writes them.
    k2 = kiln.compile_ir(SAXPY, target="cpu", bindings={"B": 256})
    out2 = np.zeros(300, dtype=np.float32)
    k2(x, y, out2, -1.0)
    np.testing.assert_allclose(out2, 1 - x)


def test_compile_ir_picks_a_kernel_and_keeps_strides(libkiln_embedded):
    # A corpus file with several kernels, one chosen by name, whose input
    # has strides: a column-major view is accepted.
    path = os.path.join(ROOT, "tests", "compiler", "corpus",
                        "elementwise_broadcast.tile")
    with open(path) as f:
        text = f.read()
    k = kiln.compile_ir(text, kernel="elementwise_broadcast", target="cpu",
                        bindings={"BM": 32, "BN": 64},
                        filename="elementwise_broadcast.tile")
    assert k.params[0].strides is not None and k.params[1].strides is None
    m, n = 45, 70
    x = np.asfortranarray(np.random.rand(m, n).astype(np.float16))
    col, row = np.random.rand(n).astype(np.float32), \
        np.random.rand(m).astype(np.float32)
    r = np.random.rand(m, n).astype(np.float16)
    y = np.zeros((m, n), dtype=np.float16)
    k(x, col, row, r, y, 1.5, 0)  # act 0: ReLU
    want = 1.5 * np.maximum(x.astype(np.float32) * col + row[:, None], 0) + r
    np.testing.assert_allclose(y.astype(np.float32), want, rtol=2e-2,
                               atol=2e-2)


def test_compile_ir_errors_name_the_file_line_and_column(libkiln_embedded):
    with pytest.raises(kiln.KilnCompileError, match=r"saxpy\.tile:\d+:\d+: "):
        kiln.compile_ir(SAXPY.replace("a * x[i]", "a * z[i]"), target="cpu",
                        bindings={"B": 64}, filename="saxpy.tile")
    with pytest.raises(kiln.KilnCompileError,
                       match=r"tunable 'B' of kernel 'saxpy' has no value"):
        kiln.compile_ir(SAXPY, target="cpu")


class Foreign:
    """An array of another library: only the DLPack protocol."""

    def __init__(self, array):
        self.array = array

    def __dlpack__(self, stream=None):
        return self.array.__dlpack__()

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()


def test_dlpack_tensors_are_viewed_without_a_copy(libkiln_embedded):
    k = kiln.compile_ir(SAXPY, target="cpu", bindings={"B": 64})
    x = np.arange(100, dtype=np.float32)
    y = np.full(100, 3, dtype=np.float32)
    out = np.zeros(100, dtype=np.float32)
    k(Foreign(x), Foreign(y), Foreign(out), 0.5)
    # Written in place through the DLPack view: the owner's memory.
    np.testing.assert_allclose(out, 0.5 * x + 3)
    # out_idx outputs come back as arrays that export DLPack themselves.
    k2 = kiln.compile_ir(SAXPY, target="cpu", bindings={"B": 64},
                         out_idx=[2])
    made = k2(Foreign(x), Foreign(y), 2.0)
    assert hasattr(made, "__dlpack__")
    np.testing.assert_allclose(np.from_dlpack(made), 2 * x + 3)
    with pytest.raises(kiln.KilnArgumentError,
                       match="argument 'X' of saxpy: expected a NumPy array, "
                             "a torch tensor or a DLPack tensor; got list"):
        k2([1.0] * 100, Foreign(y), 2.0)
