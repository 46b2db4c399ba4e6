"""``tvm.tirx`` (``tvm.tir``): the TVM expression names TileLang kernels
and their dequantisation helpers call, mapped onto kiln.language.

A helper such as ``_tir_u8_to_f4_to_bf16(nbit, val: tirx.PrimExpr, ...)``
runs in Python while the kernel is translated, on kernel values, so each
name builds the same expression its ``T.*`` counterpart does.
"""

from __future__ import annotations

import numbers
from typing import Any, Optional

from kiln import language as T
from kiln._dsl.expr import Expr
from kiln.tvm._unsupported import Unsupported

__all__ = ["Cast", "Max", "Min", "PrimExpr", "Select", "const",
           "if_then_else", "reinterpret"]

# The type of every kernel value (annotations, isinstance checks).
PrimExpr = Expr


def const(value: Any, dtype: Optional[Any] = None) -> Expr:
    """``value`` as a kernel value of ``dtype`` (``T.cast``); without a
    dtype, as TVM: int32 for an integer, float32 for a float, bool for a
    bool."""
    if dtype is None:
        dtype = "bool" if isinstance(value, bool) else "int32" if \
            isinstance(value, numbers.Integral) else "float32"
    return T.cast(value, dtype)


def Cast(dtype: Any, value: Any) -> Expr:  # noqa: N802 (TVM's name)
    """``T.Cast``: ``value`` converted to ``dtype``."""
    return T.Cast(dtype, value)


def Select(cond: Any, true_value: Any, false_value: Any) -> Any:  # noqa: N802
    """``T.if_then_else``: both values are evaluated."""
    return T.if_then_else(cond, true_value, false_value)


if_then_else = Select


def reinterpret(dtype: Any, value: Any) -> Expr:
    """``T.reinterpret`` in TVM's argument order: the bits of ``value``
    read as ``dtype``."""
    return T.reinterpret(value, dtype)


def Min(a: Any, b: Any) -> Any:  # noqa: N802 (TVM's name)
    """``T.min``."""
    return T.min(a, b)


def Max(a: Any, b: Any) -> Any:  # noqa: N802 (TVM's name)
    """``T.max``."""
    return T.max(a, b)


IndexMap = Unsupported(
    "tvm.tirx.IndexMap",
    "a global tensor's index map is T.Layout(shape, fn) for "
    "T.annotate_layout (kiln.layout.IndexMap); shared tiles take "
    "kiln.layout.make_swizzled_layout, make_padded_layout or "
    "make_row_major_layout, and there is no IndexMap.from_func or layout "
    "plotting")


def __getattr__(name: str) -> Any:
    raise AttributeError(
        f"module 'tvm.tirx' has no attribute '{name}' in Kiln: it provides "
        f"{', '.join(__all__)} (kiln.tvm.tirx)")
