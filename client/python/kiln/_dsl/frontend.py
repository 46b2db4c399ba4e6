"""Translates a ``@T.prim_func`` Python function into tile-IR text.

1. Read the function's source and parse it with ``ast``.
2. Bind parameters from their evaluated annotations (``T.Tensor``, dtypes);
   symbolic dims become kernel symbols.
3. Walk the body: Python values (closure variables, constants) are folded in
   Python; anything that depends on kernel values becomes IR. ``if`` on a
   Python value picks a branch statically, on a kernel value emits ``if``.
4. Every local gets a name unique in the kernel (i, i_1, ...), because tile
   IR forbids reuse even in sibling blocks.
5. Assemble the header (params, tunables found on the way, assumptions,
   launch) and the body, remembering which Python line made each IR line.
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
import numbers
import re
import textwrap
from typing import Any, Callable, Dict, List, Optional, Tuple

from kiln._dsl import expr as E
from kiln._dsl import (atomics, reducer, tile_views, tileops, views,
                       while_loop)
from kiln._dsl.dtypes import DType, to_ir
from kiln._dsl.names import NameTable
from kiln.errors import KilnSourceError
from kiln.language import (ElseFrame, IfFrame, KernelLaunch, LoopSpec,
                           TensorType, ThenFrame, WarpRoleFrame)

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/",
           ast.FloorDiv: "//", ast.Mod: "%", ast.LShift: "<<",
           ast.RShift: ">>", ast.BitAnd: "&", ast.BitOr: "|",
           ast.BitXor: "^"}
_CMPOPS = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=",
           ast.Eq: "==", ast.NotEq: "!="}
_STORE_OPS = {ast.Add: "+=", ast.Sub: "-=", ast.Mult: "*=", ast.Div: "/="}


class Param:
    """A kernel parameter: a tensor (dtype, shape, strides) or a scalar."""

    def __init__(self, name: str, dtype: str, shape: Optional[Tuple] = None,
                 strides: Optional[Tuple[str, ...]] = None):
        self.name = name
        self.dtype = dtype
        self.shape = shape  # ints and symbol names; None for a scalar
        self.strides = strides

    @property
    def is_tensor(self) -> bool:
        return self.shape is not None

    def __repr__(self) -> str:
        return f"Param({self.name}: {self.dtype}{list(self.shape or [])})"


class KernelPart:
    """One ``with T.Kernel(...)`` block of a prim_func: a tile-IR kernel of
    the program, launched in order. Its parameters are the prim_func's,
    then the ``T.alloc_global`` tensors it uses."""

    def __init__(self, name: str, params: List[Param],
                 tunables: Dict[str, Tuple[int, ...]]):
        self.name = name
        self.params = params
        self.tunables = tunables

    def __repr__(self) -> str:
        return f"KernelPart({self.name})"


class PrimFunc:
    """A translated kernel: its tile IR and what launching it needs. A
    prim_func with several ``T.Kernel`` blocks is a program of several
    kernels (``kernels``), launched in order, sharing the ``globals``
    (``T.alloc_global``) that each launch allocates."""

    def __init__(self, name: str, ir: str, params: List[Param],
                 symbols: List[str], tunables: Dict[str, Tuple[int, ...]],
                 filename: str, lineno: int, line_map: Dict[int, int],
                 kernels: Optional[List[KernelPart]] = None,
                 globals_: Optional[List[Param]] = None,
                 views_: Optional[List[views.View]] = None):
        self.name = name
        self.ir = ir
        self.params = params
        self.symbols = symbols
        self.tunables = tunables
        self.filename = filename
        self.lineno = lineno
        self.line_map = line_map  # IR line (1-based) -> Python line
        self.kernels = kernels or [KernelPart(name, params, tunables)]
        self.globals = globals_ or []
        # Buffer views (T.Tensor(shape, dtype, x.data)): parameters of the
        # kernels that use them, bound to their base's memory at launch.
        self.views = views_ or []

    def script(self) -> str:
        return self.ir

    def __str__(self) -> str:
        return self.ir

    def __repr__(self) -> str:
        return (f"<kiln PrimFunc {self.name} from "
                f"{self.filename}:{self.lineno}>")


class Buffer:
    """A tensor parameter or a tile, as the kernel body sees it."""

    def __init__(self, name: str, scope: str, dtype: str, shape: Tuple,
                 py_name: str, line: Optional[List] = None):
        self.name = name
        self.scope = scope
        self.dtype_ir = dtype
        self.shape = shape
        self.py_name = py_name
        self.line = line  # its alloc line's record, for layouts
        # A T.alloc_reducer fragment's combine op ("sum", "max", "min").
        self.reducer: Optional[str] = None
        # For a buffer view (T.Tensor(shape, dtype, x.data)), what it views.
        self.view: Optional[views.View] = None
        # For a tile reshape (T.reshape, T.view), the tile it reshapes, and
        # whether a tile op took it (tile_views.py).
        self.reshape_of: Optional["Buffer"] = None
        self.materialised = False

    @property
    def dtype(self) -> str:
        return self.dtype_ir

    @property
    def data(self) -> Any:
        """The storage, for a view: ``T.Tensor(shape, dtype, buf.data)``."""
        if self.scope != "global":
            raise KilnSourceError(
                f"'{self.py_name}.data': only global tensors can be viewed "
                f"(T.Tensor(shape, dtype, buf.data)); '{self.py_name}' is a "
                f"{self.scope} tile")
        return views.BufferData(self)

    def _kiln_expr(self) -> E.Expr:
        raise KilnSourceError(
            f"'{self.py_name}' is a whole {self.scope} buffer used as a "
            "scalar; index one element")

    def __repr__(self) -> str:
        return f"<{self.scope} {self.py_name}: {self.dtype_ir}>"


class Access:
    """``buffer[items]``: an element (all indices) or a region (slices)."""

    def __init__(self, buffer: Buffer, items: List[Tuple]):
        self.buffer = buffer
        self.items = items

    def all_indices(self) -> bool:
        return all(it[0] == "idx" for it in self.items)

    def _kiln_expr(self) -> E.Expr:
        if not self.all_indices():
            raise KilnSourceError(
                f"the region {self.buffer.py_name}[...] is used as a scalar")
        if len(self.items) != len(self.buffer.shape):
            raise KilnSourceError(
                f"'{self.buffer.py_name}' has {len(self.buffer.shape)} dims; "
                f"got {len(self.items)} indices")
        buf, idx = tile_views.element(self.buffer,
                                      [it[1] for it in self.items])
        return E.load(buf.name, idx, buf.dtype_ir)

    # An element has TVM's PrimExpr surface, as a BufferLoad has:
    # ``B_local[i, j].astype(T.uint16)``, ``A[i].dtype``.
    @property
    def dtype(self) -> Any:
        return self._kiln_expr().dtype

    def astype(self, dtype: Any) -> E.Expr:
        return self._kiln_expr().astype(dtype)


class LocalVar:
    """``T.alloc_var``: a one-element local tile read and assigned by name."""

    def __init__(self, buffer: Buffer):
        self.buffer = buffer

    def _kiln_expr(self) -> E.Expr:
        return E.load(self.buffer.name, [0], self.buffer.dtype_ir)


def _is_kernel_value(v: Any) -> bool:
    return isinstance(v, (E.Expr, Access, LocalVar, Buffer))


class Macro:
    """``@T.macro``: a helper whose statements are inlined where called."""

    def __init__(self, func: Callable):
        self.func = func
        self._parsed: Optional[Tuple[ast.FunctionDef, str]] = None
        functools.update_wrapper(self, func)

    def parsed(self) -> Tuple[ast.FunctionDef, str]:
        if self._parsed is None:
            self._parsed = _parse_function(self.func)
        return self._parsed

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise KilnSourceError(
            f"macro {self.func.__name__} can only be called inside a "
            "@T.prim_func body")


class _Scope:
    def __init__(self, parent: Optional["_Scope"]):
        self.parent = parent
        self.vars: Dict[str, Tuple[Any, str]] = {}


def _parse_function(func: Callable) -> Tuple[ast.FunctionDef, str]:
    """The def of ``func`` with line numbers of its file."""
    code = func.__code__
    filename = inspect.getsourcefile(func) or code.co_filename
    try:
        lines, start = inspect.getsourcelines(func)
    except (OSError, TypeError) as e:
        raise KilnSourceError(
            f"cannot read the source of {func.__name__}: {e}; kernels and "
            "macros must be defined in a file", filename,
            code.co_firstlineno) from None
    tree = ast.parse(textwrap.dedent("".join(lines)))
    ast.increment_lineno(tree, start - 1)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise KilnSourceError("@T.prim_func and @T.macro decorate a def",
                              filename, start)
    return fdef, filename


def _function_env(func: Callable) -> Dict[str, Any]:
    """What names in ``func`` see: builtins, globals, the defining scope's
    names as they were at the decoration (for string annotations, PEP 563),
    then its closure."""
    env: Dict[str, Any] = dict(vars(builtins))
    env.update(func.__globals__)
    env.update(getattr(func, "__kiln_outer__", {}))
    code = func.__code__
    for name, cell in zip(code.co_freevars, func.__closure__ or ()):
        try:
            env[name] = cell.cell_contents
        except ValueError:
            pass  # a closure variable not assigned yet
    return env


def translate(func: Callable) -> PrimFunc:
    """Translates ``func`` (the function under ``@T.prim_func``)."""
    return _Translator(func).run()


class LazyPrimFunc(PrimFunc):
    """What ``@T.prim_func`` returns: the function, translated on first
    use (so a prim_func defined and never used, as TileLang examples keep
    a variant per configuration, costs nothing and cannot fail)."""

    def __init__(self, func: Callable):  # pylint: disable=super-init-not-called
        self._func = func
        self._translated: Optional[PrimFunc] = None

    def translated(self) -> PrimFunc:
        if self._translated is None:
            self._translated = translate(self._func)
        return self._translated

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_func", "_translated"):
            raise AttributeError(name)
        return getattr(self.translated(), name)

    def __repr__(self) -> str:
        if self._translated is None:
            return f"<kiln PrimFunc {self._func.__name__} (not translated)>"
        return repr(self._translated)


class _Translator:
    def __init__(self, func: Callable):
        self.func = func
        self.fdef, self.filename = _parse_function(func)
        self.env = _function_env(func)
        self.names = NameTable()
        self.scope = _Scope(None)
        self.lines: List[List] = []  # [depth, text, python line]
        self.depth = 0
        self.in_parallel = 0
        # T.Parallel variables (IR names) -> constant extents; the `if`s
        # open inside a T.Parallel body (_check_parallel_index).
        self.parallel_extents: Dict[str, int] = {}
        self.parallel_guards = 0
        # The T.Parallel being walked (its reducer updates), else None.
        self.parallel_updates: Optional[reducer.ParallelUpdates] = None
        # Let names (IR) -> their values: a slice's extent is simplified
        # through them (`kv_start:kv_end`, both lets).
        self.let_values: Dict[str, E.Expr] = {}
        self.in_kernel = False
        # Each T.Kernel block: (launch text, its lines).
        self.parts: List[Tuple[str, List[List]]] = []
        self.globals: List[Param] = []
        self.views: List[views.View] = []
        self.tile_views: List[Buffer] = []  # this kernel's T.reshape tiles
        self.params: List[Param] = []
        self.symbols: Dict[str, str] = {}
        self.tunables: Dict[str, Tuple[int, ...]] = {}
        self.assumes: List[str] = []
        self.rasterized = False
        self.node: ast.AST = self.fdef
        # An eager function's probe (stand-in dims: shapes are not checked).
        self.probing = False

    # --- errors ------------------------------------------------------------

    def error(self, message: str,
              node: Optional[ast.AST] = None) -> KilnSourceError:
        node = node or self.node
        return KilnSourceError(message, self.filename,
                               getattr(node, "lineno", None),
                               getattr(node, "col_offset", None))

    def _locate(self, e: KilnSourceError, node: ast.AST) -> KilnSourceError:
        return e.located(self.filename, getattr(node, "lineno", 0),
                         getattr(node, "col_offset", None))

    # --- driver ------------------------------------------------------------

    def run(self) -> PrimFunc:
        name = self.fdef.name
        if not name.isascii() or len(name) > 128:
            # Any identifier names a kernel, keywords included.
            raise self.error(f"kernel name '{name}' is not an ASCII "
                             "identifier of at most 128 characters", self.fdef)
        self._reserve_closure_tunables()
        self._bind_params()
        body = self.fdef.body
        if body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and \
                isinstance(body[0].value.value, str):
            body = body[1:]
        # The top level holds T.Kernel blocks (also from macros), launched
        # in order, T.alloc_global and Python statements; emit() refuses
        # kernel code outside a block.
        for stmt in body:
            self.node = stmt
            self.stmt(stmt)
        if not self.parts:
            raise self.error(f"prim_func '{name}' has no "
                             "`with T.Kernel(...)` block", self.fdef)
        return self._assemble(name)

    def _reserve_closure_tunables(self) -> None:
        for value in self.env.values():
            if isinstance(value, E.Expr):
                for n in E.names_in(value):
                    if isinstance(n, E.Tunable):
                        self._tunable(n)

    def _tunable(self, t: E.Tunable) -> None:
        if t.a not in self.tunables:
            self.names.interface(t.a, "tunable")
            self.tunables[t.a] = tuple(sorted(set(t.b)))

    def _bind_params(self) -> None:
        args = self.fdef.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            raise self.error("prim_func parameters are plain names "
                             "annotated with T.Tensor(...) or a dtype")
        annotations = self.func.__annotations__
        for arg in args.args:
            self.node = arg
            ann = annotations.get(arg.arg)
            try:
                if isinstance(ann, str) and not isinstance(ann, DType):
                    ann = self.ev(ast.parse(ann, mode="eval").body)
                self._bind_param(arg.arg, ann)
            except KilnSourceError as e:
                raise self._locate(e, arg) from None

    def _bind_param(self, name: str, ann: Any) -> None:
        if isinstance(ann, TensorType) and ann.data is not None:
            raise KilnSourceError(
                f"'{name}' is annotated with a view: a view is assigned "
                f"(`{name}_flat = T.Tensor(shape, dtype, x.data)`), not a "
                "parameter")
        pname = self.names.parameter(name)
        if isinstance(ann, TensorType):
            shape = []
            for d in ann.shape:
                if isinstance(d, _ProbeDim):
                    d = E.Symbol(d.name)  # an eager probe's T.const dim
                if isinstance(d, E.Symbol):
                    if d.a not in self.symbols:
                        self.names.interface(d.a, "symbolic dim")
                        self.symbols[d.a] = d.a
                    shape.append(d.a)
                elif isinstance(d, numbers.Integral) and \
                        not isinstance(d, bool) and d > 0:
                    shape.append(int(d))
                else:
                    raise KilnSourceError(
                        f"dim {d!r} of parameter '{name}': tensor dims are "
                        "positive ints or T.symbolic(...) names (not tunables "
                        "or expressions)")
            strides = None
            if ann.strides is not None:
                if len(ann.strides) != len(shape):
                    raise KilnSourceError(
                        f"'{name}' has {len(shape)} dims but "
                        f"{len(ann.strides)} strides")
                strides = tuple(self.r(s) for s in ann.strides)
            self.params.append(Param(pname, ann.dtype, tuple(shape), strides))
            buf = Buffer(pname, "global", ann.dtype, tuple(
                E.Symbol(d) if isinstance(d, str) else d for d in shape), name)
            self.scope.vars[name] = (buf, "buffer")
        elif isinstance(ann, DType) or isinstance(ann, str):
            dtype = to_ir(ann)
            self.params.append(Param(pname, dtype))
            self.scope.vars[name] = (E.Expr("name", pname, ty=dtype), "param")
        else:
            raise KilnSourceError(
                f"parameter '{name}' needs an annotation: "
                f"T.Tensor(shape, dtype) or a scalar dtype; got {ann!r}")

    def _assemble(self, name: str) -> PrimFunc:
        single = len(self.parts) == 1
        out: List[str] = []
        line_map: Dict[int, int] = {}
        kernels = []
        for index, (launch, lines) in enumerate(self.parts):
            used = set(re.findall(r"[A-Za-z_]\w*", launch + "\n" + "\n".join(
                text for _, text, _ in lines)))
            # One kernel keeps every tunable found (a closure's, unused,
            # too); several take those each uses.
            tunables = {t: v for t, v in self.tunables.items()
                        if single or t in used}
            params = self.params + [g for g in self.globals
                                    if g.name in used] + [
                v.param for v in self.views if v.name in used]
            views.check_aliasing(self, lines)
            kname = name if single else f"{name}_k{index}"
            kernels.append(KernelPart(kname, params, tunables))
            if out:
                out.append("")
                line_map[len(out)] = self.fdef.lineno
            start = len(out)
            out.append(f"kernel {kname}({', '.join(map(_param_text, params))})")
            for t, values in tunables.items():
                out.append(f"  tune {t} in [{', '.join(map(str, values))}]")
            for a in self.assumes:
                out.append(f"  assume {a}")
            out.append("  " + launch)
            for i in range(start, len(out)):
                line_map[i + 1] = self.fdef.lineno
            for depth, text, line in lines:
                if not text:
                    continue  # (an unused T.reshape tile)
                out.append("  " * depth + text)
                line_map[len(out)] = line
            out.append("}")
            line_map[len(out)] = self.fdef.lineno
        return PrimFunc(name, "\n".join(out) + "\n", self.params,
                        list(self.symbols), dict(self.tunables),
                        self.filename, self.fdef.lineno, line_map, kernels,
                        list(self.globals), list(self.views))

    # --- emitting ----------------------------------------------------------

    def emit(self, text: str) -> int:
        if not self.in_kernel:
            raise KilnSourceError(
                "kernel code outside a `with T.Kernel(...) as ...:` block; "
                "put this statement inside it")
        self.lines.append([self.depth, text, getattr(self.node, "lineno", 0)])
        return len(self.lines) - 1

    def r(self, value: Any) -> str:
        """Renders a kernel value, recording the tunables it uses."""
        e = E.as_expr(value)
        for n in E.names_in(e):
            if isinstance(n, E.Tunable):
                self._tunable(n)
            elif isinstance(n, E.Symbol) and n.a not in self.symbols:
                raise KilnSourceError(
                    f"symbolic dim '{n.a}' is not a dim of any tensor "
                    "parameter, so nothing binds it at launch")
        return E.render(e)

    # --- scopes ------------------------------------------------------------

    def lookup(self, name: str) -> Tuple[Any, str, Optional[_Scope]]:
        s: Optional[_Scope] = self.scope
        while s is not None:
            if name in s.vars:
                value, kind = s.vars[name]
                return value, kind, s
            s = s.parent
        if name in self.env:
            return self.env[name], "python", None
        raise KilnSourceError(f"name '{name}' is not defined")

    def block(self, stmts: List[ast.stmt]) -> None:
        """Walks ``stmts`` one level deeper, in a child scope."""
        self.depth += 1
        self.scope = _Scope(self.scope)
        try:
            for s in stmts:
                self.stmt(s)
        finally:
            self.scope = self.scope.parent  # type: ignore[assignment]
            self.depth -= 1

    def bind(self, name: str, value: Any, kind: str) -> None:
        self.scope.vars[name] = (value, kind)

    # --- statements --------------------------------------------------------

    def stmt(self, node: ast.stmt) -> None:
        saved = self.node
        self.node = node
        method = getattr(self, "stmt_" + type(node).__name__, None)
        try:
            if method is None:
                raise KilnSourceError(
                    f"'{type(node).__name__}' statements are not supported "
                    "in a kernel")
            method(node)
        except KilnSourceError as e:
            raise self._locate(e, node) from None
        finally:
            self.node = saved

    def _kernel(self, node: ast.With) -> None:
        if len(node.items) != 1:
            raise self.error("use one `with T.Kernel(...) as (bx, by):`")
        item = node.items[0]
        try:
            launch = self.ev(item.context_expr)
        except KilnSourceError as e:
            raise self._locate(e, node) from None
        if not isinstance(launch, KernelLaunch):
            raise self.error("only `with T.Kernel(...)` is supported here")
        n = len(launch.blocks)
        target = item.optional_vars
        if target is None:
            py_names = ["bx", "by", "bz"][:n]
        elif isinstance(target, ast.Name):
            py_names = [target.id]
        elif isinstance(target, (ast.Tuple, ast.List)) and \
                all(isinstance(t, ast.Name) for t in target.elts):
            py_names = [t.id for t in target.elts]  # type: ignore
        else:
            raise self.error("bind the block indices to names: "
                             "`as (bx, by)`")
        if len(py_names) != n:
            raise self.error(f"T.Kernel has {n} grid extents but binds "
                             f"{len(py_names)} block indices")
        try:
            grid = ", ".join(self.r(b) for b in launch.blocks)
            threads = self.r(launch.threads)
            cluster = ""
            if launch.cluster and any(not (isinstance(c, int) and c == 1)
                                      for c in launch.cluster):
                cluster = " cluster(" + ", ".join(
                    self.r(c) for c in launch.cluster) + ")"
        except KilnSourceError as e:
            raise self._locate(e, node) from None
        ir_names = []
        for py in py_names:
            ir = self.names.fresh(py)
            ir_names.append(ir)
            self.bind(py, E.Expr("name", ir, ty="int"), "block")
        launch = (f"grid({grid}) threads({threads}){cluster} "
                  f"({', '.join(ir_names)}) {{")
        self.in_kernel = True
        self.lines = []
        self.rasterized = False
        try:
            self.block(node.body)
        finally:
            self.in_kernel = False
        tile_views.drop_unused(self.tile_views)
        self.tile_views = []
        if self.rasterized:  # T.use_swizzle: [depth, text, line]
            self.lines.insert(0, self.rasterized)
        self.parts.append((launch, self.lines))
        self.lines = []

    def eager_call(self, fn: Callable, op: str, args: List[Any],
                   kwargs: Dict[str, Any]) -> Any:
        return fn(*args, **kwargs)  # (raises: T.const / T.empty out of place)

    def stmt_Pass(self, node: ast.Pass) -> None:
        return None

    def stmt_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant) and \
                isinstance(node.value.value, str):
            return  # a docstring or a comment string
        value = self.ev(node.value)
        if value is not None:
            raise self.error("the value of this expression is unused")

    def stmt_With(self, node: ast.With) -> None:
        if not self.in_kernel:
            self._kernel(node)
            return
        frames = [self.ev(item.context_expr) for item in node.items]
        if frames and isinstance(frames[0], IfFrame):
            self._tvm_if(node, frames)
            return
        if len(frames) == 1 and isinstance(frames[0], WarpRoleFrame):
            self._static_block(node.body)  # (block-collective tile ops)
            return
        if frames and isinstance(frames[0], (ThenFrame, ElseFrame)):
            raise self.error("T.Then() and T.Else() belong directly inside "
                             "`with T.If(cond):` (or `with T.If(cond), "
                             "T.Then():`)")
        raise self.error("`with` inside a kernel is not supported (a "
                         "`with T.Kernel(...)` block makes a kernel; blocks "
                         "do not nest)")

    def _tvm_if(self, node: ast.With, frames: List[Any]) -> None:
        """TVM script's conditional: ``with T.If(c), T.Then(): body`` or
        ``with T.If(c):`` holding a ``with T.Then():`` block and an optional
        ``with T.Else():`` block. Lowered as ``if c: ... else: ...``."""
        cond = frames[0].cond
        if len(frames) == 2 and isinstance(frames[1], ThenFrame):
            then_body, else_body = node.body, []
        elif len(frames) == 1:
            parts = []
            for s in node.body:
                kind = None
                if isinstance(s, ast.With) and len(s.items) == 1:
                    kind = self.ev(s.items[0].context_expr)
                if not isinstance(kind, (ThenFrame, ElseFrame)):
                    raise self._locate(KilnSourceError(
                        "a `with T.If(cond):` block holds `with T.Then():` "
                        "and then optionally `with T.Else():`, nothing "
                        "else"), s)
                parts.append((kind, s.body))
            if not parts or not isinstance(parts[0][0], ThenFrame) or \
                    len(parts) > 2 or \
                    (len(parts) == 2 and not isinstance(parts[1][0],
                                                        ElseFrame)):
                raise self.error("`with T.If(cond):` needs one `with "
                                 "T.Then():` block, then at most one `with "
                                 "T.Else():` block")
            then_body = parts[0][1]
            else_body = parts[1][1] if len(parts) == 2 else []
        else:
            raise self.error("write `with T.If(cond), T.Then():` or `with "
                             "T.If(cond):` holding T.Then() / T.Else() "
                             "blocks")
        self._branch(cond, then_body, else_body)

    def alloc_global(self, py_name: str, shape: Tuple[Any, ...],
                     dtype: str) -> None:
        """``X = T.alloc_global(shape, dtype)`` at the top level: a tensor
        the kernels share, allocated by each launch of the prim_func."""
        if self.in_kernel:
            raise KilnSourceError(
                "T.alloc_global allocates a tensor the prim_func's kernels "
                "share: call it outside `with T.Kernel(...)`")
        dims = []
        for d in shape:
            if isinstance(d, E.Symbol) and d.a in self.symbols:
                dims.append(d.a)
            elif isinstance(d, numbers.Integral) and \
                    not isinstance(d, bool) and d > 0:
                dims.append(int(d))
            else:
                raise KilnSourceError(
                    f"T.alloc_global dim {d!r}: dims are positive ints or "
                    "symbolic dims of the parameters")
        ir = self.names.fresh(py_name)
        self.globals.append(Param(ir, dtype, tuple(dims)))
        self.bind(py_name, Buffer(ir, "global", dtype, tuple(
            E.Symbol(d) if isinstance(d, str) else d for d in dims),
            py_name), "buffer")

    def stmt_Return(self, node: ast.Return) -> None:
        raise self.error("a kernel body cannot return")

    def stmt_Assert(self, node: ast.Assert) -> None:
        cond = self.ev(node.test)
        if _is_kernel_value(cond):
            raise self.error("assert needs a Python value; use T.assume "
                             "for a fact checked at launch")
        if not cond:
            msg = self.ev(node.msg) if node.msg else "assertion failed"
            raise self.error(str(msg))

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is None or not isinstance(node.target, ast.Name):
            raise self.error("annotated assignments need a name and a value")
        dtype = self.ev(node.annotation)
        self._assign_name(node.target.id, E.cast(dtype, self.ev(node.value)))

    def stmt_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) != 1:
            raise self.error("chained assignment is not supported")
        target = node.targets[0]
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Call):
            fn = self.ev(node.value.func)
            op = getattr(fn, "_kiln_op", None)
            if op is not None and op.startswith("alloc_"):
                args, kwargs = self._call_args(node.value)
                self._need_tile_context(f"T.{op}")
                tileops.alloc(self, op, fn.__wrapped__, target.id, args,
                              kwargs)
                return
            if op in ("reshape", "view"):
                args, kwargs = self._call_args(node.value)
                buf = tile_views.make(
                    self, op, tileops.bind_args(op, fn.__wrapped__, args,
                                                kwargs), target.id)
                if buf.scope == "global":
                    self._assign_name(target.id, buf)
                else:
                    self.bind(target.id, buf, "buffer")
                return
        value = self.ev(node.value)
        if isinstance(target, ast.Name):
            self._assign_name(target.id, value)
        elif isinstance(target, ast.Subscript):
            self._store(target, "=", value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if _is_kernel_value(value) or \
                    not isinstance(value, (tuple, list)) or \
                    len(value) != len(target.elts):
                raise self.error("tuple assignment needs a Python tuple of "
                                 "the same length")
            for t, v in zip(target.elts, value):
                if not isinstance(t, ast.Name):
                    raise self.error("tuple assignment targets are names")
                self._assign_name(t.id, v)
        else:
            raise self.error("unsupported assignment target")

    def _assign_name(self, name: str, value: Any) -> None:
        try:
            old, kind, scope = self.lookup(name)
        except KilnSourceError:
            old, kind, scope = None, "", None
        if kind == "var":
            self._emit_store(old.buffer, [0], "=", value)
            return
        if kind in ("block", "loop", "param"):
            raise KilnSourceError(
                f"'{name}' is a {kind} name and cannot be reassigned")
        if isinstance(value, (Access, LocalVar)):
            value = E.as_expr(value)
        outer = scope is not None and scope is not self.scope
        if not _is_kernel_value(value):
            if kind in ("let", "buffer"):
                raise KilnSourceError(
                    f"'{name}' names a kernel value; it cannot be rebound "
                    "to a Python value")
            # Python values follow Python: the walk passes each block once,
            # so an assignment updates the scope that holds the name.
            (scope if outer and kind == "python" else self.scope).vars[
                name] = (value, "python")
            return
        if outer:
            raise KilnSourceError(
                f"'{name}' is assigned here but defined in an enclosing "
                "block: a kernel name cannot change value across blocks "
                "(use T.alloc_var for a mutable scalar)")
        if isinstance(value, Buffer):
            self.bind(name, value, "buffer")  # an alias of a buffer
            return
        ir = self.names.fresh(name)
        self.emit(f"let {ir} = {self.r(value)}")
        self.let_values[ir] = E.as_expr(value)
        self.bind(name, E.Expr("name", ir, ty=value.ty), "let")

    def stmt_AugAssign(self, node: ast.AugAssign) -> None:
        value = self.ev(node.value)
        op = type(node.op)
        if isinstance(node.target, ast.Subscript):
            if op in _STORE_OPS:
                self._store(node.target, _STORE_OPS[op], value)
            else:
                current = self.ev(node.target)
                self._store(node.target, "=",
                            E.binop(_BINOPS[op], current, value))
            return
        if not isinstance(node.target, ast.Name):
            raise self.error("unsupported augmented assignment target")
        name = node.target.id
        old, kind, _ = self.lookup(name)
        if kind == "var" and op in _STORE_OPS:
            self._emit_store(old.buffer, [0], _STORE_OPS[op], value)
            return
        if op not in _BINOPS:
            raise self.error("unsupported operator")
        self._assign_name(name, E.binop(_BINOPS[op], old, value)
                          if _is_kernel_value(old) or _is_kernel_value(value)
                          else _py_binop(_BINOPS[op], old, value))

    def _store(self, target: ast.Subscript, op: str, value: Any) -> None:
        base = self.ev(target.value)
        if isinstance(base, LocalVar):
            base = base.buffer
        if not isinstance(base, Buffer):
            raise self.error("only tile elements can be assigned "
                             f"(got {type(base).__name__})")
        items = self._items(base, target.slice)
        self._check_parallel_index(base, items)
        if any(it[0] != "idx" for it in items):
            raise self.error(
                f"assigning a region of '{base.py_name}' is not supported; "
                "use T.fill, T.copy or a T.Parallel loop")
        self._emit_store(base, [it[1] for it in items], op, value)

    def _emit_store(self, buf: Buffer, idx: List[Any], op: str,
                    value: Any) -> None:
        if buf.reshape_of is not None:  # an element of a T.reshape view
            if len(idx) != len(buf.shape):
                raise KilnSourceError(
                    f"'{buf.py_name}' has {len(buf.shape)} dims; got "
                    f"{len(idx)} indices")
            self._emit_store(*tile_views.element(buf, idx), op, value)
            return
        if buf.scope == "global" and op != "=":
            raise KilnSourceError(
                f"'{op}' into global tensor '{buf.py_name}': elements of a "
                "T.Parallel may race; use T.atomic_add, or '='")
        if buf.scope in ("global", "shared") and not self.in_parallel:
            # One element stored by the block (TileLang's `O[bx] = v` at
            # the block level): a T.Parallel of one iteration.
            one = self.names.fresh("one")
            self.emit(f"parallel ({one}) in (1) {{")
            self.depth += 1
            self.in_parallel += 1
            try:
                self._emit_store(buf, idx, op, value)
            finally:
                self.in_parallel -= 1
                self.depth -= 1
            self.emit("}")
            return
        if len(idx) != len(buf.shape):
            raise KilnSourceError(
                f"'{buf.py_name}' has {len(buf.shape)} dims; got "
                f"{len(idx)} indices")
        if self.parallel_updates is not None and \
                buf.scope in ("fragment", "shared") and \
                self.parallel_updates.store(self, buf, idx, op, value):
            return  # a reducer update, lowered around the loop
        target = E.load(buf.name, idx, buf.dtype_ir)
        self.emit(f"{self.r(target)} {op} {self.r(value)}")

    def stmt_If(self, node: ast.If) -> None:
        self._branch(self.ev(node.test), node.body, node.orelse)

    def _branch(self, cond: Any, body: List[ast.stmt],
                orelse: List[ast.stmt]) -> None:
        if not _is_kernel_value(cond):
            self._static_block(body if cond else orelse)
            return
        self.emit(f"if {self._cond(cond)} {{")
        self.parallel_guards += 1
        try:
            self._branches(body, orelse)
        finally:
            self.parallel_guards -= 1

    def _branches(self, body: List[ast.stmt],
                  orelse: List[ast.stmt]) -> None:
        self.block(body)
        while orelse:
            if len(orelse) == 1 and isinstance(orelse[0], ast.If):
                saved = self.node
                self.node = orelse[0]
                c = self.ev(orelse[0].test)
                self.node = saved
                if _is_kernel_value(c):
                    self._close_and(f"}} else if {self._cond(c)} {{",
                                    orelse[0])
                    self.block(orelse[0].body)
                    orelse = orelse[0].orelse
                    continue
                orelse = orelse[0].body if c else orelse[0].orelse
                if not orelse:
                    break
            self._close_and("} else {", orelse[0])
            self.block(orelse)
            break
        self.emit("}")

    def _close_and(self, text: str, node: ast.AST) -> None:
        saved = self.node
        self.node = node
        self.emit(text)
        self.node = saved

    def _static_block(self, stmts: List[ast.stmt]) -> None:
        # A branch chosen in Python shares the enclosing scope, as in Python.
        for s in stmts:
            self.stmt(s)

    def _cond(self, cond: Any) -> str:
        e = E.as_expr(cond)
        if e.ty != "bool":
            raise KilnSourceError(
                f"the condition '{e}' is not a bool; compare it explicitly "
                "(e.g. `!= 0`)")
        return self.r(e)

    def stmt_For(self, node: ast.For) -> None:
        if node.orelse:
            raise self.error("for-else is not supported in a kernel")
        spec = self.ev(node.iter)
        if isinstance(spec, range):
            if spec.step != 1:
                raise self.error("range() with a step is not supported")
            spec = LoopSpec("serial", (spec.start, spec.stop)
                            if spec.start else (spec.stop,))
        if not isinstance(spec, LoopSpec):
            self._python_loop(node, spec)
            return
        if spec.kind == "vectorized":
            spec = self._vectorized(node, spec)
        if spec.kind == "parallel":
            self._parallel(node, spec)
            return
        if spec.kind == "persistent":
            self._persistent(node, spec)
            return
        if not isinstance(node.target, ast.Name):
            raise self.error("the loop variable must be a single name")
        if self.in_parallel and spec.kind == "pipelined":
            raise self.error("T.Pipelined cannot run inside T.Parallel")
        bounds = ", ".join(self.r(a) for a in spec.args)
        if spec.kind == "pipelined":
            st = spec.stages
            if isinstance(st, int) and not 1 <= st <= 8:
                raise self.error(f"num_stages={st}: expected 0 (off) to 8")
            bounds += f", stages={self.r(st)}"
        ir = self.names.fresh(node.target.id)
        self.emit(f"for {ir} in {spec.kind}({bounds}) {{")
        self.depth += 1
        self.scope = _Scope(self.scope)
        try:
            self.bind(node.target.id, E.Expr("name", ir, ty="int"), "loop")
            for s in node.body:
                self.stmt(s)
        finally:
            self.scope = self.scope.parent  # type: ignore[assignment]
            self.depth -= 1
        self.emit("}")

    def stmt_While(self, node: ast.While) -> None:
        while_loop.lower(self, node)  # the counted form (while_loop.py)

    def _persistent(self, node: ast.For, spec: LoopSpec) -> None:
        """T.Persistent: a serial loop over waves; in wave w this block's
        tile is w * wave_size + index, skipped past the domain's last,
        its coordinates row-major over the domain (language/__init__.py)."""
        from kiln import language as T
        domain, wave, index = spec.args
        t = node.target
        targets = [t] if isinstance(t, ast.Name) else \
            list(t.elts) if isinstance(t, (ast.Tuple, ast.List)) else []
        if not domain or len(targets) != len(domain) or \
                not all(isinstance(x, ast.Name) for x in targets):
            raise self.error(f"T.Persistent over {len(domain)} dims binds "
                             f"one name per dim")
        if self.in_parallel:
            raise self.error("T.Persistent cannot run inside T.Parallel")
        total: Any = 1
        for d in domain:
            total = total * d
        waves = T.ceildiv(total, wave)
        w = self.names.fresh("wave")
        self.emit(f"for {w} in serial({self.r(waves)}) {{")
        self.depth += 1
        self.scope = _Scope(self.scope)
        try:
            tile = self.names.fresh("tile")
            self.emit(f"let {tile} = {self.r(E.Expr('name', w, ty='int') * wave + index)}")
            tile_e = E.Expr("name", tile, ty="int")
            self.emit(f"if {self._cond(tile_e < total)} {{")
            self.depth += 1
            # Row-major: dim i's stride is the product of the later dims;
            # the first coordinate needs no modulo (the tile is in range).
            strides: List[Any] = [1] * len(domain)
            for i in range(len(domain) - 2, -1, -1):
                strides[i] = strides[i + 1] * domain[i + 1]
            coords = []
            for i, d in enumerate(domain):
                c = tile_e if _is_one(strides[i]) else \
                    T.floordiv(tile_e, strides[i])
                coords.append(c if i == 0 else T.floormod(c, d))
            for x, c in zip(targets, coords):
                ir = self.names.fresh(x.id)  # type: ignore[attr-defined]
                self.emit(f"let {ir} = {self.r(c)}")
                self.bind(x.id, E.Expr("name", ir, ty="int"),  # type: ignore
                          "loop")
            for s_ in node.body:
                self.stmt(s_)
            self.depth -= 1
            self.emit("}")
        finally:
            self.scope = self.scope.parent  # type: ignore[assignment]
            self.depth -= 1
        self.emit("}")

    def _vectorized(self, node: ast.For, spec: LoopSpec) -> LoopSpec:
        """T.vectorized: a per-thread loop (TileLang runs it whole in each
        thread), so an unrolled loop, unless its body stores something a
        loop outside T.Parallel cannot: then an element-wise T.Parallel
        over its range."""
        if self.in_parallel or self._stores_only_locals(node.body):
            return LoopSpec("unroll", spec.args)
        if len(spec.args) == 1:
            return LoopSpec("parallel", spec.args)
        start, stop = spec.args
        return LoopSpec("parallel", (stop - start,), starts=(start,))

    def _stores_only_locals(self, body: List[ast.stmt]) -> bool:
        """Whether every statement of `body` (at any depth) that stores
        stores a local tile or variable, and none is a tile op."""
        stores = body_stores(body)
        if stores is None:
            return False  # T.copy, T.atomic_add, ...
        for t in stores:
            if isinstance(t, ast.Subscript):
                base = self._peek(t.value)
                if isinstance(base, LocalVar):
                    continue
                if not (isinstance(base, Buffer) and base.scope == "local"):
                    return False
        return True

    def _peek(self, node: ast.expr) -> Any:
        """The value a name is bound to, without translating anything."""
        if not isinstance(node, ast.Name):
            return None
        try:
            return self.lookup(node.id)[0]
        except KilnSourceError:
            return None

    def _parallel(self, node: ast.For, spec: LoopSpec) -> None:
        if self.in_parallel:
            raise self.error("T.Parallel loops cannot nest; write one "
                             "T.Parallel(e0, e1) over both dims")
        t = node.target
        targets = [t] if isinstance(t, ast.Name) else \
            list(t.elts) if isinstance(t, (ast.Tuple, ast.List)) else []
        if not targets or not all(isinstance(x, ast.Name) for x in targets):
            raise self.error("bind T.Parallel's indices to names")
        if len(targets) != len(spec.args):
            raise self.error(f"T.Parallel has {len(spec.args)} extents but "
                             f"binds {len(targets)} names")
        # A T.Parallel over the shape of a reshaped tile it indexes runs
        # over its base tile's index space (tile_views.py).
        view = None if spec.starts else tile_views.loop_view(
            self, spec.args, [x.id for x in targets],  # type: ignore
            node.body)
        shape = list(view.reshape_of.shape) if view else list(spec.args)
        irs = [self.names.fresh(x.id) for x in targets] if view is None \
            else [self.names.fresh(f"{view.reshape_of.py_name}_{d}")
                  for d in range(len(shape))]  # type: ignore[attr-defined]
        extents = ", ".join(self.r(a) for a in shape)
        for ir, extent in zip(irs, shape):
            if isinstance(extent, int) and not isinstance(extent, bool):
                self.parallel_extents[ir] = int(extent)
        self.emit(f"parallel ({', '.join(irs)}) in ({extents}) {{")
        self.depth += 1
        self.in_parallel += 1
        self.scope = _Scope(self.scope)
        names = irs if view else [x.id for x in targets]  # type: ignore
        updates = reducer.ParallelUpdates(self, list(zip(names, irs, shape)))
        self.parallel_updates = updates
        base_vars = [E.Expr("name", ir, ty="int") for ir in irs]
        loop = tile_views.ViewLoop(view, base_vars) if view else None
        try:
            if loop is not None:
                loop.activate()
                values = loop.view_vars
            else:
                starts = spec.starts or (0,) * len(irs)
                values = [v if isinstance(st, int) and st == 0 else v + st
                          for v, st in zip(base_vars, starts)]
            for x, var in zip(targets, values):
                self.bind(x.id, var, "loop")  # type: ignore[attr-defined]
            for s in node.body:
                self.stmt(s)
        finally:
            if loop is not None:
                loop.deactivate()
            self.parallel_updates = None
            self.scope = self.scope.parent  # type: ignore[assignment]
            self.in_parallel -= 1
            self.depth -= 1
        self.emit("}")
        updates.close(self)

    def _python_loop(self, node: ast.For, iterable: Any) -> None:
        """Unrolls a loop over a Python iterable at translation time."""
        if _is_kernel_value(iterable):
            raise self.error("loop over T.Pipelined, T.Parallel, T.Serial, "
                             "T.Unroll or range()")
        try:
            values = list(iterable)
        except TypeError:
            raise self.error(
                f"cannot loop over {type(iterable).__name__}; use T.Serial, "
                "T.Pipelined or T.Parallel") from None
        for v in values:
            if isinstance(node.target, ast.Name):
                self._assign_name(node.target.id, v)
            else:
                raise self.error("the loop variable must be a single name")
            for s in node.body:
                self.stmt(s)

    def _need_tile_context(self, what: str) -> None:
        if self.in_parallel:
            raise KilnSourceError(
                f"{what} cannot be used inside T.Parallel (its body holds "
                "element assignments, lets, ifs and serial loops)")

    # --- expressions -------------------------------------------------------

    def ev(self, node: ast.AST) -> Any:
        method = getattr(self, "ev_" + type(node).__name__, None)
        if method is None:
            raise self.error(f"'{type(node).__name__}' expressions are not "
                             "supported in a kernel", node)
        try:
            return method(node)
        except KilnSourceError as e:
            raise self._locate(e, node) from None

    def ev_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def ev_Name(self, node: ast.Name) -> Any:
        value, _, _ = self.lookup(node.id)
        return value

    def ev_Attribute(self, node: ast.Attribute) -> Any:
        base = self.ev(node.value)
        try:
            return getattr(base, node.attr)
        except AttributeError:
            what = getattr(base, "__name__", type(base).__name__)
            reason = getattr(base, "UNSUPPORTED", {}).get(node.attr) \
                if what == "kiln.language" else None
            if reason:
                raise KilnSourceError(f"T.{node.attr} is not supported: "
                                      f"{reason}") from None
            raise KilnSourceError(
                f"'{what}' has no attribute '{node.attr}'") from None

    def ev_Lambda(self, node: ast.Lambda) -> Any:
        """A Python lambda (the index map of ``T.Layout(shape, lambda i,
        j: [...])``): an ordinary Python function over the kernel's Python
        names, never part of the kernel's code."""
        expr = ast.fix_missing_locations(ast.Expression(body=node))
        return eval(compile(expr, self.filename, "eval"),  # noqa: S307
                    dict(self.env))

    def ev_Tuple(self, node: ast.Tuple) -> Any:
        return tuple(self._elts(node.elts))

    def ev_ListComp(self, node: ast.ListComp) -> Any:
        return self._comprehension(node)

    def ev_GeneratorExp(self, node: ast.GeneratorExp) -> Any:
        # (Consumed at once, so a list serves: `sum(x for x in sizes)`.)
        return self._comprehension(node)

    def _comprehension(self, node: Any) -> List[Any]:
        """A comprehension over Python values, evaluated while translating
        (its elements may be kernel values: `sum(A[i] for i in range(4))`
        builds one expression)."""
        out: List[Any] = []

        def walk(level: int) -> None:
            if level == len(node.generators):
                out.append(self.ev(node.elt))
                return
            gen = node.generators[level]
            iterable = self.ev(gen.iter)
            if gen.is_async or _is_kernel_value(iterable) or \
                    isinstance(iterable, LoopSpec):
                raise self.error("a comprehension in a kernel runs in "
                                 "Python: iterate over a Python value (a "
                                 "list, a range of ints)", gen.iter)
            for value in iterable:
                self._bind_comprehension(gen.target, value)
                keep = True
                for cond in gen.ifs:
                    c = self.ev(cond)
                    if _is_kernel_value(c):
                        raise self.error("a comprehension's `if` must be a "
                                         "Python condition", cond)
                    keep = keep and bool(c)
                if keep:
                    walk(level + 1)

        self.scope = _Scope(self.scope)
        try:
            walk(0)
        finally:
            self.scope = self.scope.parent  # type: ignore[assignment]
        return out

    def _bind_comprehension(self, target: ast.expr, value: Any) -> None:
        if isinstance(target, ast.Name):
            self.scope.vars[target.id] = (value, "python")
            return
        if isinstance(target, (ast.Tuple, ast.List)):
            values = list(value)
            if len(values) != len(target.elts):
                raise self.error(f"cannot unpack {len(values)} values into "
                                 f"{len(target.elts)} names", target)
            for t, v in zip(target.elts, values):
                self._bind_comprehension(t, v)
            return
        raise self.error("bind a comprehension's values to names", target)

    def ev_List(self, node: ast.List) -> Any:
        return list(self._elts(node.elts))

    def _elts(self, elts: List[ast.expr]) -> List[Any]:
        out: List[Any] = []
        for e in elts:
            if isinstance(e, ast.Starred):
                out.extend(self.ev(e.value))
            else:
                out.append(self.ev(e))
        return out

    def ev_Dict(self, node: ast.Dict) -> Any:
        if any(k is None for k in node.keys):
            raise self.error("** in a dict display is not supported", node)
        return {self.ev(k): self.ev(v) for k, v in zip(node.keys, node.values)}

    def ev_Subscript(self, node: ast.Subscript) -> Any:
        base = self.ev(node.value)
        if isinstance(base, LocalVar):
            base = base.buffer
        if isinstance(base, Buffer):
            return Access(base, self._items(base, node.slice))
        index = self.ev(node.slice)
        if _is_kernel_value(index):
            raise KilnSourceError("a Python sequence cannot be indexed by a "
                                  "kernel value")
        return base[index]

    def _check_parallel_index(self, buf: Buffer, items: List[Tuple]) -> None:
        """A tile stored to, outside any `if` of the T.Parallel body, at the
        loop's own variable over more iterations than the tile has
        elements: the extra iterations would store nothing (Kiln clips
        them; TileLang leaves them undefined), which is never what the
        program means (TileLang's attention-sink examples size a fragment
        by heads and fill it over block_M, then read it over block_M). A
        located error. (Reads are not checked: `T.if_then_else(i < n,
        t[i], 0)` reads past a tile on purpose, and reads past one give 0.)"""
        if not self.in_parallel or self.parallel_guards or \
                buf.scope == "global":
            return
        for d, it in enumerate(items):
            v = it[1] if it[0] == "idx" else None
            if not (isinstance(v, E.Expr) and v.kind == "name") or \
                    d >= len(buf.shape):
                continue
            extent = self.parallel_extents.get(v.a)
            size = buf.shape[d]
            if isinstance(extent, int) and isinstance(size, int) and \
                    extent > size:
                raise KilnSourceError(
                    f"'{buf.py_name}' has {size} elements along dim {d}, "
                    f"but the T.Parallel loop stores to it at a variable "
                    f"of {extent} iterations: size the tile to the loop, "
                    f"or guard the access (`if i < {size}:`)")

    def _items(self, buf: Buffer, node: ast.expr) -> List[Tuple]:
        parts = node.elts if isinstance(node, ast.Tuple) else [node]
        items: List[Tuple] = []
        for p in parts:
            if isinstance(p, ast.Slice):
                if p.step is not None:
                    raise self.error("slices with a step are not supported", p)
                lo = None if p.lower is None else self.ev(p.lower)
                hi = None if p.upper is None else self.ev(p.upper)
                items.append(("slice", _scalar(lo), _scalar(hi)))
            else:
                v = self.ev(p)
                if isinstance(v, (tuple, list)):
                    items.extend(("idx", _scalar(x)) for x in v)
                else:
                    items.append(("idx", _scalar(v)))
        return items

    def ev_BinOp(self, node: ast.BinOp) -> Any:
        a, b = self.ev(node.left), self.ev(node.right)
        if isinstance(node.op, ast.Pow):
            return E.power(_scalar(a), _scalar(b))
        op = _BINOPS.get(type(node.op))
        if op is None:
            raise KilnSourceError("unsupported operator")
        if not (_is_kernel_value(a) or _is_kernel_value(b)):
            return _py_binop(op, a, b)
        return E.binop(op, _scalar(a), _scalar(b))

    def ev_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.ev(node.operand)
        if isinstance(node.op, ast.UAdd):
            return v
        op = {ast.USub: "-", ast.Invert: "~", ast.Not: "!"}[type(node.op)]
        if not _is_kernel_value(v):
            return {"-": lambda x: -x, "~": lambda x: ~x,
                    "!": lambda x: not x}[op](v)
        return E.unop(op, _scalar(v))

    def ev_BoolOp(self, node: ast.BoolOp) -> Any:
        op = "&&" if isinstance(node.op, ast.And) else "||"
        result = self.ev(node.values[0])
        for v in node.values[1:]:
            if not _is_kernel_value(result):
                # Python short-circuit on a Python value.
                if (op == "&&" and not result) or (op == "||" and result):
                    return result
                result = self.ev(v)
                continue
            result = E.logical(op, _scalar(result), _scalar(self.ev(v)))
        return result

    def ev_Compare(self, node: ast.Compare) -> Any:
        left = self.ev(node.left)
        result: Any = None
        for op, right_node in zip(node.ops, node.comparators):
            right = self.ev(right_node)
            cmp = _CMPOPS.get(type(op))
            if not (_is_kernel_value(left) or _is_kernel_value(right)):
                value = _py_compare(op, left, right)
            elif cmp is None:
                raise KilnSourceError(
                    "only < <= > >= == != compare kernel values")
            else:
                value = E.compare(cmp, _scalar(left), _scalar(right))
            result = value if result is None else \
                E.logical("&&", result, value)
            left = right
        return result

    def ev_IfExp(self, node: ast.IfExp) -> Any:
        cond = self.ev(node.test)
        if not _is_kernel_value(cond):
            return self.ev(node.body if cond else node.orelse)
        return E.call("select", [_scalar(cond), _scalar(self.ev(node.body)),
                                 _scalar(self.ev(node.orelse))])

    def _call_args(self, node: ast.Call) -> Tuple[List[Any], Dict[str, Any]]:
        args = self._elts(node.args)
        kwargs: Dict[str, Any] = {}
        for kw in node.keywords:
            if kw.arg is None:
                kwargs.update(self.ev(kw.value))
            else:
                kwargs[kw.arg] = self.ev(kw.value)
        return args, kwargs

    def ev_Call(self, node: ast.Call) -> Any:
        fn = self.ev(node.func)
        args, kwargs = self._call_args(node)
        if isinstance(fn, Macro):
            return self._inline(fn, args, kwargs)
        eager = getattr(fn, "_kiln_eager", None)
        if eager is not None:
            return self.eager_call(fn, eager, args, kwargs)
        op = getattr(fn, "_kiln_op", None)
        if op is not None:
            if op.startswith("alloc_") or op in ("reshape", "view"):
                raise KilnSourceError(f"assign T.{op}(...) to a name")
            if op in atomics.STORE_OPS and self.in_parallel:
                atomics.element(self, op, fn.__wrapped__, args, kwargs)
                return None
            self._need_tile_context(f"T.{op}")
            tileops.run(self, op, fn.__wrapped__, args, kwargs)
            return None
        if fn is builtins.range:
            if any(_is_kernel_value(a) for a in args):
                return LoopSpec("serial", tuple(args[:2]) if len(args) > 1
                                else tuple(args))
        if fn in (builtins.max, builtins.min, builtins.abs) and \
                any(_is_kernel_value(a) for a in args):
            name = fn.__name__
            if name != "abs" and len(args) > 2:
                acc = args[0]
                for a in args[1:]:
                    acc = E.call(name, [_scalar(acc), _scalar(a)])
                return acc
            return E.call(name, [_scalar(a) for a in args])
        args = [_scalar(a) if isinstance(a, Access) and a.all_indices()
                else a for a in args]
        try:
            result = fn(*args, **kwargs)
        except KilnSourceError:
            raise
        except Exception as e:  # a user helper failed: say where
            name = getattr(fn, "__name__", repr(fn))
            raise KilnSourceError(
                f"{name}(...) raised {type(e).__name__}: {e}") from e
        if isinstance(result, TensorType) and result.data is not None:
            # T.Tensor(shape, dtype, x.data): named after the name it is
            # assigned to, when this call is an assignment's whole value.
            stmt = self.node
            target = stmt.targets[0] if isinstance(stmt, ast.Assign) and \
                stmt.value is node and len(stmt.targets) == 1 else None
            return views.make(self, result, target.id if isinstance(
                target, ast.Name) else None)
        return result

    def _inline(self, macro: "Macro", args: List[Any],
                kwargs: Dict[str, Any]) -> Any:
        """Walks a @T.macro body in place, its parameters bound to the
        call's values (tiles, kernel values or Python values)."""
        fdef, filename = macro.parsed()
        try:
            bound = inspect.signature(macro.func).bind(*args, **kwargs)
        except TypeError as e:
            raise KilnSourceError(f"{macro.func.__name__}(): {e}") from None
        bound.apply_defaults()
        saved = (self.env, self.scope, self.filename)
        self.env = _function_env(macro.func)
        self.scope = _Scope(None)
        self.filename = filename
        result = None
        try:
            for name, value in bound.arguments.items():
                kind = "buffer" if isinstance(value, Buffer) else \
                    "var" if isinstance(value, LocalVar) else \
                    "param" if isinstance(value, E.Expr) else "python"
                self.bind(name, _scalar(value) if isinstance(value, Access)
                          else value, kind)
            body = fdef.body
            for i, stmt in enumerate(body):
                if isinstance(stmt, ast.Return):
                    if i != len(body) - 1:
                        raise self.error("a macro returns only at its end",
                                         stmt)
                    result = None if stmt.value is None else \
                        self.ev(stmt.value)
                else:
                    self.stmt(stmt)
        finally:
            self.env, self.scope, self.filename = saved
        return result


# --- TileLang's eager style ---------------------------------------------

def is_eager(func: Callable) -> bool:
    """True for a ``@tilelang.jit`` function written in the eager style: its
    own body is the kernel (a top-level ``with T.Kernel``, or a tensor
    annotation ``A: T.Tensor(...)`` without a value), where the lazy style
    returns a ``@T.prim_func``."""
    try:
        fdef, _ = _parse_function(func)
    except KilnSourceError:
        return False
    return any(isinstance(s, ast.With) or
               (isinstance(s, ast.AnnAssign) and s.value is None)
               for s in fdef.body)


class EmptyTensor:
    """``T.empty(shape, dtype)`` before it is bound to a name."""

    def __init__(self, shape: Any, dtype: Any):
        self.shape = shape
        self.dtype = dtype


def _const_names(spec: Any) -> List[str]:
    names = spec.replace(",", " ").split() if isinstance(spec, str) else None
    if not names or not all(n.isidentifier() for n in names):
        raise KilnSourceError(
            f"T.const takes a string of dim names (\"M, N, K\"); got "
            f"{spec!r}")
    return names


class _ProbeDim(int):
    """A T.const dim while an eager function is probed: a stand-in value
    (large, distinct per dim) that plain Python arithmetic on the dims can
    use (``K // split_k``, ``T.ceildiv(N, g)``; the results are plain ints,
    which the probe ignores), and which a tensor annotation reads back as
    the dim's name."""

    def __new__(cls, name: str, k: int) -> "_ProbeDim":
        value = super().__new__(cls, 1_000_003 + 1_009 * k)
        value.name = name
        return value


class _EagerTranslator(_Translator):
    """An eager ``@tilelang.jit`` function as a prim_func. ``spec`` gives
    its Python arguments (tile sizes, dtypes); ``consts`` the T.const dims,
    or None for a probe that leaves them symbolic (to learn the tensors'
    shapes, then match them against the arguments of a direct call).
    Tensor parameters are the function's parameters annotated in the body,
    in the signature's order, then the T.empty outputs."""

    def __init__(self, func: Callable, spec: Dict[str, Any],
                 consts: Optional[Dict[str, int]]):
        super().__init__(func)
        self.consts = consts
        self.probing = consts is None
        self.arg_names = [a.arg for a in self.fdef.args.args]
        self.env.update(spec)
        self.empties: List[str] = []   # IR names, in declaration order
        self.returned: Optional[List[str]] = None
        self.const_names: List[str] = []
        self.position: Dict[str, int] = {}  # IR name -> signature index

    def _bind_params(self) -> None:
        args = self.fdef.args
        if args.vararg or args.kwarg:
            raise self.error("an eager @tilelang.jit function takes named "
                             "parameters only")

    def eager_call(self, fn: Callable, op: str, args: List[Any],
                   kwargs: Dict[str, Any]) -> Any:
        if self.in_kernel:
            raise KilnSourceError(f"T.{op} belongs before `with T.Kernel`")
        if op == "empty":
            shape = kwargs.get("shape", args[0] if args else None)
            dtype = kwargs.get("dtype", args[1] if len(args) > 1 else
                               "float32")
            return EmptyTensor(shape, dtype)
        names = _const_names(kwargs.get("names", args[0] if args else None))
        values = []
        for n in names:
            self.const_names.append(n)
            if self.consts is None:
                values.append(_ProbeDim(n, len(self.const_names)))
            elif n not in self.consts:
                raise KilnSourceError(
                    f"T.const dim '{n}' has no value: pass {n}=... to "
                    ".compile(...), or call the function with tensors")
            else:
                values.append(int(self.consts[n]))
        return values[0] if len(values) == 1 else tuple(values)

    def stmt_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None or not isinstance(node.target, ast.Name):
            super().stmt_AnnAssign(node)
            return
        name = node.target.id
        if self.in_kernel or name not in self.arg_names:
            raise self.error(
                f"'{name}: ...' declares a tensor or scalar parameter: it "
                "names a parameter of the function, before `with "
                "T.Kernel`")
        self._bind_param(name, self.ev(node.annotation))
        self.position[self.params[-1].name] = self.arg_names.index(name)

    def stmt_Assign(self, node: ast.Assign) -> None:
        target = node.targets[0] if len(node.targets) == 1 else None
        if isinstance(target, ast.Name) and isinstance(node.value, ast.Call) \
                and getattr(self.ev(node.value.func), "_kiln_eager",
                            None) == "empty":
            t = self.ev(node.value)
            shape = t.shape if isinstance(t.shape, (tuple, list)) \
                else (t.shape,)
            if self.probing:
                # A probe learns the inputs' dims only: an output's dims,
                # computed from the stand-in values (a convolution's OH
                # from H and K), may be anything, even negative.
                shape = tuple(d if isinstance(d, (_ProbeDim, E.Symbol))
                              else 1 for d in shape)
            self._bind_param(target.id, TensorType(shape, t.dtype))
            self.empties.append(self.params[-1].name)
            return
        super().stmt_Assign(node)


    def _assign_name(self, name: str, value: Any) -> None:
        if isinstance(value, E.Symbol) and not self.in_kernel:
            # `M = T.dynamic("m")` before the kernel: a name for the run-time
            # dim, as a module's `M = T.symbolic("M")` is.
            self.scope.vars[name] = (value, "python")
            return
        super()._assign_name(name, value)

    def stmt_Return(self, node: ast.Return) -> None:
        if self.in_kernel:
            raise self.error("return the outputs after the `with T.Kernel` "
                             "block")
        value = self.ev(node.value) if node.value is not None else ()
        values = value if isinstance(value, (tuple, list)) else (value,)
        names = []
        for v in values:
            if not (isinstance(v, Buffer) and v.scope == "global"):
                raise self.error("an eager kernel returns its T.empty "
                                 "tensors (or a tuple of them)")
            if v.view is not None:
                raise self.error(f"'{v.py_name}' is a view: return the "
                                 f"tensor it views, '{v.view.base_py_name}'")
            names.append(v.name)
        self.returned = names

    def stmt_Assert(self, node: ast.Assert) -> None:
        if self.consts is None:
            return  # a probe: the dims it would test have no values yet
        super().stmt_Assert(node)

    def outputs(self) -> List[str]:
        return self.empties if self.returned is None else self.returned

    def _assemble(self, name: str) -> PrimFunc:
        inputs = [p for p in self.params if p.name not in self.empties]
        inputs.sort(key=lambda p: self.position.get(p.name, 0))
        self.params = inputs + [p for p in self.params
                                if p.name in self.empties]
        return super()._assemble(name)



    def probe(self) -> List[Tuple[str, Param]]:
        """The tensor and scalar parameters in order, by their Python
        names, with the T.const dims still symbols: the statements before
        and between the kernels (the kernels themselves need the dims'
        values)."""
        for stmt in self.fdef.body:
            if not isinstance(stmt, (ast.With, ast.Return)):
                self.stmt(stmt)
        inputs = [p for p in self.params if p.name not in self.empties]
        inputs.sort(key=lambda p: self.position.get(p.name, 0))
        return [(self.arg_names[self.position[p.name]], p) for p in inputs]


def translate_eager(func: Callable, spec: Dict[str, Any],
                    consts: Dict[str, int]
                    ) -> Tuple[PrimFunc, List[str], List[str]]:
    """The prim_func of an eager function (see _EagerTranslator), the IR
    names of its outputs and the T.const names it declares."""
    t = _EagerTranslator(func, spec, consts)
    prim = t.run()
    return prim, t.outputs(), t.const_names


def probe_eager(func: Callable, spec: Dict[str, Any]
                ) -> Tuple[List[Tuple[str, Param]], List[str]]:
    """The input parameters of an eager function (a T.const dim named in
    its shape), and the T.const names (other named dims are T.dynamic)."""
    t = _EagerTranslator(func, spec, None)
    return t.probe(), list(t.const_names)


def _param_text(p: Param) -> str:
    if not p.is_tensor:
        return f"{p.name}: {p.dtype}"
    text = f"{p.name}: {p.dtype}[{', '.join(map(str, p.shape))}]"
    if p.strides:
        text += f" strides [{', '.join(p.strides)}]"
    return text


def body_stores(body: List[ast.stmt]) -> Optional[List[ast.expr]]:
    """The targets of every assignment in ``body``, at any depth; None
    when a statement is a call (a tile op: T.copy, T.atomic_add...)."""
    out: List[ast.expr] = []
    for n in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call):
            return None
        if isinstance(n, ast.Assign):
            out.extend(n.targets)
        elif isinstance(n, (ast.AugAssign, ast.AnnAssign)):
            out.append(n.target)
    return out


def _is_one(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v == 1


def _scalar(v: Any) -> Any:
    """An element access as an Expr; anything else unchanged."""
    if isinstance(v, (Access, LocalVar)):
        return E.as_expr(v)
    return v


def _py_binop(op: str, a: Any, b: Any) -> Any:
    import operator as o
    fns = {"+": o.add, "-": o.sub, "*": o.mul, "/": o.truediv,
           "//": o.floordiv, "%": o.mod, "<<": o.lshift, ">>": o.rshift,
           "&": o.and_, "|": o.or_, "^": o.xor}
    try:
        return fns[op](a, b)
    except Exception as e:
        raise KilnSourceError(f"{type(e).__name__}: {e}") from e


def _py_compare(op: ast.cmpop, a: Any, b: Any) -> Any:
    import operator as o
    fns = {ast.Lt: o.lt, ast.LtE: o.le, ast.Gt: o.gt, ast.GtE: o.ge,
           ast.Eq: o.eq, ast.NotEq: o.ne, ast.Is: o.is_, ast.IsNot: o.is_not,
           ast.In: lambda x, y: x in y, ast.NotIn: lambda x, y: x not in y}
    return fns[type(op)](a, b)
