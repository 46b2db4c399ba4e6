"""``tilelang.utils.tensor``: closeness checks for ported tests, and the
profiler's input kinds."""

from __future__ import annotations

from typing import Any

from kiln.profiler import TensorSupplyType, assert_close

__all__ = ["torch_assert_close", "TensorSupplyType"]


def torch_assert_close(tensor_a: Any, tensor_b: Any, rtol: float = 1e-2,
                       atol: float = 1e-3,
                       max_mismatched_ratio: float = 0.001,
                       verbose: bool = False, equal_nan: bool = True,
                       check_device: bool = True, check_dtype: bool = True,
                       base_name: str = "LHS", ref_name: str = "RHS",
                       **_ignored: Any) -> None:
    """Raises AssertionError when more than ``max_mismatched_ratio`` of the
    elements differ by more than ``atol + rtol * |tensor_b|``, or when the
    shapes (and, when asked, devices and dtypes) differ. NaNs in the same
    places compare equal."""
    if check_device and hasattr(tensor_a, "device") and \
            hasattr(tensor_b, "device") and tensor_a.device != tensor_b.device:
        raise AssertionError(f"{base_name} is on {tensor_a.device}, "
                             f"{ref_name} on {tensor_b.device}")
    if check_dtype and hasattr(tensor_a, "dtype") and \
            hasattr(tensor_b, "dtype") and tensor_a.dtype != tensor_b.dtype:
        raise AssertionError(f"{base_name} is {tensor_a.dtype}, {ref_name} "
                             f"{tensor_b.dtype}")
    assert_close(tensor_a, tensor_b, atol, rtol, max_mismatched_ratio,
                 f"{base_name} against {ref_name}")
    if verbose:
        print(f"{base_name} and {ref_name} are close (atol={atol}, "
              f"rtol={rtol})")
