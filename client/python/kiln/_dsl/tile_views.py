"""Tile reshapes: ``T.reshape(tile, shape)`` and ``T.view(tile, shape)``,
the same elements (row-major order) seen with another shape.

The tile IR has no aliasing, so a reshaped tile is lowered in two ways:

1. An element access of the view (``v[a, b, c]``, read or stored, inside or
   outside T.Parallel) is the access of the base tile's element at the same
   row-major position: indices are mapped dim group by dim group (the view
   dims whose extents multiply to those of a run of base dims), so
   ``s_r[n, q, h]`` over ``s: [N, Q * H]`` is ``s[n, q * H + h]``.
2. A tile op that takes the view (``T.reduce_sum(s_r, out, dim=-1)``,
   ``T.copy(v, ...)``, ``T.gemm``...) works on a tile of the view's shape
   and scope, allocated where T.reshape was called: before the op the base
   elements are copied into it when the op reads the view, after it they
   are copied back when the op writes the view (an element-wise T.Parallel
   each way). A view only accessed element by element allocates nothing.
3. A T.Parallel over the view's shape whose every store is to the view at
   the loop's own indices runs over the base's index space (ViewLoop): its
   variables are the base's, the names the program gave are bound to the
   view indices they stand for, and the view's elements at those names are
   the base's at its variables. The base is then indexed in its own index
   space, so a GEMM accumulator seen through a view keeps its register
   layout on GPUs (the FP8 indexer: 133 ms -> 1.0 ms on an H100).

A view of a global tensor is ``T.Tensor(shape, dtype, x.data)``
(views.py). Views that change the dtype reinterpret bytes and are refused.
"""

from __future__ import annotations

import math
import numbers
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

from kiln._dsl import expr as E
from kiln.errors import KilnSourceError

if TYPE_CHECKING:
    from kiln._dsl.frontend import Buffer, _Translator


def _int_shape(shape: Any, what: str) -> Tuple[int, ...]:
    dims = tuple(shape) if isinstance(shape, (tuple, list)) else (shape,)
    out = []
    for d in dims:
        if not isinstance(d, numbers.Integral) or isinstance(d, bool) or \
                int(d) <= 0:
            raise KilnSourceError(
                f"{what}: the shape {list(dims)} needs positive integer "
                "dims known while translating")
        out.append(int(d))
    return tuple(out)


def make(t: "_Translator", op: str, a: Dict[str, Any],
         py_name: str) -> "Buffer":
    """The view ``T.reshape(src, shape)`` / ``T.view(src, shape, dtype)``
    assigned to ``py_name``."""
    from kiln._dsl.frontend import Buffer
    from kiln._dsl import views
    from kiln.language import TensorType, to_ir
    src = a["src"]
    if not isinstance(src, Buffer):
        raise KilnSourceError(
            f"T.{op} takes a whole tile or tensor; got {src!r}")
    shape = a["shape"] if a["shape"] is not None else src.shape
    dtype = src.dtype_ir if a.get("dtype") is None else to_ir(a["dtype"])
    if dtype != src.dtype_ir:
        raise KilnSourceError(
            f"T.{op}('{src.py_name}', dtype={dtype}): a view of another "
            f"dtype reinterprets the bytes of a {src.dtype_ir} "
            f"{src.scope}; allocate a {dtype} tile and T.copy (converts "
            "values), or use T.reinterpret on elements")
    if src.scope == "global":
        spec = TensorType(tuple(shape) if isinstance(shape, (tuple, list))
                          else (shape,), dtype, data=views.BufferData(src))
        return views.make(t, spec, py_name)
    root = src.reshape_of or src
    view_shape = _int_shape(shape, f"T.{op}('{src.py_name}')")
    base_shape = _int_shape(root.shape, f"T.{op}('{src.py_name}')")
    if math.prod(view_shape) != math.prod(base_shape):
        raise KilnSourceError(
            f"T.{op}('{src.py_name}', {list(view_shape)}): "
            f"{math.prod(view_shape)} elements, but '{root.py_name}' "
            f"{list(base_shape)} holds {math.prod(base_shape)}")
    ir = t.names.fresh(py_name)
    dims = ", ".join(str(d) for d in view_shape)
    line = t.lines[t.emit(f"alloc {root.scope} {ir}: {dtype}[{dims}]")]
    view = Buffer(ir, root.scope, dtype, view_shape, py_name, line)
    view.reshape_of = root
    t.tile_views.append(view)
    return view


def drop_unused(views: List["Buffer"]) -> None:
    """Blanks the alloc line of each view no tile op took (its elements
    are the base's, and nothing reads the tile)."""
    for v in views:
        if not v.materialised and v.line is not None:
            v.line[1] = ""


class ViewLoop:
    """A T.Parallel over a view's shape run over its base's index space:
    ``base_vars`` are the loop's variables (one per base dim) and
    ``view_vars`` the view indices they stand for, which the loop binds
    to the names the program gave. While the loop is translated an access
    of a view of that base and shape at exactly ``view_vars`` is the base
    element at ``base_vars``, with no index arithmetic."""

    def __init__(self, view: "Buffer", base_vars: List[Any]):
        self.root = view.reshape_of
        self.shape = list(view.shape)
        self.base_vars = base_vars
        self.view_vars = view_indices(view, base_vars)

    def activate(self) -> None:
        _ACTIVE.append(self)

    def deactivate(self) -> None:
        _ACTIVE.remove(self)


_ACTIVE: List[ViewLoop] = []


def loop_view(t: "_Translator", extents: Tuple[Any, ...],
              targets: List[str], body: List[Any]) -> Optional["Buffer"]:
    """The view a T.Parallel over ``extents`` binding ``targets`` runs
    over the base of: a view of that shape (other than its base's) that
    every store of the body stores, at the loop's own indices in order
    (``s_r[n, q, h] = ...``). Other loops keep their index space, where
    stores that leave out a loop variable are judged (reducers, races)."""
    import ast
    from kiln._dsl.frontend import body_stores
    if not all(isinstance(e, int) and not isinstance(e, bool)
               for e in extents):
        return None
    stores = body_stores(body)
    if stores is None:
        return None  # (a tile op: T.atomic_add ...)
    view = None
    for st in stores:
        if isinstance(st, ast.Name):
            continue  # a let, or a T.alloc_var of this iteration
        if not isinstance(st, ast.Subscript) or \
                not isinstance(st.value, ast.Name):
            return None
        v = t._peek(st.value)
        items = st.slice.elts if isinstance(st.slice, ast.Tuple) \
            else [st.slice]
        if not (getattr(v, "reshape_of", None) is not None and
                list(v.shape) == list(extents) and
                list(v.shape) != list(v.reshape_of.shape) and
                [getattr(i, "id", None) for i in items] == targets):
            return None
        if view is not None and v.reshape_of is not view.reshape_of:
            return None
        view = v
    return view


def view_indices(view: "Buffer", base: List[Any]) -> List[Any]:
    """The view's indices of the base tile's element ``base`` (the inverse
    of base_indices)."""
    vshape = list(view.shape)
    bshape = [int(d) for d in view.reshape_of.shape]
    groups = [(b, v) for v, b in _groups(vshape, bshape)]
    return _regroup(base, bshape, vshape, groups)


def _groups(vshape: List[int], bshape: List[int]
            ) -> List[Tuple[Tuple[int, int], Tuple[int, int]]]:
    """The view dims [i, i2) and base dims [j, j2) of each group: runs of
    equal element counts, each side taking at least one dim while it has
    one."""
    out = []
    i = j = 0
    while i < len(vshape) or j < len(bshape):
        i2, j2, pv, pb = i, j, 1, 1
        if i2 < len(vshape):
            pv, i2 = vshape[i2], i2 + 1
        if j2 < len(bshape):
            pb, j2 = bshape[j2], j2 + 1
        while pv != pb:
            if pv < pb and i2 < len(vshape):
                pv, i2 = pv * vshape[i2], i2 + 1
            elif pb < pv and j2 < len(bshape):
                pb, j2 = pb * bshape[j2], j2 + 1
            else:  # (make() checked the counts)
                raise KilnSourceError(
                    f"{vshape} does not regroup into {bshape}")
        out.append(((i, i2), (j, j2)))
        i, j = i2, j2
    return out


def base_indices(view: "Buffer", idx: List[Any]) -> List[Any]:
    """The base tile's indices of the view's element ``idx``."""
    for loop in _ACTIVE:
        if loop.root is view.reshape_of and loop.shape == list(view.shape) \
                and len(idx) == len(loop.view_vars) and \
                all(a is b for a, b in zip(idx, loop.view_vars)):
            return list(loop.base_vars)
    vshape = list(view.shape)
    bshape = [int(d) for d in view.reshape_of.shape]
    return _regroup(idx, vshape, bshape, _groups(vshape, bshape))


def element(buf: "Buffer", idx: List[Any]) -> Tuple["Buffer", List[Any]]:
    """The tile and indices an element access of ``buf`` reaches: the base
    tile's element for a view, ``buf[idx]`` itself otherwise."""
    if buf.reshape_of is None:
        return buf, idx
    return buf.reshape_of, base_indices(buf, idx)


def _regroup(idx: List[Any], src: List[int], dst: List[int],
             groups: List[Tuple[Tuple[int, int], Tuple[int, int]]]
             ) -> List[Any]:
    """Indices ``idx`` over ``src`` as indices over ``dst``, the same
    row-major position: per group (src dims [i, i2), dst dims [j, j2)),
    the row-major offset over the group's src dims split over its dst
    dims."""
    out: List[Any] = []
    for (i, i2), (j, j2) in groups:
        linear: Any = 0
        for k in range(i, i2):
            linear = _add(_mul(linear, src[k]), idx[k])
        stride = math.prod(dst[j:j2])
        for k in range(j, j2):
            stride //= dst[k]
            part = linear if stride == 1 else E.as_expr(linear) // stride
            if k > j:
                part = E.as_expr(part) % dst[k]
            out.append(part)
    return out


def _mul(x: Any, c: int) -> Any:
    if isinstance(x, int) and x == 0:
        return 0
    return x if c == 1 else E.as_expr(x) * c


def _add(x: Any, y: Any) -> Any:
    if isinstance(x, int) and x == 0:
        return y
    return E.as_expr(x) + y


# Which operands of each tile op it reads and writes (a view among them is
# copied in before and out after).
def _roles(op: str, a: Dict[str, Any]) -> Tuple[List[str], List[str]]:
    if op == "copy":
        return ["src"], ["dst"]
    if op == "gemm":
        return (["A", "B"] if a.get("clear_accum") else ["A", "B", "C"],
                ["C"])
    if op in ("fill", "clear"):
        return [], ["buffer"]
    if op.startswith("reduce"):
        return (["buffer"] if a.get("clear", True) else ["buffer", "out"],
                ["out"])
    if op == "cumsum":
        return ["src"], ["dst" if a.get("dst") is not None else "src"]
    if op in ("atomic_add", "atomic_max", "atomic_min"):
        return ["value"], ["dst"]
    if op in ("im2col", "c2d_im2col"):
        return ["img"], ["col"]
    return [], []


def _view_of(value: Any) -> Optional["Buffer"]:
    from kiln._dsl.frontend import Access, Buffer
    buf = value.buffer if isinstance(value, Access) else value
    if isinstance(buf, Buffer) and buf.reshape_of is not None:
        return buf
    return None


def around_op(t: "_Translator", op: str, a: Dict[str, Any]
              ) -> List["Buffer"]:
    """Copies the views ``op`` reads into their tiles; returns the views it
    writes, for `after_op`."""
    if op in ("fill", "clear") and _view_of(a["buffer"]) is a["buffer"]:
        # The whole view is the whole base: fill that.
        a["buffer"] = a["buffer"].reshape_of
        return []
    reads, writes = _roles(op, a)
    for key, value in a.items():
        v = _view_of(value)
        if v is not None and key not in reads and key not in writes:
            raise KilnSourceError(
                f"T.{op} cannot take the reshaped tile '{v.py_name}': "
                f"index its elements, or T.copy it into a tile")
    for key in reads:
        v = _view_of(a.get(key))
        if v is not None:
            _sync(t, v, into_view=True)
    return [v for v in (_view_of(a.get(k)) for k in writes) if v is not None]


def after_op(t: "_Translator", written: List["Buffer"]) -> None:
    for v in written:
        _sync(t, v, into_view=False)


def _sync(t: "_Translator", v: "Buffer", into_view: bool) -> None:
    """``parallel`` over the view's elements copying them between the
    view's tile and the base."""
    v.materialised = True
    root = v.reshape_of
    names = [t.names.fresh(f"{root.py_name}_{k}")
             for k in range(len(root.shape))]
    idx = [E.Expr("name", n, ty="int") for n in names]
    mine = E.load(v.name, view_indices(v, idx), v.dtype_ir)
    base = E.load(root.name, idx, v.dtype_ir)
    dst, src = (mine, base) if into_view else (base, mine)
    extents = ", ".join(str(d) for d in root.shape)
    t.emit(f"parallel ({', '.join(names)}) in ({extents}) {{")
    t.depth += 1
    t.emit(f"{t.r(dst)} = {t.r(src)}")
    t.depth -= 1
    t.emit("}")
