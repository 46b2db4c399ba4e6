"""Layouts for ``T.annotate_layout`` (TileLang's tilelang.layout).

Shared tiles take the layouts the tile IR can state: ``swizzle(32|64|128)``,
``padded(n)`` and ``row_major``. A global tensor may take TileLang's index
map, ``T.Layout(shape, fn)``: Kiln keeps every tensor in its logical
layout, so the map is checked and then has no effect (see IndexMap).
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Optional, Sequence

from kiln.errors import KilnSourceError


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


class IndexMap:
    """``T.Layout(shape, fn)``: TileLang's map from a buffer's logical
    coordinates to physical ones.

    TileLang puts one on a global tensor to reorder where elements live
    (its backward attention lays out dQ to match the MMA fragment so its
    atomics vectorise, and un-permutes it in a second kernel carrying the
    same map). Kiln keeps tensors in their logical layout in every kernel,
    so such a pair computes the same result and the tensor holds plain
    row-major data; choosing how stores and atomics vectorise is the
    planner's job. On tiles an index map is refused (Kiln states shared
    layouts as swizzle, padding or row-major)."""

    def __init__(self, shape: Sequence[Any], forward_fn: Callable):
        if not callable(forward_fn):
            raise KilnSourceError("T.Layout(shape, fn): fn must be a "
                                  "function of one index per dimension")
        self.shape = tuple(shape)
        self.forward_fn = forward_fn
        try:
            params = inspect.signature(forward_fn).parameters.values()
            self.arity: Optional[int] = len(
                [p for p in params if p.kind in (p.POSITIONAL_ONLY,
                                                 p.POSITIONAL_OR_KEYWORD)])
        except (TypeError, ValueError):
            self.arity = None

    def __repr__(self) -> str:
        return f"IndexMap(shape={self.shape})"
