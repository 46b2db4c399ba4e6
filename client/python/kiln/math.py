"""Host-side integer helpers TileLang kernels use while building a kernel
(``tilelang.math.next_power_of_2``, ``tilelang.cdiv``)."""

from __future__ import annotations

from typing import Any

from kiln.errors import KilnSourceError


def _int(name: str, x: Any) -> int:
    if isinstance(x, bool) or not isinstance(x, int):
        raise KilnSourceError(
            f"{name} takes Python integers (kernel values: T.ceildiv)")
    return x


def cdiv(a: Any, b: Any) -> Any:
    """``ceil(a / b)`` of integers; of kernel values, ``T.ceildiv``."""
    if isinstance(a, int) and isinstance(b, int):
        if b == 0:
            raise KilnSourceError("cdiv: division by zero")
        return -(-a // b)
    from kiln import language as T  # (a kernel value: build the expression)
    return T.ceildiv(a, b)


def next_power_of_2(x: Any) -> int:
    """The smallest power of two >= x (1 for x <= 1)."""
    x = _int("next_power_of_2", x)
    return 1 if x <= 1 else 1 << (x - 1).bit_length()


def prev_power_of_2(x: Any) -> int:
    """The largest power of two <= x (x >= 1)."""
    x = _int("prev_power_of_2", x)
    if x < 1:
        raise KilnSourceError("prev_power_of_2 needs x >= 1")
    return 1 << (x.bit_length() - 1)
