"""kiln.torch: compiled kernels as torch.library operators, on the CPU
target with real compiles (Debian's python3-torch in CI; the GPU side,
torch.compile and CUDA graphs, is tests/gpu/test_python_gpu.py)."""

import pytest

import kiln
import kiln.language as T

torch = pytest.importorskip("torch", reason="torch not installed")
import kiln.torch as ktorch  # noqa: E402  (needs torch)


def shift_rows(block=16):
    """Y = X + s, rows masked: one output from out_idx."""
    M = T.symbolic("M")

    @T.prim_func
    def shift(X: T.Tensor((M, 32), "float32"),
              Y: T.Tensor((M, 32), "float32"), s: T.float32):
        with T.Kernel(T.ceildiv(M, block), threads=32) as bx:
            for i, j in T.Parallel(block, 32):
                if bx * block + i < M:
                    Y[bx * block + i, j] = X[bx * block + i, j] + s
    return shift


def scatter_rows():
    """Cache[slot[i], :] = X[i, :] for slot >= 0, in place; and the row sums
    of X as an output."""
    N = T.symbolic("N")
    R = T.symbolic("R")

    @T.prim_func
    def scatter(X: T.Tensor((N, 16), "float32"), Slot: T.Tensor((N,), "int32"),
                Cache: T.Tensor((R, 16), "float32"),
                Sums: T.Tensor((N,), "float32")):
        with T.Kernel(N, threads=16) as bx:
            x = T.alloc_fragment((16,), "float32")
            total = T.alloc_fragment((1,), "float32")
            T.copy(X[bx, 0:16], x)
            s = Slot[bx]
            for j in T.Parallel(16):
                if s >= 0 and s < R:
                    Cache[s, j] = x[j]
            T.reduce_sum(x, total, dim=0)
            T.copy(total, Sums[bx:bx + 1])
    return scatter


def test_an_op_launches_the_kernel_and_says_its_schema(libkiln_embedded):
    op = ktorch.op(kiln.compile(shift_rows(), out_idx=[1]), name="shift_a")
    assert op.schema == "shift_a(Tensor X, float s) -> Tensor"
    assert op.mutated == []
    x = torch.randn(37, 32)
    y = op(x, 2.5)
    assert y.shape == (37, 32) and y.dtype == torch.float32
    assert torch.allclose(y, x + 2.5)
    # The same through torch's registry.
    assert torch.allclose(torch.ops.kiln.shift_a(x, -1.0), x - 1.0)


def test_inputs_the_kernel_writes_are_mutated(libkiln_embedded):
    kernel = kiln.compile(scatter_rows(), out_idx=[3])
    op = ktorch.op(kernel, name="scatter_a")
    # From the launch metadata's `writes` record (Sums, also written, is
    # the output).
    assert op.mutated == ["Cache"]
    assert op.schema == ("scatter_a(Tensor X, Tensor Slot, Tensor(a!) Cache)"
                         " -> Tensor")
    x = torch.randn(5, 16)
    slot = torch.tensor([3, -1, 0, 7, 1], dtype=torch.int32)
    cache = torch.zeros(6, 16)
    sums = op(x, slot, cache)
    want = torch.zeros(6, 16)
    for i, s in enumerate(slot.tolist()):
        if 0 <= s < 6:
            want[s] = x[i]
    assert torch.equal(cache, want)
    assert torch.allclose(sums, x.sum(1), atol=1e-5)
    meta = kernel.compile("cpu").metadata
    assert "\nwrites Cache Sums\n" in meta


def test_the_fake_builds_outputs_and_checks_inputs(libkiln_embedded):
    op = ktorch.op(kiln.compile(shift_rows(), out_idx=[1]), name="shift_b")
    y = op(torch.empty(1000, 32, device="meta"), 1.0)
    assert y.device.type == "meta" and y.shape == (1000, 32)
    assert y.dtype == torch.float32
    with pytest.raises(kiln.KilnArgumentError,
                       match=r"argument 'X' of shift: expected dtype float32 "
                             r"\(f32\); got float16"):
        op(torch.empty(8, 32, dtype=torch.float16, device="meta"), 1.0)
    with pytest.raises(kiln.KilnArgumentError,
                       match=r"argument 'X' of shift: dim 1 must be 32"):
        op(torch.empty(8, 31, device="meta"), 1.0)
    # Under the fake-tensor mode torch.compile traces with.
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        fake = mode.from_tensor(torch.empty(12, 32))
        out = op(fake, 0.5)
        assert out.shape == (12, 32)


def test_names_and_registering_again(libkiln_embedded):
    kernel = kiln.compile(shift_rows(), out_idx=[1])
    first = ktorch.op(kernel, name="shift_c")
    assert ktorch.op(kernel, name="shift_c") is first
    # The same program compiled again is the same operator.
    assert ktorch.op(kiln.compile(shift_rows(), out_idx=[1]),
                     name="shift_c") is first
    assert ktorch.registered()["shift_c"] is first
    with pytest.raises(kiln.KilnArgumentError,
                       match="kiln::shift_c is already registered for "
                             "another kernel"):
        ktorch.op(kiln.compile(shift_rows(block=8), out_idx=[1]),
                  name="shift_c")
    with pytest.raises(kiln.KilnArgumentError,
                       match="'2x' is not a valid operator name"):
        ktorch.op(kernel, name="2x")
    with pytest.raises(kiln.KilnArgumentError,
                       match="takes a compiled kernel"):
        ktorch.op(shift_rows(), name="shift_d")
