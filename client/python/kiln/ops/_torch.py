"""What the autograd wrappers of kiln.ops share: torch imported on first
use, dtype names for the kernel factories, contiguous inputs."""

from __future__ import annotations

from typing import Any, Tuple

from kiln.errors import KilnArgumentError

_DTYPES = {"float16": "float16", "bfloat16": "bfloat16",
           "float32": "float32", "float64": "float64"}


def torch() -> Any:
    import torch as _t  # the real package
    return _t


def dtype_name(t: Any, where: str) -> str:
    """The DSL dtype of a floating-point tensor; others are refused."""
    name = str(t.dtype).replace("torch.", "")
    if name not in _DTYPES:
        raise KilnArgumentError(f"{where}: {name} tensors are not supported "
                                "(float16, bfloat16, float32, float64)")
    return _DTYPES[name]


def contiguous(*ts: Any) -> Tuple[Any, ...]:
    """Kiln's kernels take densely strided tensors: copies only those that
    are not."""
    return tuple(t if t.is_contiguous() else t.contiguous() for t in ts)


def same_device(where: str, *ts: Any) -> None:
    devices = {str(t.device) for t in ts}
    if len(devices) > 1:
        raise KilnArgumentError(f"{where}: tensors are on several devices "
                                f"({', '.join(sorted(devices))})")
