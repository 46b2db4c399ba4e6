"""``tilelang.language.fp8``: the FP8 element type a platform uses."""

from __future__ import annotations

from kiln._dsl.dtypes import DType

__all__ = ["determine_fp8_type"]


def determine_fp8_type(fp8_format: str = "e4m3") -> DType:
    """``T.float8_e4m3`` (OCP e4m3fn, as CUDA and Kiln's HIP targets use)
    or ``T.float8_e5m2``."""
    from kiln import language as T
    if fp8_format == "e4m3":
        return T.float8_e4m3
    if fp8_format == "e5m2":
        return T.float8_e5m2
    raise ValueError(f"unsupported FP8 format {fp8_format!r}: 'e4m3' or "
                     "'e5m2'")
