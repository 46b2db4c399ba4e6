"""PyTorch tensors through kiln.jit and the C ABI (fake libkiln): device
pointers, dtypes, outputs allocated by torch, CUDA launches on torch's
current stream. Skipped, saying so, where torch is not installed."""

import pytest

import kiln
import kiln.language as T

import kernels

torch = pytest.importorskip("torch", reason="torch not installed")

cuda = pytest.mark.skipif(not torch.cuda.is_available(),
                          reason="torch has no CUDA device")


def test_cpu_tensors_run_on_the_cpu_target(fake_lib):
    kernel = kernels.scale_add()
    x = torch.arange(5, dtype=torch.float32)
    y = kernel(x, torch.zeros(4), 1.0)
    assert isinstance(y, torch.Tensor) and y.device.type == "cpu"
    assert f"data={x.data_ptr():x} rank=1 5:-1" in fake_lib()
    assert torch.equal(y, 2 * x)  # the fake's observable effect


def test_torch_dtype_error():
    kernel = kernels.scale_add()
    with pytest.raises(kiln.KilnArgumentError,
                       match="argument 'X' of main: expected dtype float32 "
                             r"\(f32\); got bfloat16"):
        kernel(torch.zeros(4, dtype=torch.bfloat16), torch.zeros(4), 1.0)


@cuda
def test_cuda_launch_uses_the_current_stream(fake_lib):
    kernel = kernels.matmul(T.symbolic("M"), T.symbolic("N"),
                            T.symbolic("K"), 64, 64, 32)
    a = torch.zeros(100, 40, dtype=torch.float16, device="cuda")
    b = torch.zeros(40, 70, dtype=torch.float16, device="cuda")
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        c = kernel(a, b)
    assert c.is_cuda and c.dtype == torch.float16 and c.shape == (100, 70)
    call = fake_lib()
    assert f"stream={stream.cuda_stream:x} " in call
    assert f"f16 data={a.data_ptr():x} rank=2 100:-1 40:-1" in call
    assert f"f16 data={c.data_ptr():x} rank=2 100:-1 70:-1" in call


@cuda
def test_cuda_compile_asks_for_the_auto_target(fake_lib):
    kernel = kernels.matmul(T.symbolic("M"), T.symbolic("N"),
                            T.symbolic("K"), 64, 64, 32)
    kernel.compile("auto")
    assert fake_lib() == "compile gemm auto gemm.tile"


@cuda
def test_mixed_devices_are_rejected():
    kernel = kernels.scale_add()
    with pytest.raises(kiln.KilnArgumentError,
                       match="tensors are on different devices: cpu, cuda:0"):
        kernel(torch.zeros(4, device="cuda"), torch.zeros(4), 1.0)
