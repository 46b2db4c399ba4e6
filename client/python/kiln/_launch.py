"""Checks launch arguments against a kernel's parameters and marshals them.

Everything here runs before libkiln is called, so a wrong shape, dtype,
layout or device is a KilnArgumentError that names the parameter. NumPy and
PyTorch are used only when the caller passes their objects.
"""

from __future__ import annotations

import ctypes
import struct
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from kiln._dsl.dtypes import FLOAT_DTYPES, INT_DTYPES
from kiln.errors import KilnArgumentError

# numpy / torch dtype names -> tile-IR dtype.
_HOST_TO_IR = {
    "float16": "f16", "bfloat16": "bf16", "float32": "f32", "float64": "f64",
    "int8": "i8", "uint8": "u8", "int16": "i16", "int32": "i32",
    "int64": "i64", "uint32": "u32", "bool": "bool",
    "float8_e4m3fn": "f8e4m3", "float8_e5m2": "f8e5m2",
}
_IR_TO_HOST = {v: k for k, v in _HOST_TO_IR.items()}
_TILELANG_NAME = {"f16": "float16", "bf16": "bfloat16", "f32": "float32",
                  "f64": "float64", "i8": "int8", "u8": "uint8",
                  "i16": "int16", "i32": "int32", "i64": "int64",
                  "u32": "uint32", "bool": "bool", "f8e4m3": "float8_e4m3",
                  "f8e5m2": "float8_e5m2", "i4": "int4", "u4": "uint4"}
_INT_FORMATS = {"i8": "<b", "u8": "<B", "i16": "<h", "i32": "<i",
                "i64": "<q", "u32": "<I"}


def host_dtype(ir: str) -> str:
    """NumPy's and torch's name for a tile-IR dtype ("" when they have
    none)."""
    return _IR_TO_HOST.get(ir, "")


def ir_dtype(host: str) -> Optional[str]:
    """The tile-IR dtype of a NumPy or torch dtype name (None: none)."""
    return _HOST_TO_IR.get(host)


def dtype_name(ir: str) -> str:
    """How an error message spells a dtype: ``float16 (f16)``."""
    return f"{_TILELANG_NAME.get(ir, ir)} ({ir})"


class TensorView:
    """What the launch needs of one NumPy array or torch tensor."""

    def __init__(self, obj: Any, kind: str, dtype: Optional[str],
                 host_dtype: str, shape: Tuple[int, ...],
                 strides: Tuple[int, ...], data: int, device: str):
        self.obj = obj
        self.kind = kind  # "numpy" or "torch"
        self.dtype = dtype  # tile-IR name, None when unsupported
        self.host_dtype = host_dtype
        self.shape = shape
        self.strides = strides  # in elements
        self.data = data
        self.device = device  # "cpu" or "cuda:N"


def _is_numpy(obj: Any) -> bool:
    np = sys.modules.get("numpy")
    return np is not None and isinstance(obj, np.ndarray)


def _is_torch(obj: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(obj, torch.Tensor)


def is_torch_tensor(obj: Any) -> bool:
    """Whether ``obj`` is a torch tensor (torch not imported: no)."""
    return _is_torch(obj)


_NUMPY_NAMES: Dict[Any, str] = {}  # numpy dtype -> name (dtype.name is slow)


def view(obj: Any, where: str) -> TensorView:
    """A TensorView of ``obj``, or KilnArgumentError if it is no tensor."""
    if _is_numpy(obj):
        dt = obj.dtype
        name = _NUMPY_NAMES.get(dt)
        if name is None:
            name = _NUMPY_NAMES.setdefault(dt, dt.name)
        if obj.flags.c_contiguous:
            strides = _row_major(obj.shape)
        else:
            item = dt.itemsize
            for s in obj.strides:
                if s % item:
                    raise KilnArgumentError(
                        f"{where}: strides {obj.strides} (bytes) are not "
                        "whole elements")
            strides = tuple(s // item for s in obj.strides)
        return TensorView(obj, "numpy", _HOST_TO_IR.get(name), name,
                          obj.shape, strides, obj.ctypes.data, "cpu")
    if _is_torch(obj):
        name = str(obj.dtype).replace("torch.", "")
        device = str(obj.device)
        if device == "cuda":
            device = f"cuda:{obj.device.index or 0}"
        return TensorView(obj, "torch", _HOST_TO_IR.get(name), name,
                          tuple(obj.shape), tuple(obj.stride()),
                          obj.data_ptr(), device)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        return view(_from_dlpack(obj, where), where)
    raise KilnArgumentError(
        f"{where}: expected a NumPy array, a torch tensor or a DLPack "
        f"tensor; got {type(obj).__name__}")


# DLPack device types (dlpack.h DLDeviceType).
_DLPACK_CPU, _DLPACK_CUDA = 1, 2


def _from_dlpack(obj: Any, where: str) -> Any:
    """Any other array with ``__dlpack__`` (CuPy, JAX, ...), viewed without
    a copy as a torch tensor (CUDA, or CPU where torch is loaded) or a
    NumPy array (CPU). The view shares its memory, so outputs written in
    place land in ``obj``; outputs made from ``out_idx`` are torch tensors
    or NumPy arrays, which export DLPack themselves."""
    device_type, _ = obj.__dlpack_device__()
    torch = sys.modules.get("torch")
    if device_type == _DLPACK_CUDA:
        if torch is None:
            try:
                import torch  # noqa: F811 (CUDA DLPack tensors need torch)
            except ImportError:
                raise KilnArgumentError(
                    f"{where}: a CUDA DLPack tensor needs torch to be "
                    "launched (pip install torch)") from None
        return torch.from_dlpack(obj)
    if device_type != _DLPACK_CPU:
        raise KilnArgumentError(
            f"{where}: DLPack device type {device_type} is neither CPU (1) "
            "nor CUDA (2)")
    if torch is not None:
        return torch.from_dlpack(obj)
    import numpy as np
    return np.from_dlpack(obj)


def _row_major(shape: Sequence[int]) -> Tuple[int, ...]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return tuple(reversed(out))


def _contiguous(v: TensorView) -> bool:
    expect = _row_major(v.shape)
    return all(d == 1 or s == e for d, s, e in zip(v.shape, v.strides, expect))


def check_tensor(param: Any, v: TensorView,
                 symbols: Dict[str, Tuple[int, str]], where: str) -> None:
    """Checks dtype, rank, dims (binding symbols) and layout."""
    if v.dtype != param.dtype:
        raise KilnArgumentError(
            f"{where}: expected dtype {dtype_name(param.dtype)}; got "
            f"{v.host_dtype}")
    if len(v.shape) != len(param.shape):
        raise KilnArgumentError(
            f"{where}: expected {len(param.shape)} dims "
            f"{_fmt_shape(param.shape)}; got shape {list(v.shape)}")
    for i, (want, got) in enumerate(zip(param.shape, v.shape)):
        if isinstance(want, int):
            if want != got:
                raise KilnArgumentError(
                    f"{where}: dim {i} must be {want} (shape "
                    f"{_fmt_shape(param.shape)}); got shape {list(v.shape)}")
            continue
        seen = symbols.get(want)
        if seen is None:
            symbols[want] = (got, f"argument '{param.name}' has {want} = "
                                  f"{got} (dim {i})")
        elif seen[0] != got:
            raise KilnArgumentError(
                f"{where}: dim {i} is {want} = {got}, but {seen[1]}")
    if param.strides is None and not _contiguous(v):
        raise KilnArgumentError(
            f"{where}: must be contiguous (row-major); got strides "
            f"{list(v.strides)} for shape {list(v.shape)} (use "
            "np.ascontiguousarray or .contiguous())")


def check_viewable(v: TensorView, view: str, where: str) -> None:
    """Refuses memory a buffer view (``view``, described) cannot reshape:
    anything but row-major."""
    if not _contiguous(v):
        raise KilnArgumentError(
            f"{where}: {view} reshapes its memory, which must be contiguous "
            f"(row-major); got strides {list(v.strides)} for shape "
            f"{list(v.shape)} (use np.ascontiguousarray or .contiguous())")


def reshaped(base: TensorView, shape: Tuple[int, ...]) -> TensorView:
    """``base``'s memory as a row-major tensor of ``shape`` (a buffer
    view; the element counts were checked): the same pointer, no copy."""
    count = 1
    for d in shape:
        count *= d
    have = 1
    for d in base.shape:
        have *= d
    if count != have or not _contiguous(base):
        raise KilnArgumentError(
            f"cannot view shape {list(base.shape)} as {list(shape)}")
    return TensorView(base.obj, base.kind, base.dtype, base.host_dtype,
                      tuple(shape), _row_major(shape), base.data, base.device)


def output_shape(param: Any, symbols: Dict[str, Tuple[int, str]],
                 where: str) -> Tuple[Any, ...]:
    """The shape of an output to allocate: its constant dims and the
    symbols the inputs bound (check_tensor)."""
    shape = []
    for d in param.shape:
        if isinstance(d, int):
            shape.append(d)
        elif d in symbols:
            shape.append(symbols[d][0])
        else:
            raise KilnArgumentError(
                f"{where}: cannot allocate it: symbolic dim {d} is not a dim "
                "of any input")
    return tuple(shape)


def _fmt_shape(shape: Sequence[Any]) -> str:
    return "[" + ", ".join(map(str, shape)) + "]"


def pack_scalar(dtype: str, value: Any, where: str) -> bytes:
    """The 8 scalar bytes of kiln_arg for ``value`` as ``dtype``."""
    if _is_numpy(value) or _is_torch(value):
        raise KilnArgumentError(f"{where}: expected a Python scalar of "
                                f"{dtype_name(dtype)}; got a tensor")
    if hasattr(value, "item") and not isinstance(value, (int, float, bool)):
        value = value.item()  # NumPy scalar types
    if dtype == "bool":
        if not isinstance(value, (bool, int)):
            raise KilnArgumentError(f"{where}: expected a bool; got {value!r}")
        raw = struct.pack("<?", bool(value))
    elif dtype in INT_DTYPES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise KilnArgumentError(
                f"{where}: expected an int for {dtype_name(dtype)}; got "
                f"{value!r}")
        fmt = _INT_FORMATS.get(dtype)
        if fmt is None:
            raise KilnArgumentError(f"{where}: {dtype} scalars are not "
                                    "supported")
        try:
            raw = struct.pack(fmt, value)
        except struct.error:
            raise KilnArgumentError(
                f"{where}: {value} is out of range for {dtype_name(dtype)}") \
                from None
    elif dtype in FLOAT_DTYPES:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise KilnArgumentError(
                f"{where}: expected a number for {dtype_name(dtype)}; got "
                f"{value!r}")
        if dtype == "f32":
            raw = struct.pack("<f", value)
        elif dtype == "f64":
            raw = struct.pack("<d", value)
        elif dtype == "f16":
            raw = struct.pack("<e", value)
        elif dtype == "bf16":
            raw = struct.pack("<H", _bf16_bits(float(value)))
        else:
            raise KilnArgumentError(f"{where}: {dtype} scalars are not "
                                    "supported")
    else:
        raise KilnArgumentError(f"{where}: {dtype} scalars are not supported")
    return raw.ljust(8, b"\0")


def _bf16_bits(value: float) -> int:
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    if (bits & 0x7F800000) == 0x7F800000 and bits & 0x7FFFFF:
        return 0x7FC0  # NaN
    bits += 0x7FFF + ((bits >> 16) & 1)  # round to nearest even
    return (bits >> 16) & 0xFFFF


# Storage of the same width, for a scratch tensor whose dtype the host
# library lacks (no caller reads it: the kernel alone sees its elements).
_SCRATCH_STORAGE = {"f16": "uint16", "bf16": "uint16", "f8e4m3": "uint8",
                    "f8e5m2": "uint8"}


def allocate(like: TensorView, dtype: str, shape: Tuple[int, ...],
             where: str, scratch: bool = False) -> Any:
    """An uninitialised output like ``like`` (NumPy or torch, same device).
    A ``scratch`` tensor (``T.alloc_global``) of a dtype the library lacks
    gets same-width unsigned storage instead."""
    host = _IR_TO_HOST.get(dtype)
    if scratch and dtype in _SCRATCH_STORAGE:
        lib = sys.modules["torch"] if like.kind == "torch" else \
            sys.modules.get("numpy")
        try:
            lacking = lib is None or host is None or (
                getattr(lib, host, None) is None if like.kind == "torch"
                else lib.dtype(host) is None)
        except TypeError:
            lacking = True
        if lacking:
            host = _SCRATCH_STORAGE[dtype]
            if like.kind == "torch" and host == "uint16":
                host = "int16"  # (torch has no uint16)
    if like.kind == "torch":
        torch = sys.modules["torch"]
        tdtype = getattr(torch, host or "", None)
        if tdtype is None:
            raise KilnArgumentError(f"{where}: torch has no {dtype} dtype")
        return torch.empty(shape, dtype=tdtype, device=like.obj.device)
    np = sys.modules.get("numpy")
    if np is None:
        raise KilnArgumentError(f"{where}: allocating an output needs NumPy")
    try:
        np_dtype = np.dtype(host)
    except TypeError:
        np_dtype = None
    if host is None or np_dtype is None:
        raise KilnArgumentError(
            f"{where}: NumPy has no {dtype_name(dtype)} dtype (install "
            "ml_dtypes for bfloat16 and float8), or pass the output in")
    return np.empty(shape, dtype=np_dtype)


class Marshalled:
    """A ``kiln_arg[]`` array and the buffers it points into."""

    def __init__(self, args: Any, keep: List[Any]):
        self.args = args
        self.keep = keep


def marshal(params: Sequence[Any], values: Sequence[Any]) -> Marshalled:
    """Builds kiln_arg entries: TensorViews for tensors, bytes for scalars."""
    from kiln._capi import make_args
    arr = make_args(len(params))
    keep: List[Any] = []
    for i, (p, v) in enumerate(zip(params, values)):
        a = arr[i]
        dtype = p.dtype.encode()
        keep.append(dtype)
        a.dtype = dtype
        if p.is_tensor:
            a.is_tensor = 1
            a.data = v.data
            a.rank = len(v.shape)
            shape = (ctypes.c_int64 * max(a.rank, 1))(*v.shape)
            keep.append(shape)
            a.shape = shape
            if p.strides is not None:
                strides = (ctypes.c_int64 * max(a.rank, 1))(*v.strides)
                keep.append(strides)
                a.strides = strides
            keep.append(v.obj)
        else:
            a.is_tensor = 0
            ctypes.memmove(a.scalar, v, 8)
    return Marshalled(arr, keep)
