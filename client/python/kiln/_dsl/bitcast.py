"""``T.reinterpret`` / ``tirx.reinterpret``: a value's bits read as another
dtype of the same width, through the tile IR's bit casts (tile-ir.md §3):

1. Between integer dtypes a cast is the reinterpretation: it keeps the
   low bits, two's complement (``i8(u8 x)``).
2. Integer bits to a float (f16, bf16, f32, f64, f8e4m3, f8e5m2):
   ``from_bits_f32(u)`` and its siblings read the integer's low bits as
   the float's pattern.
3. A float's bits as an integer: ``bits(x)`` is the pattern as u32
   (zero-extended below 32 bits; i64 for f64), cast to the integer dtype.
"""

from __future__ import annotations

from typing import Any

from kiln._dsl import expr as E
from kiln._dsl.dtypes import IR_BITS, SCALAR_ONLY_BITS, DType, scalar_ir
from kiln.errors import KilnSourceError


def _bits(ty: str) -> int:
    return IR_BITS.get(ty) or SCALAR_ONLY_BITS[ty]


def _name(ty: str) -> str:
    return DType(ty).name


def reinterpret(dtype: Any, value: Any) -> Any:
    """The bits of ``value`` read as ``dtype`` (same width)."""
    to = scalar_ir(dtype)
    x = E.as_expr(value)
    if x.ty in ("int", "float"):
        typed = {4: "uint4", 8: "uint8", 16: "uint16", 32: "uint32"}.get(
            _bits(to), "int64")
        raise KilnSourceError(
            f"T.reinterpret of the literal '{x}' needs a dtype: cast it "
            f"first (T.{typed}({x}))")
    if "bool" in (to, x.ty):
        raise KilnSourceError(
            f"T.reinterpret from {_name(x.ty)} to {_name(to)} is not "
            "supported: it reinterprets numbers of the same width, not "
            "bools")
    if _bits(to) != _bits(x.ty):
        raise KilnSourceError(
            f"T.reinterpret to {_name(to)} ({_bits(to)} bits) of '{x}', a "
            f"{_name(x.ty)} ({_bits(x.ty)} bits): the widths differ")
    if to == x.ty:
        return x
    if E.is_int(to) and E.is_int(x.ty):
        return E.cast(to, x)
    if E.is_float(x.ty) and E.is_float(to):
        # (Two floats of one width: f16 and bf16.)
        return _from_bits(to, _to_bits(x))
    if E.is_float(x.ty):
        return E.cast(to, _to_bits(x))
    return _from_bits(to, x)


def _to_bits(x: E.Expr) -> E.Expr:
    return E.Expr("call", "bits", (x,), ty="i64" if x.ty == "f64" else "u32")


def _from_bits(to: str, u: E.Expr) -> E.Expr:
    return E.Expr("call", f"from_bits_{to}", (u,), ty=to)
