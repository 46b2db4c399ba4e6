"""``from tilelang import tvm as tvm``: the TVM names TileLang kernels
import, mapped onto Kiln's DSL so a port changes only its imports.

``kiln.tvm.tirx`` (also ``kiln.tvm.tir``, TVM's older name) holds the
expression names (``const``, ``Cast``, ``Select``, ``reinterpret``...) and
``kiln.tvm.DataType`` is ``T.dtype`` (``DataType("float16").bits``).

TileLang makes its bundled TVM importable as ``tvm``, so its examples
follow ``from tilelang import tvm as tvm`` with ``from tvm import
DataType``. Importing this package does the same, registering it as
``tvm``, ``tvm.tirx`` and ``tvm.tir`` in ``sys.modules``, but only when no
real ``tvm`` package is importable: an installed TVM is never shadowed
(``AS_TVM`` says which happened). With one installed, import the names
from ``kiln.tvm`` (``from kiln.tvm import DataType, tirx``). ``import
kiln`` alone registers nothing; a module that imports ``tvm`` without
``from tilelang import tvm`` first imports from ``kiln.tvm`` instead.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any

from kiln._dsl.dtypes import DType as DataType
from kiln.tvm import tirx
from kiln.tvm._unsupported import Unsupported

__all__ = ["AS_TVM", "DataType", "tir", "tirx"]

tir = tirx
sys.modules.setdefault(__name__ + ".tir", tirx)

target = Unsupported(
    "tvm.target", "pass target= to kiln.jit, kernel.compile(target) or "
    "kiln.compile_ir ('auto' picks the tensors' device; NumPy arrays run "
    "on the CPU target)")
testing = Unsupported(
    "tvm.testing", "use kiln.testing (requires_cuda, requires_package, "
    "requires_cuda_compute_version, torch_assert_close, ...)")
script = Unsupported(
    "tvm.script", "TVMScript is not supported: write kernels with "
    "kiln.language (import kiln.language as T)")
tl = Unsupported("tvm.tl", "import kiln.language as T")


def _register_as_tvm() -> bool:
    """Registers this package as ``tvm`` unless a real one is importable;
    True when ``import tvm`` now gives this package."""
    current = sys.modules.get("tvm")
    if current is not None:
        return current is sys.modules[__name__]
    try:
        if importlib.util.find_spec("tvm") is not None:
            return False
    except (ImportError, ValueError):
        return False
    sys.modules["tvm"] = sys.modules[__name__]
    sys.modules["tvm.tirx"] = tirx
    sys.modules["tvm.tir"] = tirx
    return True


AS_TVM = _register_as_tvm()


def __getattr__(name: str) -> Any:
    raise AttributeError(
        f"module 'tvm' has no attribute '{name}' in Kiln: it provides "
        "DataType, tirx and tir (kiln.tvm)")
