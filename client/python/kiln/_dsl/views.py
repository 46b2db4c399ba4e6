"""Buffer views: ``T.Tensor(shape, dtype, buf.data)``, a global tensor's
storage seen with another shape (TileLang's convolution flattens its
kernel and output this way).

1. ``buf.data`` of a global tensor (a parameter, a ``T.empty`` output, a
   ``T.alloc_global`` tensor or another view) is a BufferData naming it.
2. ``T.Tensor(shape, dtype, data)`` checks the view (a row-major base, the
   base's dtype, the element count where both shapes are known while
   translating) and makes it a tensor parameter of its own: the tile IR has
   no aliasing, so a view is one more parameter with the view's shape, used
   by the kernels that name it. A dim that is an expression of symbolic
   dims (``N * OH * OW``) becomes a symbol of its own, computed at launch.
3. The launcher binds that parameter to the base argument's memory with the
   view's shape and row-major strides, without a copy (View.bind_symbols,
   View.shape_at; jit.py).
4. The tile IR treats parameters as distinct memory, so a kernel may not
   use two names of one storage when it writes through one of them
   (check_aliasing, run as the kernels are assembled).
"""

from __future__ import annotations

import numbers
import re
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from kiln._dsl import expr as E
from kiln.errors import KilnArgumentError, KilnSourceError

if TYPE_CHECKING:
    from kiln._dsl.frontend import Buffer, Param, _Translator


class BufferData:
    """``buf.data``: the storage of a global tensor, which only
    ``T.Tensor(shape, dtype, buf.data)`` takes."""

    def __init__(self, buffer: "Buffer"):
        self.buffer = buffer

    def _kiln_expr(self) -> E.Expr:
        raise KilnSourceError(
            f"'{self.buffer.py_name}.data' is a tensor's storage: view it "
            "with T.Tensor(shape, dtype, "
            f"{self.buffer.py_name}.data), or index the tensor")

    def __repr__(self) -> str:
        return f"<storage of {self.buffer.py_name}>"


class View:
    """A view's parameter and what the launcher needs to bind it: the root
    tensor it views (an IR name: a parameter or a T.alloc_global tensor),
    the dims' values (ints, or expressions of symbols for the symbols the
    view adds) and where the Python source made it."""

    def __init__(self, param: "Param", base: str, base_py_name: str,
                 base_shape: Tuple[Any, ...], py_name: str,
                 exprs: Dict[str, E.Expr], filename: str, lineno: int):
        self.param = param
        self.name = param.name
        self.base = base
        self.base_py_name = base_py_name
        self.base_shape = base_shape  # ints and symbol names
        self.py_name = py_name
        self.exprs = exprs  # symbol added for a dim -> its expression
        self.filename = filename
        self.lineno = lineno

    def where(self) -> str:
        """How messages name the view: its Python name and line."""
        return (f"the view '{self.py_name}' of '{self.base_py_name}' "
                f"({self.filename}:{self.lineno})")

    def bind_symbols(self, symbols: Dict[str, Tuple[int, str]],
                     kernel: str) -> None:
        """Adds the values of the symbols this view adds (from the symbols
        the arguments bound), then checks the element count against the
        base's when its dims are known. Raises KilnArgumentError."""
        values = {k: v for k, (v, _) in symbols.items()}
        for sym, e in self.exprs.items():
            value = _evaluate(e, values)
            if value is None:
                return  # an output's dim no input binds: its own error
            if value <= 0:
                raise KilnArgumentError(
                    f"{kernel}: {self.where()} has dim {E.render(e)} = "
                    f"{value}; view dims must be positive")
            symbols[sym] = (value, f"{self.where()} has {E.render(e)} = "
                                   f"{value}")
            values[sym] = value
        shape = _dims_at(self.param.shape, values)
        base = _dims_at(self.base_shape, values)
        if shape is None or base is None:
            return
        if _count(shape) != _count(base):
            raise KilnArgumentError(
                f"{kernel}: {self.where()} has shape {list(shape)} "
                f"({_count(shape)} elements), but '{self.base_py_name}' has "
                f"shape {list(base)} ({_count(base)} elements): a view keeps "
                "the element count")

    def shape_at(self, symbols: Dict[str, Tuple[int, str]]) -> Tuple[int, ...]:
        """The view's shape once bind_symbols ran."""
        shape = _dims_at(self.param.shape,
                         {k: v for k, (v, _) in symbols.items()})
        assert shape is not None, self.name
        return shape


def _dims_at(dims: Tuple[Any, ...],
             values: Dict[str, int]) -> Optional[Tuple[int, ...]]:
    out = []
    for d in dims:
        if isinstance(d, int):
            out.append(d)
        elif d in values:
            out.append(values[d])
        else:
            return None
    return tuple(out)


def _count(shape: Tuple[int, ...]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _evaluate(e: Any, values: Dict[str, int]) -> Optional[int]:
    """The integer value of a dim expression over symbols (make() allows
    only these operators); None when a symbol has no value."""
    if isinstance(e, int):
        return e
    if e.kind == "const":
        return int(e.a)
    if e.kind == "name":
        return values.get(e.a)
    if e.kind == "un" and e.a == "-":
        x = _evaluate(e.b, values)
        return None if x is None else -x
    args = [e.b, e.c] if e.kind == "bin" else list(e.b)
    xs = [_evaluate(x, values) for x in args]
    if any(x is None for x in xs):
        return None
    a, b = xs[0], xs[1]
    op = e.a
    if op in ("/", "%", "ceildiv") and b == 0:
        raise KilnArgumentError(f"view dim {E.render(e)} divides by zero")
    return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b,
            "/": lambda: a // b, "%": lambda: a % b,
            "ceildiv": lambda: -(-a // b), "min": lambda: min(a, b),
            "max": lambda: max(a, b)}[op]()


_DIM_OPS = {"+", "-", "*", "/", "%", "ceildiv", "min", "max"}


def _dim_expr_ok(e: E.Expr, symbols: Dict[str, str]) -> Optional[str]:
    """Why ``e`` cannot be a view dim computed at launch, or None."""
    if e.kind == "const":
        return None if isinstance(e.a, int) and not isinstance(e.a, bool) \
            else f"'{e}' is not an integer"
    if e.kind == "name":
        if isinstance(e, E.Symbol) and e.a in symbols:
            return None
        if isinstance(e, E.Tunable):
            return f"it uses the tunable '{e.a}'"
        return f"it uses '{e.a}', which is not a symbolic dim of a tensor"
    if e.kind == "un" and e.a == "-":
        return _dim_expr_ok(e.b, symbols)
    if e.kind in ("bin", "call") and e.a in _DIM_OPS:
        for x in ([e.b, e.c] if e.kind == "bin" else e.b):
            why = _dim_expr_ok(x, symbols)
            if why:
                return why
        return None
    return f"'{e}' is not integer arithmetic on symbolic dims"


def make(t: "_Translator", spec: Any, py_name: Optional[str]) -> "Buffer":
    """The view ``T.Tensor(spec.shape, spec.dtype, spec.data)`` as a global
    buffer of the kernel (see the module comment). ``py_name`` is the name
    it is assigned to, if any."""
    from kiln._dsl.frontend import Buffer, Param
    base = spec.data.buffer
    root = base.view.base if base.view is not None else base.name
    root_py = base.view.base_py_name if base.view is not None \
        else base.py_name
    root_param = next((p for p in t.params + t.globals if p.name == root),
                      None)
    if root_param is None or base.scope != "global":
        raise KilnSourceError(
            f"'{base.py_name}.data': only a global tensor (a parameter, a "
            "T.empty output or a T.alloc_global tensor) can be viewed")
    if root_param.strides is not None:
        raise KilnSourceError(
            f"'{root_py}' has explicit strides: a view reshapes row-major "
            "storage only")
    if spec.dtype != root_param.dtype:
        raise KilnSourceError(
            f"T.Tensor(..., {spec.dtype}, {base.py_name}.data): a view keeps "
            f"the dtype of '{root_py}' ({root_param.dtype})")
    if spec.strides is not None:
        raise KilnSourceError("a view is row-major: it takes no strides")
    py_name = py_name or f"{base.py_name}_view"
    name = t.names.fresh(py_name)
    dims: List[Any] = []     # the Param's: ints and symbol names
    values: List[Any] = []   # the Buffer's: ints and Exprs
    exprs: Dict[str, E.Expr] = {}
    for i, d in enumerate(spec.shape):
        if isinstance(d, numbers.Integral) and not isinstance(d, bool):
            if d <= 0:
                raise KilnSourceError(
                    f"view dim {i} of '{py_name}' is {int(d)}; dims are "
                    "positive")
            dims.append(int(d))
            values.append(int(d))
            continue
        if not isinstance(d, E.Expr):
            raise KilnSourceError(
                f"view dim {i} of '{py_name}' is {d!r}; dims are ints or "
                "integer expressions of symbolic dims")
        why = _dim_expr_ok(d, t.symbols)
        if why:
            raise KilnSourceError(
                f"view dim {i} of '{py_name}' ('{d}'): {why}; view dims are "
                "ints or integer expressions of symbolic dims, known at "
                "launch")
        if isinstance(d, E.Symbol):
            dims.append(d.a)
            values.append(d)
            continue
        sym = t.names.fresh(f"{name}_d{i}")
        t.symbols[sym] = sym
        exprs[sym] = d
        dims.append(sym)
        values.append(E.Symbol(sym))
    if not t.probing:
        _check_count(spec.shape, root_param.shape, py_name, root_py)
    param = Param(name, spec.dtype, tuple(dims))
    view = View(param, root, root_py, tuple(root_param.shape), py_name,
                exprs, t.filename, getattr(t.node, "lineno", 0))
    t.views.append(view)
    buf = Buffer(name, "global", spec.dtype, tuple(values), py_name)
    buf.view = view
    return buf


def _check_count(shape: Tuple[Any, ...], base: Tuple[Any, ...],
                 py_name: str, base_py: str) -> None:
    """A mismatch of element counts that translation can decide (constant
    shapes, or products equal as polynomials); the rest waits for the
    launch."""
    def product(ds: Tuple[Any, ...]) -> Any:
        acc: Any = 1
        for d in ds:
            acc = E.binop("*", acc, E.Symbol(d) if isinstance(d, str) else d)
        return acc

    diff = E.difference(product(shape), product(base))
    if isinstance(diff, int) and diff != 0:
        def fmt(ds: Tuple[Any, ...]) -> str:
            return "[" + ", ".join(d if isinstance(d, str) else
                                   E.render_value(d) for d in ds) + "]"
        raise KilnSourceError(
            f"the view '{py_name}' has shape {fmt(shape)} "
            f"({E.render_value(product(shape))} elements), but "
            f"'{base_py}' has shape {fmt(base)} "
            f"({E.render_value(product(base))} elements): a view keeps the "
            "element count")


# --- aliasing --------------------------------------------------------------

_IDENT = re.compile(r"[A-Za-z_]\w*")
# The tensor a tile-IR statement writes: the destination of an arrow
# (copy, gemm, reduce, cumsum), the first operand of fill, clear and
# atomic_add, or the element a store names.
_WRITES = (re.compile(r"^(?:copy|gemm|reduce\.\w+|cumsum)\b.*->\s*"
                      r"([A-Za-z_]\w*)"),
           re.compile(r"^(?:fill|clear|atomic_add)\s+([A-Za-z_]\w*)"),
           re.compile(r"^([A-Za-z_]\w*)\["))


def _written(text: str) -> Optional[str]:
    for pattern in _WRITES:
        m = pattern.match(text)
        if m:
            return m.group(1)
    return None


def check_aliasing(t: "_Translator", lines: List[List]) -> None:
    """Refuses a kernel (its [depth, text, python line] lines) that uses
    two names of one storage (a tensor and its views) and writes through
    one of them: the tile IR would treat them as separate memory. A
    KilnSourceError at the first such write."""
    if not t.views:
        return
    root = {v.name: v.base for v in t.views}
    root.update({v.base: v.base for v in t.views})
    py = {v.name: v.py_name for v in t.views}
    py.update({v.base: v.base_py_name for v in t.views})
    seen: Dict[str, Dict[str, int]] = {}     # root -> name -> first line
    writes: List[Tuple[int, str]] = []       # (python line, name)
    for _, text, line in lines:
        for n in set(_IDENT.findall(text)) & root.keys():
            seen.setdefault(root[n], {}).setdefault(n, line)
        w = _written(text)
        if w in root:
            writes.append((line, w))
    for line, w in writes:
        others = {n: ln for n, ln in seen[root[w]].items() if n != w}
        if not others:
            continue
        other, other_line = min(others.items(), key=lambda kv: kv[1])
        relation = (f"'{py[w]}' views '{py[other]}'" if other == root[w]
                    else f"'{py[other]}' views '{py[w]}'" if w == root[w]
                    else f"both view '{py[root[w]]}'")
        raise KilnSourceError(
            f"'{py[w]}' is written here, and this kernel also uses "
            f"'{py[other]}' (line {other_line}); {relation}, the same "
            "memory, but the tile IR treats tensor parameters as distinct, "
            "so the accesses may be reordered or cached apart: use one name "
            "of the tensor in this kernel, or split it into two T.Kernel "
            "blocks", t.filename, line)
