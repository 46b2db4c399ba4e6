"""uint16 kernel values, which the tile IR lacks, carried in u32.

TileLang's dequantisation helpers assemble float bit patterns in uint16
(``tirx.const(3, T.uint16)``, ``x.astype(T.uint16)``). Here such a value is
an Expr of type ``u16`` whose tile-IR text is a u32 expression kept within
[0, 65535], so every operation gives the value 16-bit arithmetic gives:

1. A cast to u16 marks a literal (``u32(5)``, wrapped to 16 bits), masks an
   integer (``u32(x) & 65535``; a u8, u4 or bool is already in range) and
   saturates a float (``min(u32(x), 65535)``: float-to-integer casts
   saturate in the tile IR).
2. An operator meeting a u16 first converts both sides to the type of its
   result (the tile-IR promotion, u16 ranking as a 16-bit unsigned
   integer): when that is u16 the other side is cast to u16 (a u8, u4 or
   an int literal within range is left alone); otherwise the u16 side is
   cast to the result's dtype, so the IR does not promote it to u32.
3. ``+ - * <<``, unary ``-`` and ``~`` can leave [0, 65535] from operands
   within it, so their result is masked to 16 bits; ``>> & | ^ // %``,
   ``min``, ``max`` and ``select`` cannot.
"""

from __future__ import annotations

from typing import Tuple

from kiln._dsl import expr as E

_MASK = 0xFFFF
_IN_RANGE = ("u16", "u8", "u4")  # integer dtypes within [0, 65535]
_WIDENING = ("+", "-", "*", "<<", "~")


def _mask(e: E.Expr) -> E.Expr:
    return E.Expr("bin", "&", e, E.const(_MASK), ty="u16")


def cast(x: E.Expr) -> E.Expr:
    """``x`` converted to u16 (step 1)."""
    if x.ty == "u16":
        return x
    if x.kind == "const" and x.ty == "int":
        return E.Expr("cast", "u32", E.const(x.a & _MASK), ty="u16")
    if x.ty in _IN_RANGE or x.ty == "bool":
        return E.Expr("cast", "u32", x, ty="u16")
    wide = E.Expr("cast", "u32", x, ty="u32")
    if E.is_float(x.ty):
        return E.Expr("call", "min", (wide, E.const(_MASK)), ty="u16")
    return _mask(wide)


def _into(x: E.Expr) -> E.Expr:
    if x.ty in _IN_RANGE:
        return x
    if x.kind == "const" and x.ty == "int" and 0 <= x.a <= _MASK:
        return x
    return cast(x)


def _out_of(x: E.Expr, ty: str) -> E.Expr:
    if x.ty != "u16" or ty in ("int", "float"):
        return x
    return E.Expr("cast", ty, x, ty=ty)


def operands(x: E.Expr, y: E.Expr) -> Tuple[E.Expr, E.Expr]:
    """``x`` and ``y``, one of them u16, converted to their result's type
    (step 2)."""
    ty = E.arith_type(x.ty, y.ty)
    if ty == "u16":
        return _into(x), _into(y)
    return _out_of(x, ty), _out_of(y, ty)


def wrapped(op: str, e: E.Expr) -> E.Expr:
    """``e``, the result of ``op``, masked to 16 bits when ``op`` can leave
    the range (step 3)."""
    if e.ty == "u16" and op in _WIDENING:
        return _mask(e)
    return e
