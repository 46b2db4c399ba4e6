"""Tile-op statements: T.alloc_*, copy, gemm, fill, clear, reduce_*, cumsum,
atomic_add, use_swizzle, annotate_layout, assume, finalize_reducer, im2col
(kiln/_dsl/im2col.py).

Operands follow TileLang: a whole buffer, a region with slices
(``A[by * BM:(by + 1) * BM, :]``), or, for ``copy`` and ``atomic_add``, an
element ``A[by * BM, k * BK]`` naming where a region starts; its extents are
the other operand's shape, aligned to the last dims.
"""

from __future__ import annotations

import inspect
import numbers
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from kiln._dsl import expr as E
from kiln._dsl import atomics, im2col, reducer, tile_views
from kiln._dsl.dtypes import itemsize_bits, to_ir
from kiln.errors import KilnSourceError
from kiln.layout import IndexMap, Layout

if TYPE_CHECKING:
    from kiln._dsl.frontend import _Translator

_SCOPES = {"alloc_shared": "shared", "alloc_fragment": "fragment",
           "alloc_local": "local", "alloc_var": "local",
           "alloc_reducer": "fragment"}
# T.alloc_buffer's storage scopes -> the allocation each one is.
_BUFFER_SCOPES = {"shared": "alloc_shared", "shared.dyn": "alloc_shared",
                  "local.fragment": "alloc_fragment", "local": "alloc_local",
                  "local.var": "alloc_var", "global": "alloc_global"}
_POLICIES = {"square": "square", "fullrow": "full_row", "full_row": "full_row",
             "fullcol": "full_col", "full_col": "full_col"}


def _bind(op: str, fn: Callable, args: List[Any],
          kwargs: Dict[str, Any]) -> Dict[str, Any]:
    sig = inspect.signature(fn)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError as e:
        raise KilnSourceError(f"T.{op}{sig}: {e}") from None
    bound.apply_defaults()
    return dict(bound.arguments)


def _shape(value: Any) -> Tuple[Any, ...]:
    dims = tuple(value) if isinstance(value, (tuple, list)) else (value,)
    dims = tuple(int(d) if isinstance(d, numbers.Integral) and
                 not isinstance(d, bool) else d for d in dims)
    for d in dims:
        for n in E.names_in(d) if isinstance(d, E.Expr) else ():
            if isinstance(n, E.Symbol):
                raise KilnSourceError(
                    f"tile dim '{d}' uses the symbolic dim '{n.a}': tiles "
                    "have a compile-time size (constants and tunables)")
            if not isinstance(n, E.Tunable):
                raise KilnSourceError(
                    f"tile dim '{d}' uses the run-time value '{n.a}': tiles "
                    "have a compile-time size (constants and tunables)")
        if isinstance(d, int) and not isinstance(d, bool) and d <= 0:
            raise KilnSourceError(f"tile dim {d} is not positive")
        if not isinstance(d, (int, E.Expr)) or isinstance(d, bool):
            raise KilnSourceError(f"tile dim {d!r} is not an integer")
    return dims


def alloc(t: "_Translator", op: str, fn: Callable, py_name: str,
          args: List[Any], kwargs: Dict[str, Any]) -> None:
    from kiln._dsl.frontend import Buffer, LocalVar
    a = _bind(op, fn, args, kwargs)
    if op == "alloc_buffer":
        op, a = _buffer_allocation(t, a)
    if op == "alloc_global":
        shape = a["shape"]
        t.alloc_global(py_name, tuple(shape) if isinstance(
            shape, (tuple, list)) else (shape,), to_ir(a["dtype"]))
        return
    scope = _SCOPES[op]
    dtype = to_ir(a["dtype"])
    shape = (1,) if op == "alloc_var" else _shape(a["shape"])
    combine = reducer.check_options(a["op"], a["replication"], dtype) \
        if op == "alloc_reducer" else None
    ir = t.names.fresh(py_name)
    dims = ", ".join(t.r(d) for d in shape)
    line = t.lines[t.emit(f"alloc {scope} {ir}: {dtype}[{dims}]")]
    buf = Buffer(ir, scope, dtype, shape, py_name, line)
    buf.reducer = combine
    if op == "alloc_var":
        t.bind(py_name, LocalVar(buf), "var")
        if a["init"] is not None:
            t.emit(f"{ir}[0] = {t.r(a['init'])}")
    else:
        t.bind(py_name, buf, "buffer")


def _buffer_allocation(t: "_Translator", a: Dict[str, Any]
                       ) -> Tuple[str, Dict[str, Any]]:
    """``T.alloc_buffer``'s arguments as the T.alloc_* its scope names,
    with that op's arguments."""
    scope = a["scope"]
    if not isinstance(scope, str) or scope not in _BUFFER_SCOPES:
        known = ", ".join(repr(k) for k in _BUFFER_SCOPES)
        raise KilnSourceError(
            f"T.alloc_buffer: scope {scope!r} is not supported; Kiln "
            f"allocates the scopes {known} (barriers, MMA descriptors and "
            "tensor memory are the compiler's to allocate)")
    for name, why in (
            ("data", "a buffer over another buffer's storage (a view of a "
                     "global tensor is T.Tensor(shape, dtype, x.data))"),
            ("strides", "tiles are dense; the compiler lays them out"),
            ("elem_offset", "tiles are dense; the compiler lays them out"),
            ("axis_separators", "tiles are dense; the compiler lays them "
                                "out")):
        if a[name] is not None:
            raise KilnSourceError(
                f"T.alloc_buffer({name}=...) is not supported: {why}")
    if a["buffer_type"] != "default":
        raise KilnSourceError(
            f"T.alloc_buffer(buffer_type={a['buffer_type']!r}) is not "
            "supported; only 'default'")
    op = _BUFFER_SCOPES[scope]
    if op == "alloc_global" and t.in_kernel:
        raise KilnSourceError(
            f"T.alloc_buffer with scope {scope!r} (TVM's default scope) "
            "allocates a tensor the prim_func's kernels share: call it "
            "outside `with T.Kernel(...)`, or give a tile's scope "
            "('shared', 'local.fragment', 'local')")
    if op == "alloc_var":
        shape = _shape(a["shape"])
        if not all(_is_unit(d) for d in shape):
            dims = ", ".join(str(d) for d in shape)
            raise KilnSourceError(
                f"T.alloc_buffer with scope 'local.var' holds one element; "
                f"got shape [{dims}] (scope 'local' allocates a per-thread "
                "array)")
        return op, {"dtype": a["dtype"], "init": None}
    return op, {"shape": a["shape"], "dtype": a["dtype"]}


def _operand(value: Any, what: str):
    from kiln._dsl.frontend import Access, Buffer, LocalVar
    if isinstance(value, Buffer):
        return value, None
    if isinstance(value, LocalVar):
        return value.buffer, None
    if isinstance(value, Access):
        return value.buffer, value.items
    desc = f"'{value}'" if isinstance(value, E.Expr) else repr(value)
    raise KilnSourceError(
        f"{what} expects a tile, a tensor or a region of one; got {desc}")


def _is_unit(d: Any) -> bool:
    return isinstance(d, numbers.Integral) and d == 1


def corner_extents(buf: Any, other: Optional[Tuple[Any, ...]],
                   what: str) -> Tuple[int, List[Any]]:
    """An all-index access of ``buf`` naming the corner of a region shaped
    like ``other``: how many leading dims stay indices, and the extents of
    the rest (``other`` less leading unit dims that ``buf`` lacks)."""
    if other is None:
        raise KilnSourceError(
            f"{what}: '{buf.py_name}[...]' names one element; give a "
            "region with slices (a:b or :)")
    rank = len(buf.shape)
    ext = list(other)
    while len(ext) > rank and _is_unit(ext[0]):
        ext.pop(0)
    if len(ext) > rank:
        raise KilnSourceError(f"{what}: a {len(ext)}-d tile does not fit the "
                              f"{rank}-d '{buf.py_name}'")
    return rank - len(ext), ext


def region(t: "_Translator", value: Any, what: str,
           other: Optional[Tuple[Any, ...]] = None) -> Tuple[str, List[Any]]:
    """The IR text and shape of an operand. An all-index access takes its
    extents from ``other`` (the other operand's shape)."""
    buf, items = _operand(value, what)
    if items is None:
        return buf.name, list(buf.shape)
    rank = len(buf.shape)
    if len(items) != rank:
        raise KilnSourceError(f"{what}: '{buf.py_name}' has {rank} dims; "
                              f"got {len(items)} indices")
    if all(it[0] == "idx" for it in items):
        lead, ext = corner_extents(buf, other, what)
        parts = [t.r(it[1]) for it in items[:lead]]
        parts += [f"{t.r(it[1])}:+{t.r(e)}"
                  for it, e in zip(items[lead:], ext)]
        return f"{buf.name}[{', '.join(parts)}]", ext
    parts, shape = [], []
    for it, dim in zip(items, buf.shape):
        if it[0] == "idx":
            parts.append(t.r(it[1]))
            continue
        lo, hi = it[1], it[2]
        if lo is None and hi is None:
            parts.append(":")
            shape.append(dim)
            continue
        lo = 0 if lo is None else lo
        hi = dim if hi is None else hi
        extent = E.difference(hi, lo)
        if not isinstance(extent, int):
            # Bounds held in lets (`kv_start:kv_end`): their difference
            # through the lets' values may be a constant.
            through = E.difference(E.substitute(hi, t.let_values),
                                   E.substitute(lo, t.let_values))
            if isinstance(through, int):
                extent = through
        if isinstance(extent, int) and extent <= 0:
            raise KilnSourceError(f"{what}: the slice {lo}:{hi} of "
                                  f"'{buf.py_name}' is empty")
        parts.append(f"{t.r(lo)}:+{t.r(extent)}")
        shape.append(extent)
    return f"{buf.name}[{', '.join(parts)}]", shape


def _full_shape(value: Any, what: str) -> Optional[Tuple[Any, ...]]:
    """The shape of an operand that is not a lone element, else None."""
    buf, items = _operand(value, what)
    if items is None:
        return tuple(buf.shape)
    if all(it[0] == "idx" for it in items):
        return None
    shape = []
    for it, dim in zip(items, buf.shape):
        if it[0] == "slice":
            lo, hi = it[1], it[2]
            if lo is None and hi is None:
                shape.append(dim)
            else:
                shape.append(E.difference(dim if hi is None else hi,
                                          0 if lo is None else lo))
    return tuple(shape)


def _check_same_shape(what: str, a: List[Any], b: List[Any]) -> None:
    sa = [d for d in a if not _is_unit(d)]
    sb = [d for d in b if not _is_unit(d)]
    bad = len(sa) != len(sb) or any(
        isinstance(x, int) and isinstance(y, int) and x != y
        for x, y in zip(sa, sb))
    if bad:
        def fmt(s: List[Any]) -> str:
            return "[" + ", ".join(E.render_value(d) for d in s) + "]"
        raise KilnSourceError(
            f"{what}: source shape {fmt(a)} does not match destination "
            f"shape {fmt(b)}")


def _pair(t: "_Translator", op: str, first: Any, second: Any,
          names: Tuple[str, str]) -> Tuple[Tuple[str, List[Any]],
                                           Tuple[str, List[Any]]]:
    """Regions of two operands where either may be a lone element."""
    s1 = _full_shape(first, f"T.{op} {names[0]}")
    s2 = _full_shape(second, f"T.{op} {names[1]}")
    if s1 is None and s2 is None:
        raise KilnSourceError(
            f"T.{op}: {names[0]} and {names[1]} both name single elements; "
            "one must be a tile or a region with slices")
    r1 = region(t, first, f"T.{op} {names[0]}", s2)
    r2 = region(t, second, f"T.{op} {names[1]}", r1[1] if s2 is None else None)
    return r1, r2


def _bool(value: Any, what: str) -> bool:
    if isinstance(value, E.Expr):
        raise KilnSourceError(f"{what} must be a Python bool, not a kernel "
                              "value")
    return bool(value)


def _int(value: Any, what: str) -> int:
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise KilnSourceError(f"{what} must be a Python int; got {value!r}")
    return int(value)


def run(t: "_Translator", op: str, fn: Callable, args: List[Any],
        kwargs: Dict[str, Any]) -> None:
    a = _bind(op, fn, args, kwargs)
    handler = _HANDLERS.get(op)
    if handler is None:
        raise KilnSourceError(f"T.{op} is not supported")
    written = tile_views.around_op(t, op, a)
    handler(t, a)
    tile_views.after_op(t, written)


bind_args = _bind


def _clip(value: Any, shape: List[Any], common: List[int]) -> Any:
    """``value`` (a tile or a region of one) cut to its first ``common``
    extents along its dims of more than one element."""
    from kiln._dsl.frontend import Access
    buf, items = _operand(value, "")
    if items is None:
        items = [("slice", None, None)] * len(buf.shape)
    out, free, k = [], 0, 0
    for it in items:
        if it[0] == "idx":
            out.append(it)
            continue
        extent = shape[free]
        free += 1
        if _is_unit(extent):
            out.append(it)
            continue
        lo = 0 if it[1] is None else it[1]
        out.append(("slice", lo, lo + common[k]))
        k += 1
    return Access(buf, out)


def _copy(t: "_Translator", a: Dict[str, Any]) -> None:
    src_v, dst_v = a["src"], a["dst"]
    (src, ssh), (dst, dsh) = _pair(t, "copy", src_v, dst_v,
                                   ("source", "destination"))
    sa = [d for d in ssh if not _is_unit(d)]
    sb = [d for d in dsh if not _is_unit(d)]
    if len(sa) == len(sb) and sa != sb and \
            all(isinstance(d, int) for d in sa + sb) and \
            _full_shape(src_v, "") is not None and \
            _full_shape(dst_v, "") is not None:
        # Unequal constant extents of one rank (a ragged tile: TileLang
        # copies valid_block_H rows into a block_H tile): the leading box
        # both hold, from each region's start.
        common = [min(x, y) for x, y in zip(sa, sb)]
        src, ssh = region(t, _clip(src_v, ssh, common), "T.copy source")
        dst, dsh = region(t, _clip(dst_v, dsh, common), "T.copy destination")
    _check_same_shape("T.copy", ssh, dsh)
    sbuf, _ = _operand(a["src"], "")
    dbuf, _ = _operand(a["dst"], "")
    if sbuf.scope == dbuf.scope == "global":
        _copy_global_to_global(t, src, dst, sbuf, ssh)
        return
    t.emit(f"copy {src} -> {dst}")


def _copy_global_to_global(t: "_Translator", src: str, dst: str,
                           sbuf: Any, shape: List[Any]) -> None:
    """TileLang's tensor-to-tensor T.copy (a cast or a re-layout pass):
    staged through a fragment of the region's shape in the source type,
    converted on the store. The region must have a compile-time shape."""
    box = [d for d in shape if not _is_unit(d)] or [1]
    for d in box:
        if not isinstance(d, int) and not (
                isinstance(d, E.Expr) and all(isinstance(n, E.Tunable)
                                              for n in E.names_in(d))):
            raise KilnSourceError(
                f"T.copy between two global tensors stages through a tile, "
                f"so its region needs a compile-time shape; extent '{d}' is "
                "not one")
    tmp = t.names.fresh("staged")
    dims = ", ".join(t.r(d) for d in box)
    t.emit(f"alloc fragment {tmp}: {sbuf.dtype_ir}[{dims}]")
    t.emit(f"copy {src} -> {tmp}")
    t.emit(f"copy {tmp} -> {dst}")


def _gemm(t: "_Translator", a: Dict[str, Any]) -> None:
    if _int(a["k_pack"], "k_pack") != 1:
        raise KilnSourceError("T.gemm(k_pack=) other than 1 is not supported")
    if a["mbar"] is not None:
        raise KilnSourceError("T.gemm(mbar=) is not supported")
    texts = []
    for key in ("A", "B", "C"):
        text, shape = region(t, a[key], f"T.gemm {key}")
        if len([d for d in shape if not _is_unit(d)]) > 2 or len(shape) < 2:
            raise KilnSourceError(f"T.gemm {key} must be a 2-d tile or "
                                  f"region; its shape has {len(shape)} dims")
        texts.append(text)
    line = f"gemm {texts[0]}, {texts[1]} -> {texts[2]}"
    if _bool(a["transpose_A"], "transpose_A"):
        line += " transpose_a"
    if _bool(a["transpose_B"], "transpose_B"):
        line += " transpose_b"
    if _bool(a["clear_accum"], "clear_accum"):
        line += " clear_accum"
    policy = a["policy"]
    key = str(getattr(policy, "value", policy)).lower()
    if key not in _POLICIES:
        raise KilnSourceError(f"T.gemm policy {policy!r}: expected "
                              "T.GemmWarpPolicy.Square, FullRow or FullCol")
    if _POLICIES[key] != "square":
        line += f" policy={_POLICIES[key]}"
    t.emit(line)


def _fill(t: "_Translator", a: Dict[str, Any]) -> None:
    text, _ = region(t, a["buffer"], "T.fill")
    value = a["value"]
    from kiln._dsl.frontend import _scalar
    t.emit(f"fill {text}, {t.r(_scalar(value))}")


def _clear(t: "_Translator", a: Dict[str, Any]) -> None:
    text, _ = region(t, a["buffer"], "T.clear")
    t.emit(f"clear {text}")


def _reduce_op(kind: str) -> Callable:
    def handler(t: "_Translator", a: Dict[str, Any]) -> None:
        _reduce(t, kind, a)
    return handler


def _reduce(t: "_Translator", kind: str, a: Dict[str, Any]) -> None:
    what = f"T.reduce_{kind}"
    src, shape = region(t, a["buffer"], what + " source")
    dst, _ = region(t, a["out"], what + " destination")
    dim = _int(a["dim"], "dim")
    rank = len(shape)
    if not -rank <= dim < rank:
        raise KilnSourceError(f"{what}: dim={dim} is out of range for a "
                              f"{rank}-d source")
    line = f"reduce.{kind} {src} -> {dst}, dim={dim % rank}"
    if not _bool(a["clear"], "clear"):
        line += ", clear=false"
    t.emit(line)


def _reduce_generic(t: "_Translator", a: Dict[str, Any]) -> None:
    kind = str(a.pop("reduce_type")).lower()
    if kind not in ("sum", "max", "min", "absmax"):
        raise KilnSourceError(f"T.reduce type {kind!r}: expected sum, max, "
                              "min or absmax")
    _reduce(t, kind, a)


def _cumsum(t: "_Translator", a: Dict[str, Any]) -> None:
    src, shape = region(t, a["src"], "T.cumsum source")
    dst_value = a["src"] if a["dst"] is None else a["dst"]
    dst, _ = region(t, dst_value, "T.cumsum destination")
    dim = _int(a["dim"], "dim")
    rank = len(shape)
    if not -rank <= dim < rank:
        raise KilnSourceError(f"T.cumsum: dim={dim} is out of range for a "
                              f"{rank}-d source")
    line = f"cumsum {src} -> {dst}, dim={dim % rank}"
    if _bool(a["reverse"], "reverse"):
        line += ", reverse=true"
    t.emit(line)


def _atomic_add(t: "_Translator", a: Dict[str, Any]) -> None:
    if a["return_prev"]:
        raise KilnSourceError("T.atomic_add(return_prev=True) is not "
                              "supported")
    value = a["value"]
    from kiln._dsl.frontend import Access, Buffer
    if not isinstance(value, (Access, Buffer)) or \
            (isinstance(value, Access) and value.all_indices()):
        raise KilnSourceError(
            "T.atomic_add outside T.Parallel adds a tile (or a region of "
            "one) into a global region; add one element inside T.Parallel")
    (dst, dsh), (src, ssh) = _pair(t, "atomic_add", a["dst"], value,
                                   ("destination", "value"))
    dbuf, _ = _operand(a["dst"], "")
    if dbuf.scope != "global":
        raise KilnSourceError("T.atomic_add writes into a global tensor; "
                              f"'{dbuf.py_name}' is a {dbuf.scope} tile")
    _check_same_shape("T.atomic_add", ssh, dsh)
    t.emit(f"atomic_add {dst}, {src}")


def _use_swizzle(t: "_Translator", a: Dict[str, Any]) -> None:
    if not _bool(a["enable"], "enable"):
        return
    if t.depth != 1:
        raise KilnSourceError("T.use_swizzle goes at the top level of the "
                              "T.Kernel body")
    if t.rasterized:
        raise KilnSourceError("T.use_swizzle may appear once per kernel")
    order = a["order"]
    if order not in ("row", "column"):
        raise KilnSourceError(f"T.use_swizzle order={order!r}: expected "
                              "'row' or 'column'")
    suffix = ", order=column" if order == "column" else ""
    # TileLang's swizzle remaps the block indices of the whole kernel,
    # wherever the call stands: the rasterize goes first in the body (the
    # translator puts it there), before any let that reads an index.
    t.rasterized = [1, f"rasterize(panel={t.r(a['panel_size'])}{suffix})",
                    getattr(t.node, "lineno", 0)]


def _swizzle_bytes(buf: Any) -> int:
    last = buf.shape[-1]
    candidates = last.b if isinstance(last, E.Tunable) else (last,)
    best = 128
    for c in candidates:
        if not isinstance(c, int):
            raise KilnSourceError(
                f"cannot choose a swizzle for '{buf.py_name}' (its last dim "
                f"'{E.render_value(last)}' is not constant): pass "
                "make_swizzled_layout(tile, bytes=...)")
        row = c * itemsize_bits(buf.dtype_ir) // 8
        fit = next((b for b in (128, 64, 32) if row % b == 0), None)
        if fit is None:
            raise KilnSourceError(
                f"'{buf.py_name}' rows are {row} bytes: too narrow to swizzle")
        best = min(best, fit)
    return best


def _annotate_layout(t: "_Translator", a: Dict[str, Any]) -> None:
    from kiln._dsl.frontend import Buffer
    layout_map = a["layout_map"]
    if not isinstance(layout_map, dict):
        raise KilnSourceError("T.annotate_layout takes a dict "
                              "{tile: layout}")
    for buf, layout in layout_map.items():
        if (isinstance(buf, Buffer) and buf.scope == "global"
                and isinstance(layout, IndexMap)):
            _check_index_map(buf, layout)
            continue
        if not isinstance(buf, Buffer) or buf.line is None:
            raise KilnSourceError("T.annotate_layout keys are tiles made by "
                                  "T.alloc_shared")
        if buf.scope != "shared":
            raise KilnSourceError(
                f"'{buf.py_name}' is a {buf.scope} tile: only shared tiles "
                "take a layout (fragment layouts are inferred)")
        if isinstance(layout, IndexMap):
            raise KilnSourceError(
                f"'{buf.py_name}' is a {buf.scope} tile: an index map "
                "(T.Layout) applies to global tensors only; tiles take "
                "make_swizzled_layout, make_padded_layout or "
                "make_row_major_layout")
        if not isinstance(layout, Layout):
            raise KilnSourceError(
                f"the layout of '{buf.py_name}' must come from "
                "kiln.layout (make_swizzled_layout, make_padded_layout, "
                "make_row_major_layout)")
        if layout.kind == "swizzle":
            spec = f"swizzle({layout.value or _swizzle_bytes(buf)})"
        elif layout.kind == "padded":
            spec = f"padded({_int(layout.value, 'pad')})"
        else:
            spec = "row_major"
        line = buf.line
        line[1] = line[1].split(" layout ")[0] + f" layout {spec}"


def _check_index_map(buf: Any, layout: "IndexMap") -> None:
    """A global tensor's index map keeps the tensor logical (IndexMap):
    only its shape and arity are checked."""
    rank = len(buf.shape)
    if len(layout.shape) != rank:
        raise KilnSourceError(
            f"T.Layout for '{buf.py_name}' has {len(layout.shape)} "
            f"dimensions; the tensor has {rank}")
    if layout.arity is not None and layout.arity != rank:
        raise KilnSourceError(
            f"T.Layout for '{buf.py_name}': its function takes "
            f"{layout.arity} indices; the tensor has {rank} dimensions")


def _assume(t: "_Translator", a: Dict[str, Any]) -> None:
    from kiln._dsl.frontend import _scalar
    cond = E.as_expr(_scalar(a["cond"]))
    if cond.ty != "bool":
        raise KilnSourceError(f"T.assume needs a condition; got '{cond}'")
    t.assumes.append(t.r(cond))


_HANDLERS: Dict[str, Callable] = {
    "copy": _copy, "gemm": _gemm, "fill": _fill, "clear": _clear,
    "reduce": _reduce_generic, "reduce_max": _reduce_op("max"),
    "reduce_min": _reduce_op("min"), "reduce_sum": _reduce_op("sum"),
    "reduce_absmax": _reduce_op("absmax"), "cumsum": _cumsum,
    "atomic_add": _atomic_add, "use_swizzle": _use_swizzle,
    "atomic_max": lambda t, a: atomics.region(t, "atomic_max", a),
    "atomic_min": lambda t, a: atomics.region(t, "atomic_min", a),
    "annotate_layout": _annotate_layout, "assume": _assume,
    "finalize_reducer": reducer.finalize,
    "im2col": im2col.lower, "c2d_im2col": im2col.lower,
}
