"""The host side of a TileLang example's ``main()``: inputs made from the
kernel's signature, a check against a reference program, and timing.

    profiler = kernel.get_profiler(
        tensor_supply_type=kiln.TensorSupplyType.Normal)
    profiler.assert_allclose(reference, rtol=1e-2, atol=1e-2)
    ms = profiler.do_bench(warmup=25, rep=100)           # the kernel
    ref_ms = profiler.do_bench(reference, warmup=25)     # the reference

Inputs are torch CUDA tensors when torch sees a GPU, torch CPU tensors when
torch is installed without one, NumPy arrays otherwise (the last two run on
the CPU target). ``kiln.profiler.do_bench(fn, warmup=, rep=)`` times any
callable.
"""

from __future__ import annotations

import enum
import time
from typing import Any, Callable, List, Optional, Sequence

from kiln.errors import KilnArgumentError

# Tile-IR dtype -> the host library's name (torch and NumPy agree).
_HOST = {
    "f16": "float16", "bf16": "bfloat16", "f32": "float32",
    "f64": "float64", "i8": "int8", "u8": "uint8", "i16": "int16",
    "i32": "int32", "i64": "int64", "u32": "uint32", "bool": "bool",
    "f8e4m3": "float8_e4m3fn", "f8e5m2": "float8_e5m2",
}


class TensorSupplyType(enum.Enum):
    """How the profiler fills the kernel's inputs (TileLang's names)."""
    Integer = 1   # small integers in [-2, 2] (0 and 1 for bool)
    Uniform = 2   # uniform in [-1, 1)
    Normal = 3    # standard normal
    Randn = 4     # the same as Normal
    Zero = 5
    One = 6
    Auto = 7      # Normal for floats, Integer otherwise


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


class _Host:
    """Makes, converts and times host arrays: torch (CUDA, else CPU) or
    NumPy."""

    def __init__(self) -> None:
        self.torch = _torch()
        self.cuda = self.torch is not None and self.torch.cuda.is_available()
        if self.torch is None:
            import numpy as np
            self.np = np
            self.rng = np.random.default_rng(0)
        else:
            self.np = None
            self.gen = self.torch.Generator(
                device="cuda" if self.cuda else "cpu").manual_seed(0)

    def make(self, shape: Sequence[int], dtype: str,
             supply: TensorSupplyType) -> Any:
        host = _HOST.get(dtype)
        if host is None:
            raise KilnArgumentError(
                f"the profiler cannot make {dtype} inputs: pass "
                "input_tensors")
        is_float = dtype.startswith("f") or dtype == "bf16"
        if supply == TensorSupplyType.Auto:
            supply = TensorSupplyType.Normal if is_float else \
                TensorSupplyType.Integer
        if self.torch is not None:
            return self._make_torch(tuple(shape), host, dtype, is_float,
                                    supply)
        return self._make_numpy(tuple(shape), host, dtype, is_float, supply)

    def _make_torch(self, shape, host, dtype, is_float, supply):
        t = self.torch
        dev = "cuda" if self.cuda else "cpu"
        if supply == TensorSupplyType.Zero:
            x = t.zeros(shape, device=dev)
        elif supply == TensorSupplyType.One:
            x = t.ones(shape, device=dev)
        elif supply == TensorSupplyType.Uniform:
            x = t.rand(shape, device=dev, generator=self.gen) * 2 - 1
        elif supply == TensorSupplyType.Integer or not is_float:
            lo, hi = (0, 2) if dtype == "bool" else (-2, 3)
            if dtype.startswith("u"):
                lo = 0
            x = t.randint(lo, hi, shape, device=dev, generator=self.gen)
        else:
            x = t.randn(shape, device=dev, generator=self.gen)
        return x.to(getattr(t, host))

    def _make_numpy(self, shape, host, dtype, is_float, supply):
        np = self.np
        if host in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
            raise KilnArgumentError(
                f"NumPy has no {host}: install torch, or pass input_tensors")
        if supply == TensorSupplyType.Zero:
            x = np.zeros(shape)
        elif supply == TensorSupplyType.One:
            x = np.ones(shape)
        elif supply == TensorSupplyType.Uniform:
            x = self.rng.uniform(-1, 1, shape)
        elif supply == TensorSupplyType.Integer or not is_float:
            lo, hi = (0, 2) if dtype == "bool" else (-2, 3)
            if dtype.startswith("u"):
                lo = 0
            x = self.rng.integers(lo, hi, shape)
        else:
            x = self.rng.standard_normal(shape)
        return x.astype(host)

    def to_float64(self, x: Any) -> Any:
        """A NumPy float64 copy of a tensor or array (or number)."""
        t = self.torch
        if t is not None and isinstance(x, t.Tensor):
            return x.detach().to("cpu", t.float64).numpy()
        import numpy as np
        return np.asarray(x, dtype=np.float64)

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize()

    def clock(self) -> Callable[[], float]:
        """A function returning milliseconds, after the device is idle."""
        def now() -> float:
            self.sync()
            return time.perf_counter() * 1e3
        return now


def do_bench(fn: Callable[[], Any], warmup: float = 25, rep: float = 100,
             n_warmup: int = 0, n_repeat: int = 0,
             return_mode: str = "mean", quantiles: Any = None,
             **_options: Any) -> Any:
    """Milliseconds per call of ``fn``: warmed up for ``warmup`` ms (or
    ``n_warmup`` calls), then run for about ``rep`` ms (or ``n_repeat``
    calls), each call timed; ``return_mode`` "mean", "median", "min" or
    "max", or the ``quantiles`` asked for. CUDA calls are timed with CUDA
    events on the current stream."""
    host = _Host()
    now = host.clock()
    t0 = now()
    fn()
    first = max(now() - t0, 1e-3)
    warm_calls = n_warmup or max(1, int(warmup / first))
    calls = n_repeat or max(1, int(rep / first))
    for _ in range(warm_calls):
        fn()
    times: List[float] = []
    if host.cuda:
        torch = host.torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(calls)]
        for s, e in zip(starts, ends):
            s.record()
            fn()
            e.record()
        torch.cuda.synchronize()
        times = [s.elapsed_time(e) for s, e in zip(starts, ends)]
    else:
        for _ in range(calls):
            t = time.perf_counter()
            fn()
            times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    if quantiles is not None:
        return [times[min(len(times) - 1, int(q * len(times)))]
                for q in quantiles]
    if return_mode == "median":
        return times[len(times) // 2]
    if return_mode == "min":
        return times[0]
    if return_mode == "max":
        return times[-1]
    if return_mode != "mean":
        raise KilnArgumentError(f"do_bench: unknown return_mode "
                                f"{return_mode!r}")
    return sum(times) / len(times)


def assert_close(got: Any, want: Any, atol: float, rtol: float,
                 max_mismatched_ratio: float, what: str = "tensor") -> None:
    """Raises AssertionError when more than ``max_mismatched_ratio`` of the
    elements of ``got`` (an array or tensor) differ from ``want`` by more
    than ``atol + rtol * |want|`` (a NaN where ``want`` has none counts as a
    mismatch), or when the shapes differ."""
    import numpy as np
    host = _Host()
    a, b = host.to_float64(got), host.to_float64(want)
    if a.shape != b.shape:
        raise AssertionError(f"{what}: shape {a.shape}, reference {b.shape}")
    bad = ~np.isclose(a, b, atol=atol, rtol=rtol, equal_nan=True)
    ratio = float(bad.mean()) if bad.size else 0.0
    if ratio > max_mismatched_ratio:
        where = np.argwhere(bad)[0].tolist()
        raise AssertionError(
            f"{what}: {bad.sum()} of {bad.size} elements ({ratio:.2%}) "
            f"differ by more than atol={atol} + rtol={rtol} * |ref| "
            f"(allowed {max_mismatched_ratio:.2%}); first at {where}: "
            f"{a[tuple(where)]} against {b[tuple(where)]}")


class Profiler:
    """Inputs for one kernel, its check against a reference, its timing."""

    def __init__(self, kernel: Any,
                 tensor_supply_type: TensorSupplyType =
                 TensorSupplyType.Auto) -> None:
        if not isinstance(tensor_supply_type, TensorSupplyType):
            raise KilnArgumentError(
                "tensor_supply_type must be a kiln.TensorSupplyType; got "
                f"{tensor_supply_type!r}")
        self.kernel = kernel
        self.supply = tensor_supply_type
        self._host = _Host()
        self._inputs: Optional[List[Any]] = None

    def _make_inputs(self) -> List[Any]:
        k = self.kernel
        out: List[Any] = []
        for i, p in enumerate(k.params):
            if i in k.out_idx:
                continue
            if not p.is_tensor:
                raise KilnArgumentError(
                    f"{k.name}: the profiler cannot choose scalar parameter "
                    f"'{p.name}'; pass input_tensors")
            dims = [d for d in p.shape if not isinstance(d, int)]
            if dims:
                raise KilnArgumentError(
                    f"{k.name}: parameter '{p.name}' has symbolic dims "
                    f"{dims}; the profiler needs constant shapes (or pass "
                    "input_tensors)")
            out.append(self._host.make(p.shape, p.dtype, self.supply))
        return out

    def inputs(self) -> List[Any]:
        """The inputs (made once, reused by every check and timing)."""
        if self._inputs is None:
            self._inputs = self._make_inputs()
        return self._inputs

    def _run(self, fn: Callable, ins: Sequence[Any]) -> List[Any]:
        out = fn(*ins)
        if out is None:
            return []
        return list(out) if isinstance(out, (list, tuple)) else [out]

    def assert_allclose(self, reference_program: Callable,
                        input_tensors: Optional[Sequence[Any]] = None,
                        atol: float = 1e-2, rtol: float = 1e-2,
                        max_mismatched_ratio: float = 0.01) -> None:
        """Runs the kernel and ``reference_program`` on the same inputs and
        raises AssertionError when more than ``max_mismatched_ratio`` of
        any output's elements differ by more than ``atol + rtol * |ref|``
        (a NaN where the reference has none counts as a mismatch)."""
        ins = list(input_tensors) if input_tensors is not None \
            else self.inputs()
        got = self._run(self.kernel, ins)
        want = self._run(reference_program, ins)
        if len(got) != len(want):
            raise AssertionError(
                f"{self.kernel.name} returns {len(got)} outputs, the "
                f"reference {len(want)}")
        for n, (g, w) in enumerate(zip(got, want)):
            assert_close(g, w, atol, rtol, max_mismatched_ratio,
                         f"output {n} of {self.kernel.name}")

    @property
    def func(self) -> Any:
        """The kernel the profiler runs (TileLang's ``profiler.func``)."""
        return self.kernel

    def do_bench(self, func: Optional[Callable] = None, warmup: float = 25,
                 rep: float = 100, n_warmup: int = 0, n_repeat: int = 0,
                 input_tensors: Optional[Sequence[Any]] = None,
                 **options: Any) -> Any:
        """Milliseconds per call of ``func`` (default: the kernel) on the
        profiler's inputs."""
        ins = list(input_tensors) if input_tensors is not None \
            else self.inputs()
        fn = func if func is not None else self.kernel
        return do_bench(lambda: fn(*ins), warmup=warmup, rep=rep,
                        n_warmup=n_warmup, n_repeat=n_repeat, **options)

