"""``@kiln.jit``: from a prim_func to a launchable kernel.

``@kiln.jit(out_idx=...)`` wraps a function that returns a ``@T.prim_func``
(as ``@tilelang.jit`` does). Calling the wrapper translates the kernel; the
result's ``.ir`` is the tile IR. Calling the kernel with arrays checks them,
allocates the ``out_idx`` outputs, compiles through libkiln on first use per
target (embedded, or kilnd when ``KILN_ADDRESS`` is set or ``kiln.connect``
was called) and launches: NumPy arrays on the CPU target, torch CUDA tensors
on torch's current stream.
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import re
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

from kiln import _client, _launch
from kiln._dsl.frontend import (LazyPrimFunc, PrimFunc, is_eager, probe_eager,
                                translate_eager)
from kiln.errors import (KilnArgumentError, KilnCompileError, KilnSourceError,
                         KilnStatusError)

OutIdx = Optional[Union[int, Sequence[int]]]


def _normalize_out_idx(out_idx: OutIdx, nparams: int) -> List[int]:
    if out_idx is None:
        return []
    items = [out_idx] if isinstance(out_idx, int) else list(out_idx)
    out = []
    for i in items:
        if not isinstance(i, int) or not -nparams <= i < nparams:
            raise KilnArgumentError(
                f"out_idx {i!r} is out of range for {nparams} parameters")
        out.append(i % nparams)
    if len(set(out)) != len(out):
        raise KilnArgumentError(f"out_idx {out_idx!r} repeats a parameter")
    return sorted(out)


_DIAG = re.compile(r"(?P<file>[^\s:]+):(?P<line>\d+):(?P<col>\d+): "
                   r"(?P<rest>.*)$")


class JITKernel:
    """A translated kernel: ``.ir`` now; compiled and launched on call."""

    def __init__(self, prim_func: PrimFunc, out_idx: OutIdx = None,
                 target: str = "auto",
                 bindings: Optional[Dict[str, int]] = None):
        if not isinstance(prim_func, PrimFunc):
            raise KilnSourceError(
                f"expected a @T.prim_func; got {type(prim_func).__name__}")
        if isinstance(prim_func, LazyPrimFunc):
            prim_func = prim_func.translated()  # its errors surface here
        self.prim_func = prim_func
        self.params = prim_func.params
        self.out_idx = _normalize_out_idx(out_idx, len(self.params))
        for i in self.out_idx:
            if not self.params[i].is_tensor:
                raise KilnArgumentError(
                    f"out_idx names '{self.params[i].name}', a scalar")
        self.target = target
        self.bindings = dict(bindings or {})
        unknown = set(self.bindings) - set(prim_func.tunables)
        if unknown:
            raise KilnArgumentError(
                f"bindings {sorted(unknown)} are not tunables of "
                f"{prim_func.name}")
        self._handles: Dict[str, Any] = {}
        self._lock = threading.Lock()
        self._fast: Optional[_FastLaunch] = None

    # --- inspection --------------------------------------------------------

    @property
    def ir(self) -> str:
        """The tile IR of the kernel."""
        return self.prim_func.ir

    @property
    def name(self) -> str:
        return self.prim_func.name

    def get_kernel_source(self) -> str:
        """TileLang's name for the generated source: here the tile IR."""
        return self.ir

    def get_profiler(self, tensor_supply_type: Any = None,
                     **_options: Any) -> Any:
        """TileLang's profiler: inputs from the signature, a check against
        a reference program, timing (kiln/profiler.py)."""
        from kiln import profiler
        supply = tensor_supply_type if tensor_supply_type is not None \
            else profiler.TensorSupplyType.Auto
        return profiler.Profiler(self, supply)

    def __repr__(self) -> str:
        return f"<kiln JITKernel {self.name} bindings={self.bindings}>"

    # --- compiling ---------------------------------------------------------

    def compile(self, target: Optional[str] = None) -> Any:
        """Compiles for ``target`` (default: the kernel's) once; returns the
        libkiln handle (key, metadata, binary...), or for a prim_func of
        several T.Kernel blocks the list of their handles, in launch
        order."""
        handles = self._compile(target)
        return handles[0] if len(handles) == 1 else handles

    def _compile(self, target: Optional[str] = None) -> List[Any]:
        target = target or self.target
        cached = self._handles.get(target)
        if cached is not None and cached[0] is _client.current():
            return cached[1]  # the fast path of every launch: no locks
        missing = [t for t in self.prim_func.tunables
                   if t not in self.bindings]
        if missing:
            raise KilnArgumentError(
                f"{self.name}: tunables {missing} have no value; bind them "
                "(kiln.autotune does) before compiling")
        with self._lock:
            client = _client.default_client()
            # A handle belongs to the client that compiled it: a new default
            # client (kiln.connect) compiles again.
            cached = self._handles.get(target)
            if cached is not None and cached[0] is client:
                return cached[1]
            filename = f"{self.name}.tile"
            handles = []
            for part in self.prim_func.kernels:
                try:
                    handles.append(client.compile(
                        self.ir, part.name, target,
                        sorted((k, v) for k, v in self.bindings.items()
                               if k in part.tunables), filename))
                except KilnCompileError as e:
                    detail = self._explain(e.detail, filename)
                    raise KilnCompileError(e.code, detail) from None
            self._handles[target] = (client, handles)
            return handles

    def _explain(self, message: str, filename: str) -> str:
        """Adds the Python line behind each IR diagnostic, and the IR."""
        pf = self.prim_func
        out = [message]
        for line in message.splitlines():
            m = _DIAG.search(line.strip())
            if m and m.group("file").endswith(filename):
                py = pf.line_map.get(int(m.group("line")))
                if py is not None:
                    out.append(f"{pf.filename}:{py}: {m.group('rest')} "
                               f"(tile IR {m.group('line')}:{m.group('col')})")
        numbered = "\n".join(f"{i + 1:4} {l}" for i, l in
                             enumerate(pf.ir.splitlines()))
        out.append(f"--- tile IR of {pf.name} ---\n{numbered}")
        return "\n".join(out)

    # --- launching ---------------------------------------------------------

    def check_inputs(self, args: Sequence[Any]) -> Tuple[
            List[int], List[Any], Dict[str, Tuple[int, str]],
            List[_launch.TensorView], str]:
        """Checks the caller's arguments against the parameters: the input
        parameter indices, a value per parameter (tensor views, packed
        scalars; None for outputs), the symbols the tensors bind, the
        views, and the one device they are on ("cpu" without tensors)."""
        params = self.params
        inputs = [i for i in range(len(params)) if i not in self.out_idx]
        if len(args) != len(inputs):
            names = ", ".join(params[i].name for i in inputs)
            raise KilnArgumentError(
                f"{self.name} takes {len(inputs)} arguments ({names}); got "
                f"{len(args)}")
        values: List[Any] = [None] * len(params)
        symbols: Dict[str, Tuple[int, str]] = {}
        views: List[_launch.TensorView] = []
        # The first buffer view (T.Tensor(shape, dtype, x.data)) of each
        # viewed parameter, for the message if its memory is not row-major.
        viewed = {v.base: v for v in reversed(self.prim_func.views)}
        for i, arg in zip(inputs, args):
            p = params[i]
            where = f"argument '{p.name}' of {self.name}"
            if p.is_tensor:
                v = _launch.view(arg, where)
                if p.name in viewed:
                    _launch.check_viewable(v, viewed[p.name].where(), where)
                _launch.check_tensor(p, v, symbols, where)
                views.append(v)
                values[i] = v
            else:
                values[i] = _launch.pack_scalar(p.dtype, arg, where)
        for view in self.prim_func.views:
            view.bind_symbols(symbols, self.name)
        devices = sorted({v.device for v in views})
        if len(devices) > 1:
            raise KilnArgumentError(
                f"{self.name}: tensors are on different devices: "
                + ", ".join(devices))
        return inputs, values, symbols, views, \
            devices[0] if devices else "cpu"

    def __call__(self, *args: Any, stream: Optional[int] = None) -> Any:
        fast = self._fast
        if fast is not None:
            result = fast.launch(args, stream)
            if result is not _MISS:
                return result
        params = self.params
        inputs, values, symbols, views, device = self.check_inputs(args)
        if device != "cpu" and not device.startswith("cuda"):
            raise KilnArgumentError(f"{self.name}: unsupported device "
                                    f"{device}")
        outputs = []
        shared = {}  # the T.alloc_global tensors, by IR name
        for i in self.out_idx + [-1 - g for g in
                                 range(len(self.prim_func.globals))]:
            p = params[i] if i >= 0 else self.prim_func.globals[-1 - i]
            where = f"output '{p.name}' of {self.name}" if i >= 0 else \
                f"T.alloc_global tensor {p.name} of {self.name}"
            shape = _launch.output_shape(p, symbols, where)
            if not views:
                raise KilnArgumentError(
                    f"{where}: no input tensor says whether to allocate "
                    "NumPy or torch; pass the output in (out_idx=None)")
            out = _launch.allocate(views[0], p.dtype, tuple(shape), where,
                                   scratch=i < 0)
            v = _launch.view(out, where)
            if i < 0:
                shared[p.name] = (out, v)
                continue
            values[i] = v
            outputs.append(out)
        if device == "cpu":
            if self.target not in ("auto", "cpu"):
                raise KilnArgumentError(
                    f"{self.name} targets {self.target}; host arrays run on "
                    "the CPU target only")
            target, stream_ptr = "cpu", None
        else:
            target = self.target
            stream_ptr = stream if stream is not None else \
                _current_cuda_stream(device)
        handles = self._compile(target)
        # The parameters a kernel has beyond the prim_func's: the shared
        # tensors, and the views, each its base's memory reshaped.
        extras = {name: v for name, (_, v) in shared.items()}
        if self.prim_func.views:
            tensors = {p.name: v for p, v in zip(params, values)
                       if p.is_tensor}
            tensors.update(extras)
            for view in self.prim_func.views:
                extras[view.name] = _launch.reshaped(
                    tensors[view.base], view.shape_at(symbols))
        # The kernels in order on one stream (each sees the one before's
        # writes); the shared tensors live until all ran.
        marshalled = []
        for part, handle in zip(self.prim_func.kernels, handles):
            extra = part.params[len(params):]
            marshalled.append(_launch.marshal(
                part.params, values + [extras[g.name] for g in extra]))
            handle.launch(marshalled[-1].args, stream_ptr)
        if device != "cpu" and stream is not None and shared:
            # Allocated on torch's current stream, used on another: torch
            # must not reuse the memory before that one is done.
            torch = sys.modules["torch"]
            for out, _ in shared.values():
                out.record_stream(torch.cuda.ExternalStream(stream))
        # (Only for torch tensors passed as such: a DLPack argument is
        # viewed anew on every call.)
        if device != "cpu" and all(
                _launch.is_torch_tensor(a) for i, a in zip(inputs, args)
                if params[i].is_tensor):
            self._fast = _FastLaunch(self, handles, marshalled, inputs, args,
                                     outputs, shared, device)
        if not outputs:
            return None
        return outputs[0] if len(outputs) == 1 else outputs


_MISS = object()


class _FastLaunch:
    """The last checked launch of a kernel on CUDA tensors, kept so that a
    call with the same dtypes, shapes, strides, devices and scalar values
    only swaps the data pointers into the already built ``kiln_arg[]``
    (libkiln checks the arguments again, cheaply). Anything else, or a
    concurrent call, misses and takes the full path."""

    def __init__(self, kernel: JITKernel, handles: List[Any],
                 marshalled: List[Any], inputs: List[int],
                 args: Sequence[Any], outputs: List[Any],
                 shared: Dict[str, Tuple[Any, Any]], device: str):
        torch = sys.modules["torch"]
        self._torch = torch
        self._tensor_type = torch.Tensor
        self._client = _client.current()
        self._handles = handles  # keep the kernels alive
        # One kiln_arg[] per kernel of the prim_func, launched in order.
        arrs = [m.args for m in marshalled]
        self._arrs = arrs
        # The dtype strings and shape arrays the entries point at (not the
        # caller's tensors).
        self._keep = [k for m in marshalled for k in m.keep
                      if not isinstance(k, torch.Tensor)]
        self._nargs = len(args)
        parts = kernel.prim_func.kernels
        aliases: Dict[str, List[str]] = {}  # a tensor -> its views
        for v in kernel.prim_func.views:
            aliases.setdefault(v.base, []).append(v.name)

        # Each tensor's data-pointer slots in the kiln_arg[]s (setting a
        # c_void_p over the array's memory costs less than arr[i].data),
        # its views' included.
        def slots(name: str) -> List[Any]:
            out = []
            for part, arr in zip(parts, arrs):
                names = [p.name for p in part.params]
                size = ctypes.sizeof(arr[0])
                offset = type(arr[0]).data.offset
                for n in [name] + aliases.get(name, []):
                    if n in names:
                        out.append(ctypes.c_void_p.from_buffer(
                            arr, names.index(n) * size + offset))
            return out
        self._tensors = []
        self._scalars = []
        for pos, (i, arg) in enumerate(zip(inputs, args)):
            p = kernel.params[i]
            if p.is_tensor:
                self._tensors.append((pos, slots(p.name), arg.dtype,
                                      arg.shape, arg.stride(),
                                      arg.get_device()))
            else:
                self._scalars.append((pos, type(arg), arg))
        # Outputs are allocated like an input of the same shape and dtype
        # when there is a contiguous one (torch.empty_like costs half of
        # torch.empty(shape, dtype=, device=)), else with new_empty; the
        # T.alloc_global tensors too, but not returned.
        self._outputs = []
        named = [(kernel.params[i].name, out, True)
                 for i, out in zip(kernel.out_idx, outputs)]
        named += [(g, out, False) for g, (out, _) in shared.items()]
        for name, out, returned in named:
            like = next((pos for pos, _, dtype, shape, stride, _ in
                         self._tensors if dtype == out.dtype and
                         shape == out.shape and stride == out.stride()), None)
            self._outputs.append((slots(name), like, out.shape, out.dtype,
                                  returned))
        self._nargs_all = [len(arr) for arr in arrs]
        self._device = torch.device(device)
        index = self._device.index
        self._device_index = torch.cuda.current_device() if index is None \
            else index
        # torch's current stream without building a Stream object (what
        # Triton's launcher reads); the public call where it is missing.
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
        self._raw_stream = raw
        # kiln_kernel_launch called directly: the kernel pointer and the
        # array's address as integers, no wrapper objects per call.
        lib = handles[0]._lib
        self._lib = lib
        self._launch = lib.kiln_kernel_launch
        self._calls = [(h._ptr, arr, n) for h, arr, n in
                       zip(handles, arrs, self._nargs_all)]
        self._busy = threading.Lock()

    def launch(self, args: Sequence[Any], stream: Optional[int]) -> Any:
        if len(args) != self._nargs or _client.current() is not self._client:
            return _MISS
        if not self._busy.acquire(blocking=False):
            return _MISS
        try:
            tensor_type = self._tensor_type
            for pos, ptrs, dtype, shape, stride, device in self._tensors:
                t = args[pos]
                if (not isinstance(t, tensor_type) or t.dtype != dtype
                        or t.shape != shape or t.get_device() != device
                        or t.stride() != stride):
                    return _MISS
                data = t.data_ptr()
                for ptr in ptrs:
                    ptr.value = data
            for pos, kind, value in self._scalars:
                v = args[pos]
                if type(v) is not kind or v != value:
                    return _MISS
            outs = []
            empty_like = self._torch.empty_like
            for ptrs, like, shape, dtype, returned in self._outputs:
                out = empty_like(args[like]) if like is not None else \
                    args[self._tensors[0][0]].new_empty(shape, dtype=dtype)
                data = out.data_ptr()
                for ptr in ptrs:
                    ptr.value = data
                if returned:
                    outs.append(out)
            if stream is None:
                raw = self._raw_stream
                stream = raw(self._device_index) if raw is not None else \
                    self._torch.cuda.current_stream(self._device).cuda_stream
            elif len(self._calls) > 1:
                return _MISS  # (the shared tensors need record_stream)
            for kernel_ptr, arr, nargs in self._calls:
                status = self._launch(kernel_ptr, arr, nargs, stream or None)
                if status:
                    raise KilnStatusError(status, "kiln_kernel_launch: " + (
                        self._lib.kiln_last_error() or b"").decode(
                            "utf-8", "replace"))
        finally:
            self._busy.release()
        if not outs:
            return None
        return outs[0] if len(outs) == 1 else outs


def _current_cuda_stream(device: str) -> int:
    torch = sys.modules["torch"]
    return torch.cuda.current_stream(torch.device(device)).cuda_stream


class JITFunction:
    """What ``@kiln.jit`` returns: call it to translate a kernel."""

    def __init__(self, func: Callable, out_idx: OutIdx, target: str,
                 options: Dict[str, Any]):
        self.func = func
        self.out_idx = out_idx
        self.target = target
        self.options = options  # accepted for TileLang parity, unused
        self._cache: Dict[Any, JITKernel] = {}
        # TileLang's eager style: the function's own body is the kernel.
        self.eager = is_eager(func)
        functools.update_wrapper(self, func)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.eager:
            return self._eager_call(args, kwargs)
        try:
            key: Any = (args, tuple(sorted(kwargs.items())))
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in self._cache:
            return self._cache[key]
        kernel = self.make_kernel(self.func(*args, **kwargs))
        if key is not None:
            self._cache[key] = kernel
        return kernel

    def make_kernel(self, prim: Any,
                    bindings: Optional[Dict[str, int]] = None) -> JITKernel:
        if not isinstance(prim, PrimFunc):
            code = getattr(self.func, "__code__", None)
            raise KilnSourceError(
                f"@kiln.jit function {self.func.__name__} must return a "
                f"@T.prim_func; it returned {type(prim).__name__}",
                code.co_filename if code else None,
                code.co_firstlineno if code else None)
        return JITKernel(prim, self.out_idx, self.target, bindings)

    def signature(self) -> inspect.Signature:
        return inspect.signature(self.func)

    # --- the eager style ---------------------------------------------------

    def compile(self, *args: Any, **kwargs: Any) -> JITKernel:
        """``f.compile(M=1024, N=1024, block_M=128, ...)``: the kernel for
        these T.const dims and Python arguments (an eager function), called
        with its input tensors and returning its T.empty outputs; for a
        function returning a prim_func, the same as calling it."""
        if not self.eager:
            return self(*args, **kwargs)
        params = self.signature().parameters
        spec = {k: v for k, v in kwargs.items() if k in params}
        consts = {k: v for k, v in kwargs.items() if k not in params}
        bound = self.signature().bind_partial(*args, **spec)
        return self._eager_kernel(self._with_defaults(bound.arguments),
                                  consts)

    def _with_defaults(self, given: Dict[str, Any]) -> Dict[str, Any]:
        out = {}
        for name, p in self.signature().parameters.items():
            if name in given:
                out[name] = given[name]
            elif p.default is not inspect.Parameter.empty:
                out[name] = p.default
        return out

    def _eager_kernel(self, spec: Dict[str, Any],
                      consts: Dict[str, Any]) -> JITKernel:
        try:
            key: Any = (tuple(sorted(spec.items())),
                        tuple(sorted(consts.items())))
            hash(key)
        except TypeError:
            key = None
        if key is not None and key in self._cache:
            return self._cache[key]
        prim, outputs, names = translate_eager(self.func, spec, consts)
        unknown = sorted(set(consts) - set(names))
        if unknown:
            raise KilnArgumentError(
                f"{self.func.__name__}: {', '.join(unknown)} is neither a "
                "parameter nor a T.const dim")
        index = [i for i, p in enumerate(prim.params) if p.name in outputs]
        kernel = JITKernel(prim, index, self.target)
        if key is not None:
            self._cache[key] = kernel
        return kernel

    def _eager_call(self, args: Sequence[Any], kwargs: Dict[str, Any]) -> Any:
        """A direct call with tensors: the T.const dims are read from the
        tensors' shapes (a probe translation gives the dims each tensor
        parameter has), then the kernel for them runs on the tensors."""
        kernel, inputs = self.eager_bind(args, kwargs)
        return kernel(*inputs)

    def eager_bind(self, args: Sequence[Any], kwargs: Dict[str, Any]
                   ) -> Tuple[JITKernel, List[Any]]:
        """The kernel a direct call of an eager function runs, and the
        kernel arguments it runs it on."""
        bound = self.signature().bind(*args, **kwargs).arguments
        spec = self._with_defaults(
            {k: v for k, v in bound.items() if not _is_array(v)})
        declared, const_names = probe_eager(self.func, spec)
        consts: Dict[str, int] = {}
        inputs = []
        for name, p in declared:
            if name not in bound:
                raise KilnArgumentError(
                    f"{self.func.__name__}: no value for parameter '{name}'")
            value = bound[name]
            spec.pop(name, None)  # a kernel parameter, not a Python value
            inputs.append(value)
            if not p.is_tensor:
                continue
            shape = tuple(getattr(value, "shape", ()))
            if len(shape) != len(p.shape or ()):
                raise KilnArgumentError(
                    f"{self.func.__name__}: '{p.name}' has {len(shape)} dims; "
                    f"the kernel declares {len(p.shape or ())}")
            for dim, n in zip(p.shape, shape):
                # (A T.dynamic dim is bound at launch, not compiled in.)
                if isinstance(dim, str) and dim in const_names:
                    if consts.setdefault(dim, int(n)) != int(n):
                        raise KilnArgumentError(
                            f"{self.func.__name__}: dim {dim} is {consts[dim]} "
                            f"from an earlier tensor but {n} in '{p.name}'")
        return self._eager_kernel(spec, consts), inputs


def _is_array(v: Any) -> bool:
    """A NumPy array or torch tensor (anything with a shape and a dtype)."""
    return hasattr(v, "shape") and hasattr(v, "dtype") and \
        not isinstance(v, (int, float, complex, bool))


def jit(func: Optional[Callable] = None, *, out_idx: OutIdx = None,
        target: str = "auto", **options: Any) -> Any:
    """``@kiln.jit`` or ``@kiln.jit(out_idx=[-1], target="auto")``.

    TileLang's other options (``pass_configs``, ``execution_backend``,
    ``verbose``...) are accepted and ignored: Kiln chooses code generation
    itself.
    """
    if func is None:
        return lambda f: JITFunction(f, out_idx, target, options)
    return JITFunction(func, out_idx, target, options)


def compile(prim_func: PrimFunc, out_idx: OutIdx = None,  # noqa: A001
            target: str = "auto", bindings: Optional[Dict[str, int]] = None,
            **_options: Any) -> JITKernel:
    """``tilelang.compile``: a JITKernel from a prim_func."""
    return JITKernel(prim_func, out_idx, target, bindings)


def compile_ir(text: str, kernel: Optional[str] = None,
               target: str = "auto",
               bindings: Optional[Dict[str, int]] = None,
               out_idx: OutIdx = None,
               filename: str = "kernel.tile") -> JITKernel:
    """Compiles tile-IR text (the language-neutral IR, compiler/docs/
    tile-ir.md) for ``target`` now and returns it as a launchable kernel:
    the parameters, their dtypes and shapes come from the launch metadata,
    so calls are checked and ``out_idx`` outputs allocated as for a DSL
    kernel. ``kernel`` picks one of several kernels in the text;
    ``bindings`` give the tunables their values. Errors are
    KilnCompileError with ``filename:LINE:COL``."""
    bindings = {k: int(v) for k, v in (bindings or {}).items()}
    client = _client.default_client()
    handle = client.compile(text, kernel, target, sorted(bindings.items()),
                            filename)
    name, params, symbols = _params_of(handle.metadata)
    prim = PrimFunc(name, text, params, symbols,
                    {k: (v,) for k, v in bindings.items()}, filename, 0, {})
    result = JITKernel(prim, out_idx, target, bindings)
    result._handles[target] = (client, [handle])
    return result


def _params_of(metadata: str) -> Tuple[str, List[Any], List[str]]:
    """The kernel name, parameters and dynamic symbols of a launch
    metadata document (compiler/docs/kernel-handle.md)."""
    from kiln._dsl.frontend import Param
    name, symbols, params = "", [], []
    strides: Dict[str, Tuple[str, ...]] = {}
    for line in metadata.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "name":
            name = f[1]
        elif f[0] == "symbols":
            symbols = f[1:]
        elif f[0] == "param" and f[2] == "tensor":
            shape = tuple(int(d) if re.fullmatch(r"\d+", d) else d
                          for d in f[4:])
            params.append(Param(f[1], f[3], shape))
        elif f[0] == "param":
            params.append(Param(f[1], f[3]))
        elif f[0] == "strides":
            strides[f[1]] = tuple(f[2:])
    for p in params:
        p.strides = strides.get(p.name)
    return name, params, symbols
