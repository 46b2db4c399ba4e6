"""Shared-tile layouts for ``T.annotate_layout`` (TileLang's tilelang.layout).

Only the layouts the tile IR can state are offered: ``swizzle(32|64|128)``,
``padded(n)`` and ``row_major``; they apply to shared tiles.
"""

from __future__ import annotations

from typing import Any, Optional


class Layout:
    """A layout to pin on a shared tile: kind and its parameter."""

    def __init__(self, kind: str, value: Optional[int] = None,
                 buffer: Any = None):
        self.kind = kind
        self.value = value
        self.buffer = buffer

    def __repr__(self) -> str:
        return f"Layout({self.kind}, {self.value})"


def make_swizzled_layout(buffer: Any,
                         bytes: Optional[int] = None,  # noqa: A002
                         **_hints: Any) -> Layout:
    """A swizzled layout; ``bytes`` (32, 64, 128) defaults to the widest
    that divides the tile's row, as TileLang chooses."""
    if bytes is not None and bytes not in (32, 64, 128):
        raise ValueError(f"swizzle bytes must be 32, 64 or 128; got {bytes}")
    return Layout("swizzle", bytes, buffer)


def make_padded_layout(buffer: Any, pad: int) -> Layout:
    """Rows padded by ``pad`` elements (avoids bank conflicts)."""
    return Layout("padded", pad, buffer)


def make_row_major_layout(buffer: Any) -> Layout:
    """Plain row-major."""
    return Layout("row_major", None, buffer)
