"""The kernel language, imported as ``import kiln.language as T``.

It mirrors TileLang's ``tilelang.language``: the same names, argument order
and defaults. A ``@T.prim_func`` body is not run: its Python AST is
translated into tile IR (kiln/_dsl/frontend.py). The tile ops below therefore
only mark what the translator recognises; called from plain Python they raise.
Scalar helpers (``T.ceildiv``, ``T.max``, ``T.exp``...) also work on Python
numbers, folding to a number.
"""

from __future__ import annotations

import builtins as _builtins
import enum
import math as _math
from typing import Any, Callable, List, Optional, Sequence, Tuple

from kiln._dsl import bitcast as _bitcast
from kiln._dsl import expr as _expr
from kiln._dsl import views as _views
from kiln._dsl.dtypes import DType, to_ir
from kiln._dsl.expr import Expr, Symbol
from kiln.errors import KilnSourceError

# --- dtypes ---------------------------------------------------------------

bool = DType("bool", "bool")  # noqa: A001 (TileLang spells it T.bool)
int8 = DType("i8", "int8")
uint8 = DType("u8", "uint8")
int16 = DType("i16", "int16")
uint16 = DType("u16", "uint16")  # kernel values only (kiln/_dsl/u16.py)
int32 = DType("i32", "int32")
int64 = DType("i64", "int64")
uint32 = DType("u32", "uint32")
int4 = DType("i4", "int4")
uint4 = DType("u4", "uint4")
float16 = DType("f16", "float16")
bfloat16 = DType("bf16", "bfloat16")
float32 = DType("f32", "float32")
float64 = DType("f64", "float64")
float8_e4m3 = DType("f8e4m3", "float8_e4m3")
float8_e5m2 = DType("f8e5m2", "float8_e5m2")
float8_e4m3fn = float8_e4m3
half = float16
float = float32  # noqa: A001
double = float64
# TileLang's C-style names of the same types (``T.alloc_var(T.int)``,
# ``source_format: Literal[T.int, T.uint]``): T.int is T.int32, and so on.
# (``from kiln.language import *`` leaves Python's ``int`` alone.)
short = int16
int = int32  # noqa: A001
uint = uint32
long = int64
# TensorFloat-32, as TileLang's examples declare fp32 GEMM operands that
# tensor cores read at tf32 precision. Kiln stores and computes it as
# float32 (its tiles and tensors are f32, its GEMMs multiply in f32), so a
# result is at least as precise as a tf32 GEMM's; tensors passed for it are
# float32. It prints as tfloat32 and compares unequal to T.float32, so host
# code that branches on it (``if dtype == T.tfloat32``) behaves as under
# TileLang (kiln/_dsl/dtypes.py).
tfloat32 = DType("f32", "tfloat32")


def cast(value: Any, dtype: Any) -> Expr:
    """``value`` converted to ``dtype`` (tile IR ``dtype(value)``)."""
    return _expr.cast(dtype, value)


def Cast(dtype: Any, value: Any) -> Expr:  # noqa: N802 (TVM spelling)
    """TVM's argument order for ``cast``."""
    return _expr.cast(dtype, value)


def reinterpret(value: Any, dtype: Any) -> Expr:
    """The bits of ``value`` read as ``dtype`` of the same width: between
    integers, or integer bits as a float (kiln/_dsl/bitcast.py). TVM's
    order, ``T.reinterpret(dtype, value)``, is accepted as TileLang
    accepts it."""
    if isinstance(value, str):  # a dtype name, or a DType (a str too)
        value, dtype = dtype, value
    return _bitcast.reinterpret(dtype, value)


# --- shapes and parameters ------------------------------------------------

class TensorType:
    """The annotation of a global tensor parameter; with ``data`` (a
    tensor's ``.data``), a view of that tensor's storage
    (kiln/_dsl/views.py)."""

    def __init__(self, shape: Any, dtype: Any = "float32",
                 strides: Optional[Sequence[Any]] = None, data: Any = None):
        if not isinstance(shape, (tuple, list)):
            shape = (shape,)
        self.shape = tuple(shape)
        self.dtype = to_ir(dtype)
        self.strides = None if strides is None else tuple(strides)
        self.data = data

    def __repr__(self) -> str:
        return f"T.Tensor({self.shape}, {self.dtype!r})"


class _TensorSpelling:
    """``T.Tensor(shape, dtype)`` or ``T.Tensor[shape, dtype]``: a row-major
    global tensor parameter. As TileLang's macro annotations
    (``T.SharedBuffer(shape, dtype)``, ...) it documents a parameter.
    ``T.Tensor(shape, dtype, x.data)`` in a kernel body is a view of the
    global tensor ``x``'s storage with another shape."""

    def __init__(self, name: str, views: bool = False):
        self._name = name
        self._views = views

    def __call__(self, shape: Any, dtype: Any = "float32",
                 data: Any = None) -> TensorType:
        if data is not None:
            if not self._views:
                raise KilnSourceError(
                    f"T.{self._name}(shape, dtype, data): views are made "
                    "of global tensors with T.Tensor(shape, dtype, x.data)")
            if not isinstance(data, _views.BufferData):
                raise KilnSourceError(
                    f"T.{self._name}(shape, dtype, data): data must be a "
                    f"global tensor's .data inside a kernel; got {data!r}")
        return TensorType(shape, dtype, data=data)

    def __getitem__(self, item: Any) -> TensorType:
        if not isinstance(item, tuple) or len(item) != 2:
            raise KilnSourceError(
                f"T.{self._name}[shape, dtype] needs a shape and a dtype")
        return TensorType(item[0], item[1])

    def __repr__(self) -> str:
        return f"T.{self._name}"


Tensor = _TensorSpelling("Tensor", views=True)
Buffer = _TensorSpelling("Buffer", views=True)
SharedBuffer = _TensorSpelling("SharedBuffer")
FragmentBuffer = _TensorSpelling("FragmentBuffer")
LocalBuffer = _TensorSpelling("LocalBuffer")
# ``dtype: T.dtype = "float16"`` annotations of kernel factories, and
# ``T.dtype("float16")`` / ``T.dtype(q.dtype)``: the DType of a name.
dtype = DType


def StridedTensor(shape: Any, strides: Any,  # noqa: N802
                  dtype: Any = "float32") -> TensorType:
    """A global tensor with explicit element strides."""
    return TensorType(shape, dtype, strides)


def symbolic(name: str, dtype: Any = "int32") -> Symbol:
    """A symbolic dim, bound at launch from the tensors' shapes."""
    if not isinstance(name, str) or not name.isidentifier():
        raise KilnSourceError(f"T.symbolic needs an identifier; got {name!r}")
    return Symbol(name)


dynamic = symbolic


def _eager_only(name: str) -> Callable[..., Any]:
    def outside(*_a: Any, **_k: Any) -> Any:
        raise KilnSourceError(
            f"T.{name} declares a dim or an output of a @tilelang.jit "
            "function written in the eager style (its body is the kernel); "
            "it is not used elsewhere")
    outside.__name__ = name
    outside._kiln_eager = name  # type: ignore[attr-defined]
    return outside


# TileLang's eager style: ``M, N = T.const("M, N")`` names dims fixed per
# compiled specialization (from ``.compile(M=...)`` or the tensors a direct
# call passes); ``C = T.empty(shape, dtype)`` declares an output tensor.
const = _eager_only("const")
empty = _eager_only("empty")


# --- TVM-script conditionals ----------------------------------------------

class IfFrame:
    """``T.If(cond)``: TVM script's spelling of ``if cond:`` that TileLang
    kernels use as ``with T.If(c), T.Then(): ...`` or ``with T.If(c):``
    holding ``with T.Then():`` and ``with T.Else():`` blocks."""

    def __init__(self, cond: Any):
        self.cond = cond


class ThenFrame:
    """``T.Then()``: the branch of the ``T.If`` it follows."""


class ElseFrame:
    """``T.Else()``: the other branch of the enclosing ``T.If``."""


def If(cond: Any) -> IfFrame:  # noqa: N802 (TileLang's name)
    return IfFrame(cond)


def Then() -> ThenFrame:  # noqa: N802
    return ThenFrame()


def Else() -> ElseFrame:  # noqa: N802
    return ElseFrame()


# --- launch and loops -----------------------------------------------------

class KernelLaunch:
    """What ``T.Kernel(...)`` describes: the grid and the block size."""

    def __init__(self, blocks: Tuple[Any, ...], threads: Any,
                 cluster: Optional[Tuple[Any, ...]] = None):
        self.blocks = blocks
        self.threads = threads
        self.cluster = cluster

    def __enter__(self):
        raise KilnSourceError(
            "T.Kernel can only be used inside a @T.prim_func body")

    def __exit__(self, *exc: Any) -> None:
        return None


def Kernel(*blocks: Any, threads: Any = 128,  # noqa: N802
           prelude: Optional[str] = None, **_hints: Any) -> KernelLaunch:
    """``with T.Kernel(gx[, gy[, gz]], threads=n) as (bx, by[, bz]):``."""
    if prelude is not None:
        raise KilnSourceError("T.Kernel(prelude=...) is not supported: "
                              "kernels are tile IR, not CUDA source")
    if not 1 <= len(blocks) <= 3:
        raise KilnSourceError(
            f"T.Kernel takes 1 to 3 grid extents; got {len(blocks)}")
    if isinstance(threads, (list, tuple)):
        total: Any = 1
        for t in threads:
            total = _expr.binop("*", total, t)
        threads = total
    return KernelLaunch(tuple(blocks), threads)


def ClusterKernel(*blocks: Any, threads: Any = 128,  # noqa: N802
                  cluster_dims: Any = (1, 1, 1), **hints: Any) -> KernelLaunch:
    """``T.Kernel`` with thread-block cluster dims."""
    launch = Kernel(*blocks, threads=threads, **hints)
    dims = tuple(cluster_dims) if isinstance(cluster_dims, (list, tuple)) \
        else (cluster_dims,)
    launch.cluster = dims + (1,) * (3 - len(dims))
    return launch


class LoopSpec:
    """The iterable of a kernel ``for`` loop."""

    def __init__(self, kind: str, args: Tuple[Any, ...], stages: Any = None,
                 starts: Optional[Tuple[Any, ...]] = None):
        self.kind = kind
        self.args = args
        self.stages = stages
        self.starts = starts  # parallel: each index's first value (0)

    def __iter__(self):
        raise KilnSourceError(
            f"T.{self.kind.capitalize()} loops only run inside a "
            "@T.prim_func body")


def _range(start: Any, stop: Any) -> Tuple[Any, ...]:
    return (start,) if stop is None else (start, stop)


def Pipelined(start: Any, stop: Any = None, num_stages: Any = 0,  # noqa: N802
              order: Any = None, stage: Any = None, sync: Any = None,
              group: Any = None, annotations: Any = None) -> LoopSpec:
    """A software-pipelined loop; ``num_stages=0`` is a plain serial loop.
    TileLang's manual schedule (``order=``, ``stage=``, ``sync=``,
    ``group=``) is accepted and not followed: the compiler places the
    loop's copies in the ring and schedules the body itself."""
    if isinstance(num_stages, _builtins.int) and num_stages == 0:
        return LoopSpec("serial", _range(start, stop))
    return LoopSpec("pipelined", _range(start, stop), num_stages)


def Parallel(*extents: Any, coalesced_width: Any = None,  # noqa: N802
             loop_layout: Any = None, prefer_async: Any = None,
             annotations: Any = None) -> LoopSpec:
    """An element-wise loop over a tile's index space."""
    if not extents:
        raise KilnSourceError("T.Parallel needs at least one extent")
    return LoopSpec("parallel", tuple(extents))


def Serial(start: Any, stop: Any = None, step: Any = None,  # noqa: N802
           annotations: Any = None) -> LoopSpec:
    """An ordinary loop over ``[0, start)`` or ``[start, stop)``."""
    if step is not None and \
            not (isinstance(step, _builtins.int) and step == 1):
        raise KilnSourceError("T.Serial(step=) other than 1 is not supported")
    return LoopSpec("serial", _range(start, stop))


def Unroll(start: Any, stop: Any = None, step: Any = None,  # noqa: N802
           explicit: Any = False, unroll_factor: Any = None,
           annotations: Any = None) -> LoopSpec:
    """A loop the compiler unrolls fully."""
    if step is not None and \
            not (isinstance(step, _builtins.int) and step == 1):
        raise KilnSourceError("T.Unroll(step=) other than 1 is not supported")
    if unroll_factor is not None:
        raise KilnSourceError("T.Unroll(unroll_factor=) is not supported; "
                              "the loop is unrolled fully")
    return LoopSpec("unroll", _range(start, stop))


def Persistent(domain: Sequence[Any], wave_size: Any, index: Any,  # noqa: N802
               group_size: Any = 8) -> LoopSpec:
    """``for bx, by in T.Persistent([m_blocks, n_blocks], sm_num, block_id):``
    a persistent kernel's walk: block ``index`` of ``wave_size`` takes tiles
    ``index``, ``index + wave_size``, ... of the domain (row-major, the
    last coordinate fastest) until every tile is taken; the loop binds one
    name per domain dim. ``group_size`` (TileLang's L2 grouping of the
    order) is accepted and not used: every tile is visited once either
    way."""
    return LoopSpec("persistent", (tuple(domain), wave_size, index))


def Vectorized(start: Any, stop: Any = None,  # noqa: N802
               annotations: Any = None) -> LoopSpec:
    """TileLang's vectorised loop over ``[0, start)`` or ``[start, stop)``:
    a loop each thread runs whole. Inside a T.Parallel, and where its body
    stores only local tiles and variables, it is a loop the compiler
    unrolls; a body that stores shared tiles, fragments or tensors makes it
    an element-wise loop like T.Parallel over its range."""
    return LoopSpec("vectorized", _range(start, stop))


serial = Serial
unroll = Unroll
vectorized = Vectorized
parallel = Parallel  # (TIR's lowercase spelling)


# --- tile ops: recognised by the translator -------------------------------

def _tile_op(fn: Callable) -> Callable:
    """Marks ``fn`` as a statement the translator turns into tile IR."""
    fn._kiln_op = fn.__name__  # type: ignore[attr-defined]

    def outside(*_a: Any, **_k: Any) -> Any:
        raise KilnSourceError(
            f"T.{fn.__name__} can only be used inside a @T.prim_func body")
    outside.__name__ = fn.__name__
    outside.__doc__ = fn.__doc__
    outside.__wrapped__ = fn  # type: ignore[attr-defined]
    outside._kiln_op = fn.__name__  # type: ignore[attr-defined]
    return outside


@_tile_op
def alloc_shared(shape, dtype, scope="shared.dyn"):
    """A tile in shared memory."""


@_tile_op
def alloc_fragment(shape, dtype, scope="local.fragment"):
    """A tile held in registers across the block's threads."""


@_tile_op
def alloc_local(shape, dtype, scope="local"):
    """Per-thread registers."""


@_tile_op
def alloc_global(shape, dtype):
    """A global tensor the prim_func's kernels share (outside T.Kernel):
    each launch allocates it on the inputs' device."""


@_tile_op
def alloc_buffer(shape, dtype="float32", data=None, strides=None,
                 elem_offset=None, scope="global", align=-1, offset_factor=0,
                 buffer_type="default", axis_separators=None,
                 annotations=None):
    """TVM's generic allocation; ``scope`` picks what it is (TVM's default
    is "global"): "shared" and "shared.dyn" are ``T.alloc_shared``,
    "local.fragment" ``T.alloc_fragment``, "local" ``T.alloc_local``,
    "local.var" (one element) ``T.alloc_var`` and "global" (outside
    ``T.Kernel``) ``T.alloc_global``. Another scope, ``data`` (a buffer
    over another's storage), ``strides``, ``elem_offset``,
    ``axis_separators`` and a ``buffer_type`` other than "default" are
    refused; ``align``, ``offset_factor`` and ``annotations`` are accepted
    and change nothing (kiln/_dsl/tileops.py)."""


@_tile_op
def alloc_var(dtype, init=None, scope="local.var"):
    """A per-thread scalar variable (a one-element local tile)."""


@_tile_op
def alloc_reducer(shape, dtype, op="sum", replication=None):
    """A fragment that reduces across T.Parallel iterations: inside a
    T.Parallel, ``r[i] += v`` (op "sum") or ``r[i] = T.max(r[i], v)``
    (op "max", "min") whose index leaves out loop variables combines the
    values over them into ``r[i]``'s current value. ``replication``
    ("all" or "none") is accepted and changes nothing."""


@_tile_op
def finalize_reducer(reducer, dst=None, batch=1, annotations=None):
    """Marks the end of a reducer's updates (each T.Parallel already left
    it whole); with ``dst``, copies it there."""


@_tile_op
def copy(src, dst, coalesced_width=None, disable_tma=False,
         eviction_policy=None, prefer_instruction=None, annotations=None,
         loop_layout=None):
    """Copies a tile or region into another, converting dtype."""


class GemmWarpPolicy(enum.Enum):
    """How warps split a GEMM tile."""
    Square = "square"
    FullRow = "full_row"
    FullCol = "full_col"


@_tile_op
def gemm(A, B, C, transpose_A=False, transpose_B=False,
         policy=GemmWarpPolicy.Square, clear_accum=False, k_pack=1,
         wg_wait=0, mbar=None, annotations=None):
    """``C += op(A) @ op(B)``."""


@_tile_op
def reshape(src, shape):
    """The same elements as ``src`` (a tile, or a global tensor), in
    row-major order, seen with another shape (``s_r = T.reshape(s, (n, q,
    h))``; kiln/_dsl/tile_views.py)."""


@_tile_op
def view(src, shape=None, dtype=None):
    """``T.reshape`` with TileLang's ``T.view`` arguments; a view of
    another dtype is refused (it would reinterpret bytes)."""


@_tile_op
def fill(buffer, value):
    """Sets every element of a tile (or region of one)."""


@_tile_op
def clear(buffer):
    """Sets every element to zero."""


@_tile_op
def reduce(buffer, out, reduce_type, dim=-1, clear=True):
    """Reduces a fragment along ``dim`` ("sum", "max", "min", "absmax")."""


@_tile_op
def reduce_max(buffer, out, dim=-1, clear=True):
    """Maximum along ``dim``."""


@_tile_op
def reduce_min(buffer, out, dim=-1, clear=True):
    """Minimum along ``dim``."""


@_tile_op
def reduce_sum(buffer, out, dim=-1, clear=True):
    """Sum along ``dim``."""


@_tile_op
def reduce_absmax(buffer, out, dim=-1, clear=True):
    """Maximum absolute value along ``dim``."""


@_tile_op
def cumsum(src, dst=None, dim=0, reverse=False):
    """Inclusive prefix sum along ``dim`` (suffix sum with reverse)."""


@_tile_op
def atomic_add(dst, value, memory_order=None, return_prev=False,
               use_tma=False):
    """Atomically adds a tile into a global region, or (inside
    T.Parallel) a value into one element of a global tensor."""


@_tile_op
def atomic_max(dst, value, memory_order=None, return_prev=False,
               annotations=None):
    """Atomically keeps the larger of each global element and the value:
    one element inside T.Parallel, or a tile into a global region (a NaN
    wins, as in ``T.max``)."""


@_tile_op
def atomic_min(dst, value, memory_order=None, return_prev=False,
               annotations=None):
    """Atomically keeps the smaller of each global element and the value:
    one element inside T.Parallel, or a tile into a global region (a NaN
    wins, as in ``T.min``)."""


@_tile_op
def im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad,
           eviction_policy=None, annotations=None):
    """Fills the [block_M, block_K] tile ``col`` with the im2col patch of the
    NHWC image ``img`` for a square ``kernel`` (kiln/_dsl/im2col.py): row m
    is output pixel ``nhw_step * block_M + m``, column k patch element
    ``c_step * block_K + k`` in (kh, kw, c) order; padding and elements
    past the last pixel or patch element are zero."""


@_tile_op
def c2d_im2col(img, col, nhw_step, c_step, kernel, stride, dilation, pad,
               eviction_policy=None, annotations=None):
    """TileLang's deprecated name of ``T.im2col``."""


@_tile_op
def use_swizzle(panel_size, order="row", enable=True):
    """Rasterises blocks in panels for L2 reuse."""


def Layout(shape, forward_fn):  # noqa: N802 (TileLang's name)
    """TileLang's index-map layout, for ``T.annotate_layout`` on a global
    tensor: checked, then without effect, since Kiln keeps tensors in
    their logical layout (kiln.layout.IndexMap says why that is safe)."""
    from kiln.layout import IndexMap
    return IndexMap(shape, forward_fn)


@_tile_op
def annotate_layout(layout_map):
    """Pins shared tiles' layouts: ``{tile: make_swizzled_layout(tile)}``."""


@_tile_op
def assume(cond):
    """A kiln extension: an integer fact over symbols, checked at launch."""


# --- scalar functions -----------------------------------------------------

def ceildiv(a: Any, b: Any) -> Any:
    """``(a + b - 1) // b`` for integers."""
    return _expr.call("ceildiv", [a, b])


cdiv = ceildiv


def index_to_coordinates(index: Any, shape: Any) -> List[Any]:
    """The row-major coordinates of flat ``index`` in ``shape`` (the last
    dim fastest)."""
    dims = list(shape)
    coords: List[Any] = []
    for d in reversed(dims[1:]):
        coords.append(floormod(index, d))
        index = floordiv(index, d)
    coords.append(index)
    return coords[::-1]


def shift_left(a: Any, b: Any) -> Any:
    """``a << b`` on integers."""
    return _expr.binop("<<", a, b)


def shift_right(a: Any, b: Any) -> Any:
    """``a >> b`` on integers (arithmetic for signed ``a``)."""
    return _expr.binop(">>", a, b)


def floordiv(a: Any, b: Any) -> Any:
    """``a // b``: integer division rounding toward negative infinity."""
    return _expr.binop("//", a, b)


def floormod(a: Any, b: Any) -> Any:
    """``a % b`` with the divisor's sign (the floor modulo)."""
    return _expr.binop("%", a, b)


def max(a: Any, b: Any) -> Any:  # noqa: A001
    return _expr.call("max", [a, b])


def min(a: Any, b: Any) -> Any:  # noqa: A001
    return _expr.call("min", [a, b])


def abs(x: Any) -> Any:  # noqa: A001
    return _expr.call("abs", [x])


def isnan(x: Any) -> Any:
    return _expr.call("isnan", [x])


def isinf(x: Any) -> Any:
    return _expr.call("isinf", [x])


def exp(x: Any) -> Any:
    return _expr.call("exp", [x])


def floor(x: Any) -> Any:
    """The largest integer <= x, as a float of x's type."""
    return _expr.call("floor", [x])


def ceil(x: Any) -> Any:
    """The smallest integer >= x, as a float of x's type."""
    return _expr.call("ceil", [x])


def round(x: Any) -> Any:  # noqa: A001 (TileLang's name)
    """x rounded to the nearest integer, ties to even (torch.round), as a
    float of x's type."""
    return _expr.call("round", [x])


def trunc(x: Any) -> Any:
    """x rounded toward zero, as a float of x's type."""
    return _expr.call("trunc", [x])


def exp2(x: Any) -> Any:
    return _expr.call("exp2", [x])


def log(x: Any) -> Any:
    return _expr.call("log", [x])


def log2(x: Any) -> Any:
    return _expr.call("log2", [x])


def sqrt(x: Any) -> Any:
    return _expr.call("sqrt", [x])


def rsqrt(x: Any) -> Any:
    return _expr.call("rsqrt", [x])


def tanh(x: Any) -> Any:
    return _expr.call("tanh", [x])


def sigmoid(x: Any) -> Any:
    return _expr.call("sigmoid", [x])


def erf(x: Any) -> Any:
    return _expr.call("erf", [x])


def clamp(x: Any, lo: Any, hi: Any) -> Any:
    """``x`` limited to ``[lo, hi]``: ``max(min(x, hi), lo)``."""
    return max(min(x, hi), lo)


def fma(a: Any, b: Any, c: Any) -> Any:
    return _expr.call("fma", [a, b, c])


def if_then_else(cond: Any, then_value: Any, else_value: Any) -> Any:
    """``cond ? then_value : else_value`` (tile IR ``select``)."""
    return _expr.call("select", [cond, then_value, else_value])


select = if_then_else


def infinity(dtype: Any = "float32") -> Any:
    """Positive infinity (the tile-IR ``inf`` literal)."""
    to_ir(dtype)
    return _expr.const(_math.inf)


def _with_outer_names(func: Callable, frame: Any) -> Callable:
    """Remembers the names of the scope that defines ``func`` (a factory's
    locals), so annotations that name them resolve when the module has
    ``from __future__ import annotations`` (its annotations are strings,
    and a name used only there is not in the function's closure)."""
    if frame is not None and frame.f_locals is not frame.f_globals:
        try:
            func.__kiln_outer__ = dict(frame.f_locals)
        except (AttributeError, TypeError):
            pass
    return func


def macro(func: Optional[Callable] = None, **_options: Any) -> Any:
    """A helper whose statements are inlined into the kernel where called."""
    import sys
    from kiln._dsl.frontend import Macro
    if func is None:
        return lambda f: Macro(_with_outer_names(f, sys._getframe(1)))
    return Macro(_with_outer_names(func, sys._getframe(1)))


# Register-allocation and warp-role hints of TileLang's Hopper kernels:
# Kiln plans warp specialisation and register budgets itself, so they are
# accepted and change nothing.
def no_set_max_nreg() -> None:
    return None


def set_max_nreg(reg_count: Any = None, is_inc: Any = None) -> None:
    """TileLang's per-role register budget: Kiln sets the producer's and
    consumers' budgets itself (accepted, no effect)."""
    return None


def annotate_producer_reg_dealloc(*_args: Any, **_kwargs: Any) -> None:
    return None


def annotate_consumer_reg_alloc(*_args: Any, **_kwargs: Any) -> None:
    return None


def disable_warp_group_reg_alloc() -> None:
    return None


class WarpRoleFrame:
    """``with T.ws(0):``: TileLang's warp-specialised role. Tile ops are
    collective over the block in Kiln, so the body runs as written (the
    compiler chooses producer and consumer warps)."""

    def __init__(self, *warp_groups: Any):
        self.warp_groups = warp_groups


def ws(*warp_groups: Any) -> WarpRoleFrame:
    return WarpRoleFrame(*warp_groups)


# TileLang names Kiln does not provide, with what to write instead (the
# translator raises a located KilnSourceError naming the construct).
_THREADS = ("thread-level TIR: Kiln maps tiles to threads itself; write the "
            "kernel with tile ops and T.Parallel")
_BARRIERS = "the compiler places barriers and mbarriers itself"
_REDUCER_V2 = ("initialise a T.alloc_reducer tile with T.clear or T.fill and "
               "update it inside T.Parallel as `r[i] += v` or "
               "`r[i] = T.max(r[i], v)`")
_POINTERS = ("raw pointers: a kernel reaches memory only through its tensor "
             "parameters, whose shapes the verifier checks every access "
             "against; pass each tensor, or stack same-shape tensors into "
             "one and index it (a grouped GEMM: one [G, M, K] tensor, or "
             "rows and offsets)")
_BLACKWELL = ("Blackwell (sm_100) tensor-memory and tcgen05 instructions: "
              "Kiln's CUDA targets are sm_80 and sm_90a; write T.gemm and "
              "T.copy, which the compiler lowers to mma.sync or wgmma and "
              "cp.async or TMA")
_HAND_ASYNC = ("hand-written asynchronous copies and MMA: T.copy and T.gemm "
               "choose cp.async, TMA and wgmma, and the compiler places their "
               "fences and waits")
_WS_SCHEDULE = ("TileLang's warp-specialisation schedule API: Kiln plans "
                "producer and consumer warpgroups itself (write the loop with "
                "T.Pipelined; T.ws(...) blocks are accepted)")
_TIR = ("TVM TIR statements: write the kernel with tile ops, T.Parallel and "
        "scalar expressions")
UNSUPPORTED = {
    "alloc_tmem": _BLACKWELL, "tcgen05_gemm": _BLACKWELL,
    "tcgen05_mma_arrive": _BLACKWELL, "tcgen05_sf_warp_transpose": _BLACKWELL,
    "tcgen05_gemm_blockscaled": _BLACKWELL, "tcgen05_cp_warpx4": _BLACKWELL,
    "mma_gemm_blockscaled": _BLACKWELL, "clc_try_cancel_multicast": _BLACKWELL,
    "clc_is_canceled": _BLACKWELL, "clc_get_first_ctaid_x": _BLACKWELL,
    "block_rank_in_cluster": _THREADS, "alloc_cluster_barrier": _BARRIERS,
    "mbarrier_arrive_expect_tx": _BARRIERS, "sync_grid": _BARRIERS,
    "any_sync": _THREADS, "tvm_thread_allreduce": _THREADS,
    "tvm_warp_shuffle": _THREADS, "dp4a": _THREADS,
    "get_block_binding": ("use the block variables T.Kernel binds: "
                          "`with T.Kernel(gx, gy) as (bx, by):`"),
    "wgmma_gemm": _HAND_ASYNC, "wait_wgmma": _HAND_ASYNC,
    "fence_proxy_async": _HAND_ASYNC, "ptx_cp_async": _HAND_ASYNC,
    "cp_async_barrier_noinc": _HAND_ASYNC, "ptx_wait_group": _HAND_ASYNC,
    "ptx_commit_group": _HAND_ASYNC,
    "WSSync": _WS_SCHEDULE, "WSScope": _WS_SCHEDULE,
    "WSSchedule": _WS_SCHEDULE, "WSRole": _WS_SCHEDULE,
    "WSPipeline": _WS_SCHEDULE, "WSID": _WS_SCHEDULE,
    "ws_op": _WS_SCHEDULE, "annotate_ws_schedule": _WS_SCHEDULE,
    "PersistentTileScheduler": "use T.Persistent (or a counted while loop)",
    "evaluate": _TIR, "attr": _TIR,
    "uint64": ("the tile IR has no 64-bit unsigned type; use T.int64 (two's "
               "complement: the same bits)"),
    "float4_e2m1fn": ("no fp4 dtype: keep two values per byte in a uint8 "
                      "tensor and decode them (T.reinterpret, a table, or "
                      "shifts and masks)"),
    "float4_e2m1_unpacked": ("no fp4 dtype: keep the codes in a uint8 tensor "
                             "and decode them"),
    "Fragment": ("fragment layouts: Kiln lays out fragments itself (shared "
                 "tiles take T.annotate_layout with a swizzle)"),
    "comm_reducer": ("custom reducers: use T.reduce_sum/max/min/absmax, or "
                     "T.alloc_reducer with op='sum', 'max' or 'min'"),
    "gemm_sp": "sparse (2:4) T.gemm is not supported: use a dense T.gemm",
    "atomic_load": ("atomic loads and stores: blocks share results through "
                    "global tensors between T.Kernel blocks (launched in "
                    "order), or with T.atomic_add / max / min"),
    "atomic_store": ("atomic loads and stores: blocks share results through "
                     "global tensors between T.Kernel blocks (launched in "
                     "order), or with T.atomic_add / max / min"),
    "atomic_addx4": ("vector atomics: use T.atomic_add on each element, or "
                     "on a tile (the compiler vectorises)"),
    "rng_init": "random numbers in kernels are not supported: pass them in",
    "rng_rand": "random numbers in kernels are not supported: pass them in",
    "device_assert": ("device assertions: check inputs on the host, or "
                      "write a flag tensor"),
    "ptr": _POINTERS, "make_tensor": _POINTERS, "match_buffer": _POINTERS,
    "access_ptr": _POINTERS, "address_of": _POINTERS,
    "thread_binding": _THREADS, "launch_thread": _THREADS,
    "get_thread_binding": _THREADS, "get_lane_idx": _THREADS,
    "get_warp_idx": _THREADS, "shfl_xor": _THREADS, "shfl_down": _THREADS,
    "call_extern": "external calls are not supported",
    "call_intrin": "external calls are not supported",
    "call_packed": "external calls are not supported",
    "import_source": "external source is not supported",
    "alloc_barrier": _BARRIERS, "barrier_arrive": _BARRIERS,
    "barrier_wait": _BARRIERS, "mbarrier_wait_parity": _BARRIERS,
    "mbarrier_arrive": _BARRIERS, "sync_threads": _BARRIERS,
    "create_tma_descriptor": "the compiler builds TMA descriptors itself",
    "tma_copy": "T.copy uses TMA where the plan picks it",
    "reducer_init": _REDUCER_V2, "reducer_update": _REDUCER_V2,
}


def prim_func(func: Optional[Callable] = None, **_options: Any) -> Any:
    """The decorated function as a tile-IR program, translated on first
    use (its ``.ir``, ``kiln.compile``, ``@kiln.jit``)."""
    import sys
    from kiln._dsl.frontend import LazyPrimFunc
    if func is None:
        return lambda f: LazyPrimFunc(_with_outer_names(f, sys._getframe(1)))
    return LazyPrimFunc(_with_outer_names(func, sys._getframe(1)))


__all__ = [name for name in dir() if not name.startswith("_") and name not in
           ("annotations", "enum", "Any", "Callable", "Optional", "Sequence",
            "Tuple", "Expr", "Symbol", "KilnSourceError", "to_ir", "int")]


def __getattr__(name: str) -> Any:
    """A TileLang name Kiln does not provide, read outside a kernel body
    (an annotation such as ``T.Tensor([n], T.ptr)`` is evaluated when the
    function is defined): the AttributeError says why and what to write."""
    reason = UNSUPPORTED.get(name)
    if reason:
        raise AttributeError(f"T.{name} is not supported: {reason}")
    raise AttributeError(f"module 'kiln.language' has no attribute '{name}'")
