"""Scalar expression trees of the tile IR: typing, folding, printing.

An Expr is immutable. Python numbers fold in Python; anything else builds a
node whose type follows tile-ir.md section 3 (``int`` is the untyped integer,
``float`` the untyped float literal, otherwise a tile-IR dtype name).
"""

from __future__ import annotations

import decimal
import math
import numbers
import operator
from typing import Any, Dict, List, Optional, Sequence, Tuple

from kiln._dsl.dtypes import (FLOAT_DTYPES, INT_DTYPES, SCALAR_ONLY_BITS,
                              scalar_ir)
from kiln.errors import KilnSourceError

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1

# Binding strength of binary operators in the tile IR (loosest first).
_PREC = {"||": 1, "&&": 2, "|": 3, "^": 4, "&": 5, "==": 6, "!=": 6,
         "<": 6, "<=": 6, ">": 6, ">=": 6, "<<": 7, ">>": 7, "+": 8, "-": 8,
         "*": 9, "/": 9, "%": 9}
_UNARY_PREC = 10
_ATOM_PREC = 11

MATH_FUNCS = ("exp", "exp2", "log", "log2", "sqrt", "rsqrt", "tanh",
              "sigmoid", "erf", "floor", "ceil", "round", "trunc")


class Expr:
    """A node: const, name, bin, un, call, load or cast."""

    __slots__ = ("kind", "a", "b", "c", "ty")

    def __init__(self, kind: str, a: Any, b: Any = None, c: Any = None,
                 ty: str = "int"):
        self.kind = kind
        self.a = a
        self.b = b
        self.c = c
        self.ty = ty

    # TVM's PrimExpr surface, which TileLang helpers use on kernel values.
    @property
    def dtype(self) -> Any:
        """The value's type as a DType (an untyped integer is int32)."""
        from kiln._dsl.dtypes import DType
        return DType({"int": "i32", "float": "f32"}.get(self.ty, self.ty))

    def astype(self, dtype: Any) -> "Expr":
        """The value converted to ``dtype`` (``T.cast``)."""
        return cast(dtype, self)

    # Python operators build kernel expressions, so helpers written in plain
    # Python (and tunable placeholders) work unchanged.
    def __add__(self, o): return binop("+", self, o)
    def __radd__(self, o): return binop("+", o, self)
    def __sub__(self, o): return binop("-", self, o)
    def __rsub__(self, o): return binop("-", o, self)
    def __mul__(self, o): return binop("*", self, o)
    def __rmul__(self, o): return binop("*", o, self)
    def __truediv__(self, o): return binop("/", self, o)
    def __rtruediv__(self, o): return binop("/", o, self)
    def __floordiv__(self, o): return binop("//", self, o)
    def __rfloordiv__(self, o): return binop("//", o, self)
    def __mod__(self, o): return binop("%", self, o)
    def __rmod__(self, o): return binop("%", o, self)
    def __lshift__(self, o): return binop("<<", self, o)
    def __rlshift__(self, o): return binop("<<", o, self)
    def __rshift__(self, o): return binop(">>", self, o)
    def __rrshift__(self, o): return binop(">>", o, self)
    def __and__(self, o): return binop("&", self, o)
    def __rand__(self, o): return binop("&", o, self)
    def __or__(self, o): return binop("|", self, o)
    def __ror__(self, o): return binop("|", o, self)
    def __xor__(self, o): return binop("^", self, o)
    def __rxor__(self, o): return binop("^", o, self)
    def __pow__(self, o): return power(self, o)
    def __neg__(self): return unop("-", self)
    def __pos__(self): return self
    def __invert__(self): return unop("~", self)
    def __lt__(self, o): return compare("<", self, o)
    def __le__(self, o): return compare("<=", self, o)
    def __gt__(self, o): return compare(">", self, o)
    def __ge__(self, o): return compare(">=", self, o)
    def __eq__(self, o): return compare("==", self, o)  # type: ignore
    def __ne__(self, o): return compare("!=", self, o)  # type: ignore
    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise KilnSourceError(
            f"the kernel value '{self}' has no Python truth value: branch on "
            "it with an if statement inside the kernel, or T.if_then_else")

    def __index__(self) -> int:
        raise KilnSourceError(
            f"the kernel value '{self}' is not a Python integer")

    def __str__(self) -> str:
        return render(self)

    def __repr__(self) -> str:
        return f"Expr({render(self)})"


class Symbol(Expr):
    """A symbolic dim (``T.symbolic("M")``), bound at launch from shapes."""

    def __init__(self, name: str):
        super().__init__("name", name, ty="int")


class Tunable(Expr):
    """An integer the compile request binds: an autotune config key."""

    def __init__(self, name: str, candidates: Sequence[int]):
        super().__init__("name", name, ty="int")
        self.b = tuple(candidates)


def const(value: Any) -> Expr:
    if not isinstance(value, (bool, int, float)):
        # NumPy scalars and other registered numbers.
        if isinstance(value, numbers.Integral):
            value = int(value)
        elif isinstance(value, numbers.Real):
            value = float(value)
    if isinstance(value, bool):
        return Expr("const", value, ty="bool")
    if isinstance(value, int):
        if not _INT64_MIN <= value <= _INT64_MAX:
            raise KilnSourceError(f"integer {value} does not fit in 64 bits")
        return Expr("const", value, ty="int")
    if isinstance(value, float):
        if math.isnan(value):
            raise KilnSourceError("NaN has no tile-IR literal")
        return Expr("const", value, ty="float")
    raise KilnSourceError(f"cannot use {value!r} in a kernel expression")


def as_expr(value: Any) -> Expr:
    """``value`` as an Expr: numbers become literals; tile elements loads."""
    if isinstance(value, Expr):
        return value
    hook = getattr(value, "_kiln_expr", None)
    if hook is not None:
        return hook()
    if isinstance(value, (bool, numbers.Real)):
        return const(value)
    raise KilnSourceError(
        f"cannot use {type(value).__name__} value {value!r} in a kernel "
        "expression")


def is_int(ty: str) -> bool:
    return ty == "int" or ty in INT_DTYPES or ty in SCALAR_ONLY_BITS


def is_float(ty: str) -> bool:
    return ty == "float" or ty in FLOAT_DTYPES


_FLOAT_RANK = {"f64": 3, "f32": 2}


def _int_rank(ty: str) -> Tuple[int, int]:
    bits = {"i4": 4, "u4": 4, "i8": 8, "u8": 8, "i16": 16, "u16": 16,
            "i32": 32, "u32": 32, "i64": 64}[ty]
    return bits, 1 if ty.startswith("u") else 0


def arith_type(a: str, b: str) -> str:
    """The type of ``a OP b`` for an arithmetic OP (tile-ir.md section 3)."""
    if a == b:
        return a
    if "bool" in (a, b):
        raise KilnSourceError("bool is not a number; cast it first")
    fa, fb = is_float(a), is_float(b)
    if fa and fb:
        if a == "float":
            return b
        if b == "float":
            return a
        ra, rb = _FLOAT_RANK.get(a, 1), _FLOAT_RANK.get(b, 1)
        if ra != rb:
            return a if ra > rb else b
        return "f32"  # two different narrow floats
    if fa:
        return a
    if fb:
        return b
    if a == "int":
        return b
    if b == "int":
        return a
    return a if _int_rank(a) > _int_rank(b) else b


_PY_OPS = {"+": operator.add, "-": operator.sub, "*": operator.mul,
           "/": operator.truediv, "//": operator.floordiv,
           "%": operator.mod, "<<": operator.lshift, ">>": operator.rshift,
           "&": operator.and_, "|": operator.or_, "^": operator.xor}
_PY_CMP = {"<": operator.lt, "<=": operator.le, ">": operator.gt,
           ">=": operator.ge, "==": operator.eq, "!=": operator.ne}


def _is_number(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, Expr)


def binop(op: str, a: Any, b: Any) -> Any:
    """``a OP b`` with Python operator spelling (``//`` is floor division)."""
    if _is_number(a) and _is_number(b):
        return _PY_OPS[op](a, b)
    x, y = as_expr(a), as_expr(b)
    if op in ("&", "|") and x.ty == "bool" and y.ty == "bool":
        return Expr("bin", "&&" if op == "&" else "||", x, y, "bool")
    if _has_u16(x, y):
        x, y = _u16.operands(x, y)
        return _u16.wrapped(op, _typed_binop(op, x, y))
    return _typed_binop(op, x, y)


def _has_u16(*xs: Expr) -> bool:
    """True when a u16 value meets numbers (kiln/_dsl/u16.py)."""
    tys = [x.ty for x in xs]
    return "u16" in tys and "bool" not in tys


def _typed_binop(op: str, x: Expr, y: Expr) -> Expr:
    if op in ("&", "|", "^", "<<", ">>", "%", "//"):
        if not (is_int(x.ty) and is_int(y.ty)):
            what = "floor division '//'" if op == "//" else f"'{op}'"
            raise KilnSourceError(
                f"{what} takes integers; got '{x}' ({x.ty}) and "
                f"'{y}' ({y.ty})")
        if op in ("%", "//") and y.kind == "const" and y.a == 0:
            raise KilnSourceError(f"integer division by zero in '{x} {op} 0'")
        ty = arith_type(x.ty, y.ty)
        return Expr("bin", "/" if op == "//" else op, x, y, ty)
    if op == "/" and is_int(x.ty) and is_int(y.ty):
        raise KilnSourceError(
            f"'{x} / {y}' divides two integers: write '//' for floor "
            "division (tile IR '/'), or cast one side to a float dtype")
    return Expr("bin", op, x, y, arith_type(x.ty, y.ty))


def compare(op: str, a: Any, b: Any) -> Any:
    if _is_number(a) and _is_number(b):
        return _PY_CMP[op](a, b)
    x, y = as_expr(a), as_expr(b)
    # A bool against the integer 0 or 1 (TileLang masks: `mask[i] == 1`)
    # compares with false / true.
    if op in ("==", "!=") and x.ty != y.ty:
        if x.ty == "bool" and y.kind == "const" and y.a in (0, 1):
            y = as_expr(bool(y.a))
        elif y.ty == "bool" and x.kind == "const" and x.a in (0, 1):
            x = as_expr(bool(x.a))
    if _has_u16(x, y):
        x, y = _u16.operands(x, y)
    if "bool" in (x.ty, y.ty) and not (x.ty == y.ty and op in ("==", "!=")):
        raise KilnSourceError(f"cannot compare '{x}' and '{y}' with '{op}'")
    return Expr("bin", op, x, y, "bool")


def logical(op: str, a: Any, b: Any) -> Any:
    """``and`` / ``or`` of two conditions (IR ``&&`` / ``||``)."""
    if _is_number(a) and _is_number(b):
        return (a and b) if op == "&&" else (a or b)
    if _is_number(a):  # fold a Python constant side
        if op == "&&":
            return as_expr(b) if a else False
        return True if a else as_expr(b)
    x, y = as_expr(a), as_expr(b)
    for e in (x, y):
        if e.ty != "bool":
            raise KilnSourceError(f"'{e}' is not a condition (a bool)")
    return Expr("bin", op, x, y, "bool")


def unop(op: str, a: Any) -> Any:
    if _is_number(a):
        return {"-": operator.neg, "~": operator.invert,
                "!": operator.not_}[op](a)
    x = as_expr(a)
    if op == "-" and x.ty == "bool":
        raise KilnSourceError(f"cannot negate the bool '{x}'")
    if op == "~" and not is_int(x.ty):
        raise KilnSourceError(f"'~' takes an integer; got '{x}'")
    if op == "!" and x.ty != "bool":
        raise KilnSourceError(f"'not' takes a condition; got '{x}'")
    return _u16.wrapped(op, Expr("un", op, x,
                                 ty="bool" if op == "!" else x.ty))


def power(a: Any, b: Any) -> Any:
    if _is_number(a) and _is_number(b):
        return a ** b
    if b == 2 and _is_number(b):
        return binop("*", a, a)
    if _is_number(b) and b == 0.5:
        return call("sqrt", [a])
    raise KilnSourceError(
        "'**' on a kernel value supports only the exponents 2 and 0.5")


def _float_of(ty: str) -> str:
    return ty if ty in FLOAT_DTYPES or ty == "float" else "f32"


_PY_MATH = {"exp": math.exp, "exp2": lambda v: 2.0 ** v, "log": math.log,
            "log2": math.log2, "sqrt": math.sqrt,
            "rsqrt": lambda v: 1.0 / math.sqrt(v), "tanh": math.tanh,
            "sigmoid": lambda v: 1.0 / (1.0 + math.exp(-v)), "erf": math.erf,
            # (Floats, as in the kernel; round: ties to even.)
            "floor": lambda v: float(math.floor(v)),
            "ceil": lambda v: float(math.ceil(v)),
            "round": lambda v: float(round(v)),
            "trunc": lambda v: float(math.trunc(v))}


def call(fn: str, args: Sequence[Any]) -> Any:
    """A builtin call: math functions, min, max, abs, fma, ceildiv, select."""
    if fn in MATH_FUNCS:
        _arity(fn, args, 1)
        if _is_number(args[0]) and not isinstance(args[0], bool):
            return _PY_MATH[fn](args[0])
        x = as_expr(args[0])
        if x.ty == "bool":
            raise KilnSourceError(f"{fn} takes a number; got '{x}'")
        return Expr("call", fn, (x,), ty=_float_of(x.ty))
    if fn in ("isnan", "isinf"):
        _arity(fn, args, 1)
        if _is_number(args[0]) and not isinstance(args[0], bool):
            return (math.isnan if fn == "isnan" else math.isinf)(args[0])
        x = as_expr(args[0])
        if x.ty == "bool":
            raise KilnSourceError(f"{fn} takes a number; got '{x}'")
        return Expr("call", fn, (x,), ty="bool")
    if fn in ("min", "max"):
        _arity(fn, args, 2)
        if all(_is_number(v) for v in args):
            a, b = args
            if any(isinstance(v, float) and math.isnan(v) for v in args):
                return math.nan  # a NaN operand wins, as in the kernel
            return (min if fn == "min" else max)(a, b)
        x, y = as_expr(args[0]), as_expr(args[1])
        if _has_u16(x, y):
            x, y = _u16.operands(x, y)
        return Expr("call", fn, (x, y), ty=arith_type(x.ty, y.ty))
    if fn == "abs":
        _arity(fn, args, 1)
        if _is_number(args[0]):
            return abs(args[0])
        x = as_expr(args[0])
        return Expr("call", fn, (x,), ty=x.ty)
    if fn == "fma":
        _arity(fn, args, 3)
        xs = [as_expr(v) for v in args]
        ty = arith_type(arith_type(xs[0].ty, xs[1].ty), xs[2].ty)
        return Expr("call", fn, tuple(xs), ty=_float_of(ty))
    if fn == "ceildiv":
        _arity(fn, args, 2)
        if all(_is_number(v) and not isinstance(v, float) for v in args):
            if args[1] == 0:
                raise KilnSourceError("T.ceildiv by zero")
            return -(-args[0] // args[1])
        x, y = as_expr(args[0]), as_expr(args[1])
        if not (is_int(x.ty) and is_int(y.ty)):
            raise KilnSourceError(
                f"T.ceildiv takes integers; got '{x}' and '{y}'")
        if _has_u16(x, y):
            x, y = _u16.operands(x, y)
        return Expr("call", fn, (x, y), ty=arith_type(x.ty, y.ty))
    if fn == "select":
        _arity(fn, args, 3)
        c = args[0]
        if _is_number(c):
            return args[1] if c else args[2]
        c = as_expr(c)
        if c.ty != "bool":
            raise KilnSourceError(
                f"T.if_then_else needs a condition; got '{c}'")
        x, y = as_expr(args[1]), as_expr(args[2])
        if _has_u16(x, y):
            x, y = _u16.operands(x, y)
        ty = "bool" if x.ty == y.ty == "bool" else arith_type(x.ty, y.ty)
        return Expr("call", fn, (c, x, y), ty=ty)
    raise KilnSourceError(f"unknown builtin {fn}")


def _arity(fn: str, args: Sequence[Any], n: int) -> None:
    if len(args) != n:
        raise KilnSourceError(
            f"{fn} takes {n} argument{'s' if n > 1 else ''}; got {len(args)}")


def cast(dtype: Any, value: Any) -> Expr:
    ty = scalar_ir(dtype)
    if ty == "u16":
        return _u16.cast(as_expr(value))
    return Expr("cast", ty, as_expr(value), ty=ty)


def load(buffer: str, indices: Sequence[Any], dtype: str) -> Expr:
    idx = tuple(as_expr(i) for i in indices)
    for i in idx:
        if not is_int(i.ty):
            raise KilnSourceError(f"index '{i}' of {buffer} is not an integer")
    return Expr("load", buffer, idx, ty=dtype)


# --- printing -------------------------------------------------------------

def format_float(v: float) -> str:
    """Shortest round-trip spelling, as the tile-IR canonical printer."""
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    d = decimal.Decimal(repr(v))
    sign, digits, exp = d.as_tuple()
    ds = "".join(map(str, digits)).lstrip("0") or "0"
    # Strip trailing zeros into the exponent.
    stripped = ds.rstrip("0") or "0"
    exp += len(ds) - len(stripped)
    ds = stripped
    fixed = format(decimal.Decimal((0, tuple(map(int, ds)), exp)), "f")
    sci_exp = exp + len(ds) - 1
    mant = ds[0] + ("." + ds[1:] if len(ds) > 1 else "")
    sci = f"{mant}e{'-' if sci_exp < 0 else '+'}{abs(sci_exp):02d}"
    out = sci if len(sci) < len(fixed) else fixed
    if "." not in out and "e" not in out:
        out += ".0"
    return ("-" if sign else "") + out


def _prec(e: Expr) -> int:
    if e.kind == "bin":
        return _PREC[e.a]
    if e.kind == "un":
        return _UNARY_PREC
    if e.kind == "const" and not isinstance(e.a, bool) and e.a < 0:
        return _UNARY_PREC
    return _ATOM_PREC


def _paren(e: Expr, need: bool) -> str:
    s = render(e)
    return f"({s})" if need else s


def render(e: Expr) -> str:
    """The expression in tile-IR syntax with the fewest parentheses."""
    k = e.kind
    if k == "const":
        if isinstance(e.a, bool):
            return "true" if e.a else "false"
        if isinstance(e.a, float):
            return format_float(e.a)
        return str(e.a)
    if k == "name":
        return e.a
    if k == "bin":
        p = _PREC[e.a]
        lp, rp = _prec(e.b), _prec(e.c)
        left = _paren(e.b, lp < p or (p == 6 and lp == 6))
        right = _paren(e.c, rp <= p)
        return f"{left} {e.a} {right}"
    if k == "un":
        return e.a + _paren(e.b, _prec(e.b) < _UNARY_PREC)
    if k == "call":
        return f"{e.a}({', '.join(render(x) for x in e.b)})"
    if k == "load":
        return f"{e.a}[{', '.join(render(x) for x in e.b)}]"
    if k == "cast":
        return f"{e.a}({render(e.b)})"
    raise AssertionError(k)


def render_value(v: Any) -> str:
    return render(as_expr(v))


# --- integer polynomials, to simplify slice extents -----------------------

Poly = Dict[Tuple[str, ...], int]


def _poly(e: Expr, atoms: Dict[str, Expr]) -> Optional[Poly]:
    if not is_int(e.ty):
        return None
    if e.kind == "const":
        return {(): e.a}
    if e.kind == "bin" and e.a in ("+", "-", "*"):
        x, y = _poly(e.b, atoms), _poly(e.c, atoms)
        if x is None or y is None:
            return None
        if e.a == "*":
            out: Poly = {}
            for kx, cx in x.items():
                for ky, cy in y.items():
                    key = tuple(sorted(kx + ky))
                    out[key] = out.get(key, 0) + cx * cy
            return out
        sign = 1 if e.a == "+" else -1
        out = dict(x)
        for ky, cy in y.items():
            out[ky] = out.get(ky, 0) + sign * cy
        return out
    if e.kind == "un" and e.a == "-":
        x = _poly(e.b, atoms)
        return None if x is None else {k: -c for k, c in x.items()}
    key = render(e)
    atoms[key] = e
    return {(key,): 1}


def _from_poly(p: Poly, atoms: Dict[str, Expr]) -> Any:
    terms = [(k, c) for k, c in p.items() if c != 0 and k != ()]
    result: Any = None
    for key, coeff in terms:
        term: Any = None
        for atom in key:
            term = atoms[atom] if term is None else \
                binop("*", term, atoms[atom])
        mag = abs(coeff)
        if mag != 1:
            term = binop("*", term, mag)
        if result is None:
            result = term if coeff > 0 else unop("-", term)
        else:
            result = binop("+" if coeff > 0 else "-", result, term)
    c0 = p.get((), 0)
    if result is None:
        return c0
    if c0:
        result = binop("+" if c0 > 0 else "-", result, abs(c0))
    return result


def difference(b: Any, a: Any) -> Any:
    """``b - a`` simplified as integer polynomials when both are integers."""
    if _is_number(a) and _is_number(b):
        return b - a
    atoms: Dict[str, Expr] = {}
    pb, pa = _poly(as_expr(b), atoms), _poly(as_expr(a), atoms)
    if pb is None or pa is None:
        return binop("-", b, a)
    for k, c in pa.items():
        pb[k] = pb.get(k, 0) - c
    return _from_poly(pb, atoms)


def substitute(e: Any, values: Dict[str, Expr], depth: int = 0) -> Any:
    """``e`` with every name in ``values`` replaced by its value (itself
    substituted: a let defined from earlier lets)."""
    if not isinstance(e, Expr) or depth > 64:
        return e
    if e.kind == "name":
        v = values.get(e.a)
        return e if v is None else substitute(v, values, depth + 1)
    if e.kind == "bin":
        return Expr("bin", e.a, substitute(e.b, values, depth),
                    substitute(e.c, values, depth), ty=e.ty)
    if e.kind in ("un", "cast"):
        return Expr(e.kind, e.a, substitute(e.b, values, depth), e.c, ty=e.ty)
    if e.kind in ("call", "load"):
        args = [substitute(x, values, depth) for x in e.b]
        return Expr(e.kind, e.a, tuple(args) if isinstance(e.b, tuple)
                    else args, e.c, ty=e.ty)
    return e


def names_in(e: Any, out: Optional[List[Expr]] = None) -> List[Expr]:
    """Every name node of ``e`` (symbols, tunables, variables)."""
    out = [] if out is None else out
    if not isinstance(e, Expr):
        return out
    if e.kind == "name":
        out.append(e)
    elif e.kind in ("bin",):
        names_in(e.b, out)
        names_in(e.c, out)
    elif e.kind in ("un", "cast"):
        names_in(e.b, out)
    elif e.kind in ("call", "load"):
        for x in e.b:
            names_in(x, out)
    return out


# u16 values build on this module's Expr (imported last: u16 imports it).
from kiln._dsl import u16 as _u16  # noqa: E402
