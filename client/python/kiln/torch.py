"""Kiln kernels as PyTorch operators.

    import kiln.torch

    rmsnorm = kiln.torch.op(kiln.compile(rmsnorm_prim, out_idx=[-1]))
    y = rmsnorm(x, w, 1e-6)          # == torch.ops.kiln.rmsnorm(x, w, 1e-6)
    f = torch.compile(model, fullgraph=True)   # traces through it

``op`` registers a compiled kernel (a ``JITKernel``) as a ``torch.library``
operator in the ``kiln`` namespace: a CPU and a CUDA implementation that
launch the kernel (the CPU target for CPU tensors, the kernel's GPU target
on the tensors' current stream), and a fake (meta) implementation that
checks dtypes and ranks and builds the outputs from the kernel's parameter
shapes, so ``torch.compile`` traces a model that calls it without a graph
break. The schema comes from the kernel: tensor inputs in parameter order,
then scalars as ``int``/``float``/``bool``; inputs the kernel writes (the
launch metadata's ``writes`` record: a KV cache filled in place) are
marked mutated (``Tensor(a!)``), and the ``out_idx`` outputs are returned.

Launches take no host synchronisation and, when every output is passed in
(``out_idx=None``), allocate nothing, so they can be captured in CUDA
graphs; compile (call once) before capturing.
"""

from __future__ import annotations

import keyword
import re
import string
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from kiln import _launch
from kiln._dsl.dtypes import FLOAT_DTYPES, INT_DTYPES
from kiln.errors import KilnArgumentError
from kiln.jit import JITKernel

NAMESPACE = "kiln"

_lock = threading.Lock()
_library: Any = None
_ops: Dict[str, "Operator"] = {}


def _torch() -> Any:
    import torch  # the real package (absolute import), not this module
    return torch


_torch()  # kiln.torch needs torch: an ImportError here says so


def _scalar_type(dtype: str, where: str) -> str:
    if dtype in INT_DTYPES:
        return "int"
    if dtype in FLOAT_DTYPES:
        return "float"
    if dtype == "bool":
        return "bool"
    raise KilnArgumentError(f"{where}: a scalar of dtype {dtype} has no "
                            "torch schema type")


def _written(kernel: JITKernel, target: str) -> List[str]:
    """The prim_func's input tensors (not its out_idx outputs) some launch
    of it writes, from the metadata of its compiled kernels (every T.Kernel
    block)."""
    handles = kernel._compile(target)  # noqa: SLF001 (same package)
    names = set()
    for h in handles:
        for line in h.metadata.splitlines():
            fields = line.split()
            if fields and fields[0] == "writes":
                names.update(fields[1:])
    # A write through a buffer view writes the tensor it views.
    names.update(v.base for v in kernel.prim_func.views if v.name in names)
    return [p.name for i, p in enumerate(kernel.params)
            if p.is_tensor and p.name in names and i not in kernel.out_idx]


class Operator:
    """A kernel registered as ``torch.ops.kiln.<name>``; calling it calls
    the operator (so autograd, torch.compile and CUDA graphs see it)."""

    def __init__(self, kernel: JITKernel, name: str, schema: str,
                 mutated: List[str]):
        self.kernel = kernel
        self.name = name
        self.schema = schema
        self.mutated = mutated
        self._packet = getattr(getattr(_torch().ops, NAMESPACE), name)

    def __call__(self, *args: Any) -> Any:
        return self._packet(*args)

    def __repr__(self) -> str:
        return f"<kiln.torch op {NAMESPACE}::{self.schema}>"


def op(kernel: JITKernel, name: Optional[str] = None,
       target: Optional[str] = None) -> Operator:
    """Registers ``kernel`` as the operator ``torch.ops.kiln.<name>``
    (``name`` defaults to the kernel's) and returns it. ``target`` is the
    GPU target CUDA tensors launch on (default: the kernel's); the kernel is
    compiled for it now, to read which tensors it writes. Registering the
    same kernel under the same name again returns the first operator; a
    different kernel under a taken name is an error."""
    torch = _torch()
    if not isinstance(kernel, JITKernel):
        raise KilnArgumentError(
            "kiln.torch.op takes a compiled kernel (kiln.compile(prim_func, "
            "...) or a @kiln.jit function called with its constants); got "
            f"{type(kernel).__name__}")
    name = name or kernel.name
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or \
            keyword.iskeyword(name):
        raise KilnArgumentError(
            f"kiln.torch.op: '{name}' is not a valid operator name (letters, "
            "digits and _, not starting with a digit)")
    if target is None:
        target = kernel.target
        if target == "auto" and not torch.cuda.is_available():
            target = "cpu"
    with _lock:
        known = _ops.get(name)
        if known is not None:
            if known.kernel is kernel or (
                    known.kernel.prim_func.ir == kernel.prim_func.ir and
                    known.kernel.out_idx == kernel.out_idx and
                    known.kernel.bindings == kernel.bindings):
                return known
            raise KilnArgumentError(
                f"kiln.torch.op: {NAMESPACE}::{name} is already registered "
                "for another kernel; pass another name=")
        mutated = _written(kernel, target)
        schema = _schema(kernel, name, mutated)
        global _library
        if _library is None:
            try:
                _library = torch.library.Library(NAMESPACE, "FRAGMENT")
            except ValueError:  # torch < 2.0: one DEF library per namespace
                _library = torch.library.Library(NAMESPACE, "DEF")
        _library.define(schema)
        impl = _launcher(kernel)
        _library.impl(name, impl, "CPU")
        _library.impl(name, impl, "CUDA")
        fake = _fake(kernel)
        register_fake = getattr(torch.library, "register_fake", None)
        if register_fake is not None:
            register_fake(f"{NAMESPACE}::{name}", fake, lib=_library)
        else:  # torch < 2.4; AutogradMeta falls through only from 2.0
            _library.impl(name, fake, "Meta")
            _library.impl(name, fake, "AutogradMeta")
        result = Operator(kernel, name, schema, mutated)
        _ops[name] = result
        return result


def _schema(kernel: JITKernel, name: str, mutated: List[str]) -> str:
    letters = iter(string.ascii_lowercase)
    args = []
    for i, p in enumerate(kernel.params):
        if i in kernel.out_idx:
            continue
        where = f"parameter '{p.name}' of {kernel.name}"
        arg_name = p.name if not keyword.iskeyword(p.name) else p.name + "_"
        if p.is_tensor:
            ty = f"Tensor({next(letters)}!)" if p.name in mutated else "Tensor"
        else:
            ty = _scalar_type(p.dtype, where)
        args.append(f"{ty} {arg_name}")
    outs = len(kernel.out_idx)
    ret = "()" if outs == 0 else "Tensor" if outs == 1 else \
        "(" + ", ".join(["Tensor"] * outs) + ")"
    return f"{name}({', '.join(args)}) -> {ret}"


def _as_tuple(result: Any, outs: int) -> Any:
    if outs == 0:
        return None
    if outs == 1:
        return result
    return tuple(result)


def _launcher(kernel: JITKernel) -> Callable[..., Any]:
    outs = len(kernel.out_idx)

    def launch(*args: Any) -> Any:
        return _as_tuple(kernel(*args), outs)
    return launch


def _fake(kernel: JITKernel) -> Callable[..., Any]:
    """Outputs of the right shape, dtype and device, from the symbols the
    inputs bind, after the checks a launch makes of dtypes and dims."""
    torch = _torch()
    outs = len(kernel.out_idx)

    inputs = [i for i in range(len(kernel.params)) if i not in kernel.out_idx]

    def fake(*args: Any) -> Any:
        symbols: Dict[str, Tuple[int, str]] = {}
        device = None
        for i, arg in zip(inputs, args):
            p = kernel.params[i]
            if not p.is_tensor:
                continue
            where = f"argument '{p.name}' of {kernel.name}"
            if not isinstance(arg, torch.Tensor):
                raise KilnArgumentError(f"{where}: expected a tensor")
            _check_fake(p, arg, symbols, where)
            device = arg.device if device is None else device
        results = []
        for i in kernel.out_idx:
            p = kernel.params[i]
            shape = _launch.output_shape(p, symbols,
                                         f"output '{p.name}' of {kernel.name}")
            dtype = getattr(torch, _launch.host_dtype(p.dtype), None)
            if dtype is None:
                raise KilnArgumentError(
                    f"output '{p.name}' of {kernel.name}: torch has no "
                    f"{p.dtype} dtype")
            results.append(torch.empty(shape, dtype=dtype, device=device))
        return _as_tuple(results, outs) if outs != 1 else results[0]
    return fake


def _check_fake(p: Any, t: Any, symbols: Dict[str, Tuple[int, str]],
                where: str) -> None:
    name = str(t.dtype).replace("torch.", "")
    v = _launch.TensorView(t, "torch", _launch.ir_dtype(name), name,
                           tuple(t.shape), tuple(t.stride()), 0,
                           str(t.device))
    _launch.check_tensor(p, v, symbols, where)


def registered() -> Dict[str, Operator]:
    """The operators registered so far, by name."""
    with _lock:
        return dict(_ops)


__all__ = ["NAMESPACE", "Operator", "op", "registered"]
