"""ctypes bindings of libkiln, exactly as client/kiln.h declares them.

The library is found, in order, at ``$KILN_LIBRARY`` (when set, only
there), next to this package (``libkiln.so`` or ``libkiln_c.so``), then as
``libkiln.so`` on the loader path. Failing calls raise KilnStatusError (or
KilnCompileError) carrying ``kiln_last_error()``, read on the same thread.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
import os
import threading
from ctypes import (POINTER, Structure, c_char_p, c_double, c_int, c_int32,
                    c_int64, c_size_t, c_uint8, c_void_p)
from typing import Any, Dict, List, Optional, Sequence, Tuple

from kiln.errors import KilnCompileError, KilnLibraryError, KilnStatusError

KILN_OK = 0
_LIBRARY_NAMES = ("libkiln.so", "libkiln_c.so")


class KilnBinding(Structure):
    """``kiln_binding``: a tunable's or fixed symbol's value."""
    _fields_ = [("name", c_char_p), ("value", c_int64)]


class KilnArg(Structure):
    """``kiln_arg``: one launch argument (tensor or scalar)."""
    _fields_ = [
        ("is_tensor", c_int32),
        ("dtype", c_char_p),
        ("data", c_void_p),
        ("rank", c_int32),
        ("shape", POINTER(c_int64)),
        ("strides", POINTER(c_int64)),
        ("scalar", c_uint8 * 8),
    ]


_P = POINTER(c_void_p)

# name -> (restype, argtypes), in the order of kiln.h.
PROTOTYPES = {
    "kiln_version": (c_char_p, []),
    "kiln_last_error": (c_char_p, []),
    "kiln_connect": (c_int, [c_char_p, c_double, _P]),
    "kiln_embedded": (c_int, [c_char_p, c_int, _P]),
    "kiln_client_free": (None, [c_void_p]),
    "kiln_compile": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p,
                             POINTER(KilnBinding), c_size_t, c_char_p,
                             c_double, _P]),
    "kiln_get_kernel": (c_int, [c_void_p, c_char_p, _P]),
    "kiln_kernel_from_parts": (c_int, [c_void_p, c_size_t, c_char_p, _P]),
    "kiln_kernel_free": (None, [c_void_p]),
    "kiln_kernel_key": (c_char_p, [c_void_p]),
    "kiln_kernel_name": (c_char_p, [c_void_p]),
    "kiln_kernel_target": (c_char_p, [c_void_p]),
    "kiln_kernel_tier": (c_char_p, [c_void_p]),
    "kiln_kernel_metadata": (c_char_p, [c_void_p]),
    "kiln_kernel_compile_log": (c_char_p, [c_void_p]),
    "kiln_kernel_binary": (c_size_t, [c_void_p, _P]),
    "kiln_kernel_launch": (c_int, [c_void_p, POINTER(KilnArg), c_size_t,
                                   c_void_p]),
    # The daemon's autotuner (the JSON result is freed with kiln_string_free).
    "kiln_autotune": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p,
                              POINTER(KilnBinding), c_size_t,
                              POINTER(KilnBinding), c_size_t,
                              POINTER(c_char_p), c_size_t,
                              POINTER(ctypes.c_int64), c_size_t, c_int, c_int,
                              c_double, POINTER(c_void_p)]),
    "kiln_string_free": (None, [c_void_p]),
}

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None


def candidate_paths() -> List[str]:
    """Where load() looks, in order."""
    env = os.environ.get("KILN_LIBRARY")
    if env:
        return [env]
    here = os.path.dirname(os.path.abspath(__file__))
    return [os.path.join(here, n) for n in _LIBRARY_NAMES] + ["libkiln.so"]


def library_path() -> Optional[str]:
    """The library load() would use, or None when none is installed.

    With KILN_LIBRARY set this is that path even if it is missing, so that
    a wrong setting fails loudly instead of looking like "not installed".
    """
    env = os.environ.get("KILN_LIBRARY")
    if env:
        return env
    for path in candidate_paths():
        if os.path.sep in path:
            if os.path.exists(path):
                return path
        elif ctypes.util.find_library("kiln"):
            return path
    return None


def _declare(lib: ctypes.CDLL) -> ctypes.CDLL:
    for name, (restype, argtypes) in PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def load() -> ctypes.CDLL:
    """The loaded libkiln (loaded once); KilnLibraryError if not found."""
    global _lib
    with _lock:
        if _lib is not None:
            return _lib
        errors = []
        for path in candidate_paths():
            if os.path.sep in path and not os.path.exists(path):
                errors.append(f"{path}: no such file")
                continue
            try:
                lib = ctypes.CDLL(path)
            except OSError as e:
                errors.append(f"{path}: {e}")
                continue
            try:
                _lib = _declare(lib)
            except AttributeError as e:
                raise KilnLibraryError(
                    f"{path} is not libkiln (missing {e})") from None
            return _lib
        raise KilnLibraryError(
            "libkiln not found: set KILN_LIBRARY to its path ("
            + "; ".join(errors) + ")")


def reset_for_tests() -> None:
    """Forgets the loaded library so that the next load() searches again."""
    global _lib
    with _lock:
        _lib = None


def _str(value: Optional[bytes]) -> str:
    return "" if value is None else value.decode("utf-8", "replace")


def _check(lib: ctypes.CDLL, status: int, what: str,
           error: type = KilnStatusError) -> None:
    if status != KILN_OK:
        raise error(status, f"{what}: {_str(lib.kiln_last_error())}")


def version() -> str:
    return _str(load().kiln_version())


def _free(owner: Any, fn: str) -> None:
    """Frees ``owner._ptr`` once; quiet at interpreter shutdown."""
    ptr = getattr(owner, "_ptr", None)
    if ptr is None or not ptr.value:
        return
    owner._ptr = None
    try:
        getattr(owner._lib, fn)(ptr)
    except Exception:  # noqa: BLE001 (ctypes torn down at exit)
        pass


class Kernel:
    """A kernel handle (``kiln_kernel*``); freed when garbage collected."""

    def __init__(self, lib: ctypes.CDLL, ptr: int):
        self._lib = lib
        self._ptr = c_void_p(ptr)

    def __del__(self, _free: Any = _free) -> None:
        # (The default keeps the function at interpreter exit, when module
        # globals may already be gone.)
        _free(self, "kiln_kernel_free")

    def _s(self, fn: str) -> str:
        return _str(getattr(self._lib, fn)(self._ptr))

    @property
    def key(self) -> str:
        return self._s("kiln_kernel_key")

    @property
    def name(self) -> str:
        return self._s("kiln_kernel_name")

    @property
    def target(self) -> str:
        return self._s("kiln_kernel_target")

    @property
    def tier(self) -> str:
        return self._s("kiln_kernel_tier")

    @property
    def metadata(self) -> str:
        return self._s("kiln_kernel_metadata")

    @property
    def compile_log(self) -> str:
        return self._s("kiln_kernel_compile_log")

    @property
    def binary(self) -> bytes:
        data = c_void_p()
        size = self._lib.kiln_kernel_binary(self._ptr, ctypes.byref(data))
        return ctypes.string_at(data, size) if size else b""

    def launch(self, args: Any, stream: Optional[int]) -> None:
        """Launches with a ``kiln_arg[]``; ``stream`` is a CUstream (CUDA) or a
        hipStream_t (HIP), or None."""
        status = self._lib.kiln_kernel_launch(self._ptr, args, len(args),
                                              c_void_p(stream or None))
        _check(self._lib, status, "kiln_kernel_launch")

    @classmethod
    def from_parts(cls, binary: bytes, metadata: str) -> "Kernel":
        lib = load()
        out = c_void_p()
        buf = ctypes.create_string_buffer(binary, len(binary))
        status = lib.kiln_kernel_from_parts(buf, len(binary),
                                            metadata.encode(),
                                            ctypes.byref(out))
        _check(lib, status, "kiln_kernel_from_parts")
        return cls(lib, out.value)


class Client:
    """A libkiln client: connected to kilnd, or embedded."""

    def __init__(self, lib: ctypes.CDLL, ptr: int, description: str):
        self._lib = lib
        self._ptr = c_void_p(ptr)
        self.description = description

    def __del__(self, _free: Any = _free) -> None:
        _free(self, "kiln_client_free")

    def __repr__(self) -> str:
        return f"<kiln client {self.description}>"

    @classmethod
    def connect(cls, address: Optional[str] = None,
                timeout_seconds: float = 2.0) -> "Client":
        lib = load()
        out = c_void_p()
        status = lib.kiln_connect((address or "").encode(), timeout_seconds,
                                  ctypes.byref(out))
        _check(lib, status, f"connecting to kilnd at {address or 'default'}")
        return cls(lib, out.value, f"kilnd {address or '(default socket)'}")

    @classmethod
    def embedded(cls, cache_dir: Optional[str] = None,
                 worker_threads: int = 0) -> "Client":
        lib = load()
        out = c_void_p()
        status = lib.kiln_embedded((cache_dir or "").encode(), worker_threads,
                                   ctypes.byref(out))
        _check(lib, status, "creating an embedded kiln client")
        return cls(lib, out.value, "embedded")

    def compile(self, ir: str, kernel: Optional[str], target: str,
                bindings: Sequence[Tuple[str, int]], filename: Optional[str],
                timeout_seconds: float = 0.0) -> Kernel:
        arr = (KilnBinding * max(len(bindings), 1))()
        for i, (name, value) in enumerate(bindings):
            arr[i].name = name.encode()
            arr[i].value = int(value)
        out = c_void_p()
        status = self._lib.kiln_compile(
            self._ptr, ir.encode(), kernel.encode() if kernel else None,
            target.encode(), arr, len(bindings),
            filename.encode() if filename else None, timeout_seconds,
            ctypes.byref(out))
        _check(self._lib, status, "kiln_compile", KilnCompileError)
        return Kernel(self._lib, out.value)

    def autotune(self, ir: str, kernel: Optional[str], target: str,
                 shape: Dict[str, int],
                 configs: Sequence[Dict[str, int]] = (),
                 fixed: Optional[Dict[str, int]] = None,
                 force: bool = False,
                 timeout_seconds: float = 0.0) -> Dict[str, Any]:
        """The daemon's autotuner (kiln_autotune): the result as a dict."""
        def bindings(items: Dict[str, int]) -> Any:
            arr = (KilnBinding * max(len(items), 1))()
            for i, (name, value) in enumerate(sorted(items.items())):
                arr[i].name = name.encode()
                arr[i].value = int(value)
            return arr
        fixed = dict(fixed or {})
        names = sorted({k for c in configs for k in c})
        name_arr = (c_char_p * max(len(names), 1))(
            *[n.encode() for n in names])
        values = (ctypes.c_int64 * max(len(names) * len(configs), 1))()
        for i, config in enumerate(configs):
            if set(config) != set(names):
                raise KilnStatusError(
                    3, f"config {i} ({config}) does not bind every one of "
                    f"{names}")
            for j, n in enumerate(names):
                values[i * len(names) + j] = int(config[n])
        out = c_void_p()
        status = self._lib.kiln_autotune(
            self._ptr, ir.encode(), kernel.encode() if kernel else None,
            target.encode(), bindings(shape), len(shape), bindings(fixed),
            len(fixed), name_arr, len(names), values, len(configs), 0,
            1 if force else 0, timeout_seconds, ctypes.byref(out))
        _check(self._lib, status, "kiln_autotune", KilnCompileError)
        try:
            return json.loads(ctypes.string_at(out.value).decode())
        finally:
            self._lib.kiln_string_free(out)

    def get_kernel(self, key: str) -> Kernel:
        out = c_void_p()
        status = self._lib.kiln_get_kernel(self._ptr, key.encode(),
                                           ctypes.byref(out))
        _check(self._lib, status, f"kiln_get_kernel {key}")
        return Kernel(self._lib, out.value)


def make_args(count: int) -> Any:
    """A zeroed ``kiln_arg[count]``."""
    return (KilnArg * count)()
