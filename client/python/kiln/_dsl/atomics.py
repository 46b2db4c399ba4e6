"""Element atomics: ``T.atomic_add`` / ``T.atomic_max`` / ``T.atomic_min``.

Inside T.Parallel each names one element of a global tensor, a shared tile
or a fragment and becomes the tile IR's store ``Out[i, j] += v`` (``max=``,
``min=``): atomic into a tensor, and into a shared tile or fragment
wherever two iterations may update one element (a histogram's
``h[key] += 1``; the compiler's guard-accesses pass decides, tile-ir.md
§8).
Outside T.Parallel, ``T.atomic_max`` and ``T.atomic_min`` combine a tile (or
a region of one) into a global region: a T.Parallel over the tile's shape
of element stores, so elements past the tensor's end are skipped as in
``atomic_add`` (tile-ir.md §8). ``T.atomic_add``'s region form is the IR's
own ``atomic_add`` op (tileops.py).
"""

from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional

from kiln._dsl import expr as E
from kiln.errors import KilnSourceError

if TYPE_CHECKING:
    from kiln._dsl.frontend import _Translator

# The IR's store operator for each call.
STORE_OPS = {"atomic_add": "+=", "atomic_max": "max=", "atomic_min": "min="}


def _is_unit(d: Any) -> bool:
    return isinstance(d, int) and not isinstance(d, bool) and d == 1


def element(t: "_Translator", op: str, fn: Callable, args: List[Any],
            kwargs: Dict[str, Any]) -> None:
    """``T.atomic_max(Out[i, j], v)`` inside T.Parallel; ``Out`` a global
    tensor, a shared tile or a fragment."""
    from kiln._dsl.frontend import Access, _scalar
    from kiln._dsl.tileops import _bind
    a = _bind(op, fn, args, kwargs)
    if a["return_prev"]:
        raise KilnSourceError(f"T.{op}(return_prev=True) is not supported: "
                              "the element form returns nothing")
    dst = a["dst"]
    if not isinstance(dst, Access) or not dst.all_indices() or \
            len(dst.items) != len(dst.buffer.shape):
        raise KilnSourceError(
            f"T.{op} inside T.Parallel updates one element: "
            f"T.{op}(Out[i, j], value)")
    if dst.buffer.scope not in ("global", "shared", "fragment"):
        raise KilnSourceError(
            f"T.{op} inside T.Parallel updates an element of a global "
            f"tensor, a shared tile or a fragment; '{dst.buffer.py_name}' "
            f"is a {dst.buffer.scope} tile, whose elements belong to one "
            "thread each")
    value = _scalar(a["value"])
    from kiln._dsl.tile_views import element
    buf, idx = element(dst.buffer, [it[1] for it in dst.items])
    index = ", ".join(t.r(i) for i in idx)
    t.emit(f"{buf.name}[{index}] {STORE_OPS[op]} {t.r(value)}")


def _check_global(op: str, buf: Any) -> None:
    if buf.scope != "global":
        raise KilnSourceError(
            f"T.{op} writes into a global tensor; '{buf.py_name}' is a "
            f"{buf.scope} tile")


def _dims(value: Any, what: str, other: Optional[List[Any]]):
    """Per dim of an operand: ("idx", index) or ("range", start, extent)."""
    from kiln._dsl.tileops import _operand, corner_extents
    buf, items = _operand(value, what)
    shape = list(buf.shape)
    if items is None:
        return buf, [("range", 0, d) for d in shape]
    if len(items) != len(shape):
        raise KilnSourceError(f"{what}: '{buf.py_name}' has {len(shape)} "
                              f"dims; got {len(items)} indices")
    if all(it[0] == "idx" for it in items):
        # One element names the corner of a region of the other's shape.
        lead, ext = corner_extents(buf, other, what)
        return buf, ([("idx", it[1]) for it in items[:lead]] +
                     [("range", it[1], e) for it, e in zip(items[lead:], ext)])
    dims = []
    for it, dim in zip(items, shape):
        if it[0] == "idx":
            dims.append(("idx", it[1]))
            continue
        lo = 0 if it[1] is None else it[1]
        hi = dim if it[2] is None else it[2]
        dims.append(("range", lo, E.difference(hi, lo)))
    return buf, dims


def region(t: "_Translator", op: str, a: Dict[str, Any]) -> None:
    """``T.atomic_max(Out[r0:r1, :], tile)`` outside T.Parallel (``a``: the
    call's bound arguments)."""
    from kiln._dsl.frontend import Access, Buffer
    from kiln._dsl.tileops import _check_same_shape, _full_shape
    if a["return_prev"]:
        raise KilnSourceError(f"T.{op}(return_prev=True) is not supported")
    value = a["value"]
    if not isinstance(value, (Access, Buffer)) or \
            (isinstance(value, Access) and value.all_indices()):
        raise KilnSourceError(
            f"T.{op} outside T.Parallel combines a tile (or a region of "
            "one) into a global region; update one element inside "
            "T.Parallel")
    src_shape = _full_shape(value, f"T.{op} value")
    dst_shape = _full_shape(a["dst"], f"T.{op} destination")
    src_buf, src = _dims(value, f"T.{op} value", dst_shape)
    dst_buf, dst = _dims(a["dst"], f"T.{op} destination", src_shape)
    _check_global(op, dst_buf)
    src_ext = [d[2] for d in src if d[0] == "range"]
    dst_ext = [d[2] for d in dst if d[0] == "range"]
    _check_same_shape(f"T.{op}", src_ext, dst_ext)
    # One loop variable per non-unit extent, shared by both operands in
    # order; unit extents take their start.
    loop_ext = [e for e in src_ext if not _is_unit(e)]
    names = [t.names.fresh("e") for _ in loop_ext]

    def indices(dims: List[Any]) -> str:
        out, k = [], 0
        for d in dims:
            if d[0] == "idx":
                out.append(t.r(d[1]))
            elif _is_unit(d[2]):
                out.append(t.r(d[1]))
            else:
                var = E.Expr("name", names[k], ty="int")
                out.append(t.r(var if isinstance(d[1], int) and d[1] == 0
                               else E.binop("+", d[1], var)))
                k += 1
        return ", ".join(out)

    store = (f"{dst_buf.name}[{indices(dst)}] {STORE_OPS[op]} "
             f"{src_buf.name}[{indices(src)}]")
    if not loop_ext:
        # A one-element tile: a T.Parallel of one iteration.
        one = t.names.fresh("e")
        t.emit(f"parallel ({one}) in (1) {{")
    else:
        t.emit(f"parallel ({', '.join(names)}) in "
               f"({', '.join(t.r(e) for e in loop_ext)}) {{")
    t.depth += 1
    try:
        t.emit(store)
    finally:
        t.depth -= 1
    t.emit("}")
