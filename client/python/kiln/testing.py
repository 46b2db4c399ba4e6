"""``tilelang.testing`` for ported tests: seeding, pytest markers that skip
where the device is missing, closeness checks, and ``main()``.

The markers skip (with the reason) rather than fail: a test marked
``requires_cuda`` is skipped on a host without a CUDA device, where Kiln
runs kernels on the CPU target instead.
"""

from __future__ import annotations

import importlib
import inspect
import random
import sys
from typing import Any, Callable, Tuple

from kiln.utils.tensor import torch_assert_close

__all__ = ["main", "set_random_seed", "requires_cuda", "requires_package",
           "requires_llvm", "requires_cuda_compute_version",
           "requires_cuda_compute_version_eq",
           "requires_cuda_compute_version_ge",
           "requires_cuda_compute_version_gt",
           "requires_cuda_compute_version_le",
           "requires_cuda_compute_version_lt", "torch_assert_close"]


def main() -> None:
    """Runs pytest on the calling file (``if __name__ == "__main__":
    kiln.testing.main()``) and exits with its status."""
    import pytest
    caller = inspect.getsourcefile(sys._getframe(1))
    sys.exit(pytest.main([caller] + sys.argv[1:]))


def set_random_seed(seed: int = 42) -> None:
    """Seeds Python's, NumPy's and (when installed) torch's generators."""
    random.seed(seed)
    try:
        import numpy as np
        np.random.seed(seed)
    except ImportError:
        pass
    torch = _torch()
    if torch is not None:
        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)


def _torch() -> Any:
    try:
        import torch
        return torch
    except ImportError:
        return None


def _cuda_available() -> bool:
    torch = _torch()
    return torch is not None and torch.cuda.is_available()


def _skip_unless(ok: bool, reason: str) -> Callable[[Callable], Callable]:
    import pytest
    return pytest.mark.skipif(not ok, reason=reason)


def requires_cuda(func: Callable) -> Callable:
    """Skips the test where torch sees no CUDA device."""
    return _skip_unless(_cuda_available(), "needs a CUDA device")(func)


def requires_llvm(func: Callable) -> Callable:
    """Kiln's CPU target is built on LLVM and always present."""
    return func


def requires_package(*names: str) -> Callable[[Callable], Callable]:
    """Skips the test unless every named module imports."""
    missing = []
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return _skip_unless(not missing, f"needs {', '.join(missing)}")


def _compute_version() -> Tuple[int, int]:
    """The CUDA device's compute capability, (0, 0) without one."""
    if not _cuda_available():
        return (0, 0)
    return tuple(_torch().cuda.get_device_capability())  # type: ignore


_COMPARE = {"ge": lambda a, b: a >= b, "gt": lambda a, b: a > b,
            "le": lambda a, b: a <= b, "lt": lambda a, b: a < b,
            "eq": lambda a, b: a == b}


def requires_cuda_compute_version(major: int, minor: int = 0,
                                  mode: str = "ge") -> Callable:
    """Skips the test unless a CUDA device's compute capability compares
    to ``major.minor`` as ``mode`` says (ge, gt, le, lt, eq)."""
    if mode not in _COMPARE:
        raise ValueError(f"mode must be one of {sorted(_COMPARE)}; got "
                         f"{mode!r}")
    have = _compute_version()
    ok = _cuda_available() and _COMPARE[mode](have, (major, minor))
    return _skip_unless(ok, f"needs a CUDA device of compute capability "
                            f"{mode} {major}.{minor}")


def requires_cuda_compute_version_eq(major: int, minor: int = 0) -> Callable:
    return requires_cuda_compute_version(major, minor, "eq")


def requires_cuda_compute_version_ge(major: int, minor: int = 0) -> Callable:
    return requires_cuda_compute_version(major, minor, "ge")


def requires_cuda_compute_version_gt(major: int, minor: int = 0) -> Callable:
    return requires_cuda_compute_version(major, minor, "gt")


def requires_cuda_compute_version_le(major: int, minor: int = 0) -> Callable:
    return requires_cuda_compute_version(major, minor, "le")


def requires_cuda_compute_version_lt(major: int, minor: int = 0) -> Callable:
    return requires_cuda_compute_version(major, minor, "lt")
