"""``T.im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad)``:
one [block_M, block_K] tile of the im2col matrix of an NHWC image, the
A operand of a convolution written as a GEMM with the kernel flattened to
[KH * KW * C, F].

Row ``m`` of the tile is output pixel ``p = nhw_step * block_M + m`` of the
N * OH * OW pixels (``p = (n * OH + oh) * OW + ow``); column ``k`` is
``q = c_step * block_K + k`` of the KH * KW * C patch elements
(``q = (kh * KW + kw) * C + c``, TileLang's order: its SIMT lowering reads
channel ``q % C``, kernel column ``q / C % KW``, kernel row ``q / (KW * C)``).
The element is ``img[n, oh * stride + kh * dilation - pad, ow * stride +
kw * dilation - pad, c]``, zero in the padding and past the last pixel or
patch element. The kernel is square (KH = KW = ``kernel``), as TileLang's.

Lowered to one ``parallel`` over the tile: lets for the coordinates, and a
``select`` that zeroes what lies outside. OH and OW are constants, or lets
before the loop when the image's dims are symbols. Without padding,
``p < N * OH * OW`` and ``q < KH * KW * C`` keep every read inside the
image (OH's formula bounds ``oh * stride + kh * dilation``), so the select
tests only those. (TileLang's lowering reads past the last patch element
without a test; its example multiplies those columns by the zero rows its
kernel copy fills in, so Kiln's zeros give the same result.)
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, Any, Dict, List, Tuple

from kiln._dsl import expr as E
from kiln.errors import KilnSourceError

if TYPE_CHECKING:
    from kiln._dsl.frontend import _Translator


def _param(a: Dict[str, Any], key: str, least: int) -> int:
    v = a[key]
    if not isinstance(v, numbers.Integral) or isinstance(v, bool) or \
            v < least:
        raise KilnSourceError(
            f"T.im2col {key}={v!r}: expected a Python int >= {least}")
    return int(v)


def _col_region(col: Any) -> Tuple[Any, List[Tuple[Any, Any]]]:
    """The column tile and, per dim, (start, extent): the last two dims
    are the tile's [block_M, block_K], any before them one element."""
    from kiln._dsl.frontend import Access, Buffer
    if isinstance(col, Buffer):
        buf, box = col, [(0, d) for d in col.shape]
    elif isinstance(col, Access):
        buf, box = col.buffer, []
        if len(col.items) != len(buf.shape):
            raise KilnSourceError(
                f"T.im2col col: '{buf.py_name}' has {len(buf.shape)} dims; "
                f"got {len(col.items)} indices")
        for it, dim in zip(col.items, buf.shape):
            if it[0] == "idx":
                box.append((it[1], 1))
                continue
            lo = 0 if it[1] is None else it[1]
            hi = dim if it[2] is None else it[2]
            box.append((lo, E.difference(hi, lo)))
    else:
        raise KilnSourceError(
            f"T.im2col col expects a shared or fragment tile; got {col!r}")
    if buf.scope not in ("shared", "fragment"):
        raise KilnSourceError(
            f"T.im2col writes a tile; '{buf.py_name}' is a {buf.scope} "
            "tensor")
    if len(box) < 2 or any(not (isinstance(e, int) and e == 1)
                           for _, e in box[:-2]):
        raise KilnSourceError(
            f"T.im2col col: '{buf.py_name}' must be a [block_M, block_K] "
            "tile (or a region of one with that shape)")
    return buf, box


def _mul(x: Any, k: int) -> Any:
    return x if k == 1 else x * k


def _sub(x: Any, k: int) -> Any:
    return x if k == 0 else x - k if k > 0 else x + (-k)


def _add(lo: Any, v: E.Expr) -> Any:
    return v if isinstance(lo, int) and lo == 0 else E.binop("+", lo, v)


def _out(size: Any, reach: int, stride: int) -> Any:
    """Output positions along an image dim of ``size``: ``(size - reach) /
    stride + 1``, the constants folded (``size`` may be a symbol)."""
    if stride == 1:
        return _sub(size, reach - 1)
    return _sub(size, reach) // stride + 1


def lower(t: "_Translator", a: Dict[str, Any]) -> None:
    from kiln._dsl.frontend import Buffer, _scalar
    img = a["img"]
    if not (isinstance(img, Buffer) and img.scope == "global"
            and len(img.shape) == 4):
        raise KilnSourceError(
            "T.im2col img expects a global [N, H, W, C] tensor; got "
            f"{getattr(img, 'py_name', repr(img))}")
    col, box = _col_region(a["col"])
    kernel = _param(a, "kernel", 1)
    stride = _param(a, "stride", 1)
    dilation = _param(a, "dilation", 1)
    pad = _param(a, "pad", 0)
    n_dim, h_dim, w_dim, c_dim = img.shape

    def let(base: str, value: Any) -> Any:
        if isinstance(value, int) or value.kind == "name":
            return value
        name = t.names.fresh(base)
        t.emit(f"let {name} = {t.r(value)}")
        return E.Expr("name", name, ty=E.as_expr(value).ty)

    # OH = (H + 2 * pad - dilation * (kernel - 1) - 1) / stride + 1.
    reach = dilation * (kernel - 1) + 1 - 2 * pad  # rows a pixel spans
    oh_dim = let("out_h", _out(h_dim, reach, stride))
    ow_dim = let("out_w", _out(w_dim, reach, stride))
    for what, d in (("OH", oh_dim), ("OW", ow_dim)):
        if isinstance(d, int) and d <= 0:
            raise KilnSourceError(
                f"T.im2col: the {kernel}x{kernel} kernel (dilation "
                f"{dilation}) does not fit the padded image: {what} = {d}")
    block_m, block_k = box[-2][1], box[-1][1]
    i, j = t.names.fresh("i"), t.names.fresh("j")
    t.emit(f"parallel ({i}, {j}) in ({t.r(block_m)}, {t.r(block_k)}) {{")
    t.depth += 1
    try:
        iv, jv = E.Expr("name", i, ty="int"), E.Expr("name", j, ty="int")
        m = let("pixel", _add(_scalar(a["nhw_step"]) * block_m, iv))
        q = let("patch", _add(_scalar(a["c_step"]) * block_k, jv))
        n = let("n", m // (oh_dim * ow_dim))
        h = let("h", _sub(_mul((m // ow_dim) % oh_dim, stride)
                          + _mul(q // (kernel * c_dim), dilation), pad))
        w = let("w", _sub(_mul(m % ow_dim, stride)
                          + _mul(q // c_dim % kernel, dilation), pad))
        c = let("c", q % c_dim)
        inside = E.logical("&&", E.compare("<", m, n_dim * oh_dim * ow_dim),
                           E.compare("<", q, kernel * kernel * c_dim))
        if pad:
            for cond in (E.compare(">=", h, 0), E.compare("<", h, h_dim),
                         E.compare(">=", w, 0), E.compare("<", w, w_dim)):
                inside = E.logical("&&", inside, cond)
        value: Any = E.load(img.name, [n, h, w, c], img.dtype_ir)
        if img.dtype_ir != col.dtype_ir:
            value = E.cast(col.dtype_ir, value)
        value = E.call("select", [inside, value, 0])
        index = [lo for lo, _ in box[:-2]] + [
            _add(box[-2][0], iv), _add(box[-1][0], jv)]
        t.emit(f"{t.r(E.load(col.name, index, col.dtype_ir))} = "
               f"{t.r(value)}")
    finally:
        t.depth -= 1
    t.emit("}")
