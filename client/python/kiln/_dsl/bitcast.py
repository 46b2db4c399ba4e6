"""``T.reinterpret`` / ``tirx.reinterpret``: a value's bits read as another
dtype of the same width.

The tile IR has no bit cast, so the result is built from operations it
has, exactly:

1. Between integer dtypes a cast is the reinterpretation: it keeps the
   low bits, two's complement (``i8(u8 x)``).
2. Integer bits to a float (f16, bf16, f32, f8e4m3, f8e5m2): the fields are
   taken with shifts and masks in i64, ``(m | 1 << M) * 2^e * 2^-(bias +
   M)`` (``m * 2^(1 - bias - M)`` when the exponent field is 0) is
   computed in f64, where every product of these powers of two is exact,
   times -1.0 or 1.0 for the sign (-0.0 stays), and the result is cast to
   the float dtype, which represents it.
   An all-ones exponent gives inf or NaN (e4m3: NaN only for mantissa 7).
   ``2^e`` is ``f64(1 << (e & 31))`` times one power per higher bit of
   ``e``.
3. A float's bits as an integer has no such construction yet and is a
   clear error, as are float64 and bool.
"""

from __future__ import annotations

import math
from typing import Any, Dict, Tuple

from kiln._dsl import expr as E
from kiln._dsl.dtypes import IR_BITS, SCALAR_ONLY_BITS, DType, scalar_ir
from kiln.errors import KilnSourceError

# Float dtype -> (exponent bits, mantissa bits, bias, has infinities).
_FLOAT_FIELDS: Dict[str, Tuple[int, int, int, bool]] = {
    "f16": (5, 10, 15, True), "bf16": (8, 7, 127, True),
    "f32": (8, 23, 127, True), "f8e5m2": (5, 2, 15, True),
    "f8e4m3": (4, 3, 7, False),
}
# Width -> the unsigned integer dtype the fields are read from.
_UNSIGNED = {8: "u8", 16: "u16", 32: "u32"}


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
    if "bool" in (to, x.ty) or "f64" in (to, x.ty):
        raise KilnSourceError(
            f"T.reinterpret from {_name(x.ty)} to {_name(to)} is not "
            "supported: it reinterprets integers of the same width, and "
            "integer bits as float16, bfloat16, float32 or float8")
    if _bits(to) != _bits(x.ty):
        raise KilnSourceError(
            f"T.reinterpret to {_name(to)} ({_bits(to)} bits) of '{x}', a "
            f"{_name(x.ty)} ({_bits(x.ty)} bits): the widths differ")
    if to == x.ty:
        return x
    if E.is_int(to) and E.is_int(x.ty):
        return E.cast(to, x)
    if E.is_float(x.ty):
        raise KilnSourceError(
            f"T.reinterpret of the {_name(x.ty)} '{x}' as {_name(to)} is "
            "not supported yet: Kiln reinterprets integer bits as a float, "
            "not a float's bits as an integer")
    return E.cast(to, _decode(to, E.cast(_UNSIGNED[_bits(to)], x)))


def _pow2(e: E.Expr, ebits: int) -> E.Expr:
    """``2^e`` as an f64, for an i64 ``e`` in [0, 2^ebits)."""
    p = E.cast("f64", E.binop("<<", E.cast("i64", 1), E.binop("&", e, 31)))
    for bit in range(5, ebits):
        on = E.compare("!=", E.binop("&", e, 1 << bit), 0)
        factor = E.cast("f64", float(2 ** (1 << bit)))
        p = E.binop("*", p, E.call("select", [on, factor, 1.0]))
    return p


def _decode(to: str, u: E.Expr) -> E.Expr:
    """The f64 value of the float ``to`` whose bits are the unsigned ``u``
    (step 2)."""
    ebits, mbits, bias, has_inf = _FLOAT_FIELDS[to]
    bits = E.cast("i64", u)
    sign = E.binop("&", E.binop(">>", bits, ebits + mbits), 1)
    e = E.binop("&", E.binop(">>", bits, mbits), (1 << ebits) - 1)
    m = E.binop("&", bits, (1 << mbits) - 1)
    hidden = E.binop("<<", E.cast("i64", E.compare("!=", e, 0)), mbits)
    mant = E.binop("|", m, hidden)
    scale = E.call("max", [e, 1])
    mag = E.binop("*", E.binop("*", E.cast("f64", mant), _pow2(scale, ebits)),
                  2.0 ** -(bias + mbits))
    inf = E.cast("f64", math.inf)
    nan = E.binop("-", inf, inf)
    top = E.compare("==", e, (1 << ebits) - 1)
    if has_inf:
        mag = E.call("select", [top, E.call("select", [
            E.compare("==", m, 0), inf, nan]), mag])
    else:
        all_ones = E.logical("&&", top, E.compare("==", m, (1 << mbits) - 1))
        mag = E.call("select", [all_ones, nan, mag])
    negative = E.compare("!=", sign, 0)
    return E.binop("*", mag, E.call("select", [negative, -1.0, 1.0]))
