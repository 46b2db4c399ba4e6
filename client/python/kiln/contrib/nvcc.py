"""``tilelang.contrib.nvcc``: the compute capability of the CUDA device.
(Kiln compiles with NVRTC inside its daemon; there is no nvcc to drive.)"""

from __future__ import annotations

from typing import Optional, Tuple

__all__ = ["get_target_compute_version", "parse_compute_version"]


def get_target_compute_version(target: Optional[str] = None) -> str:
    """"9.0" for an H100/H200: of ``target`` when it names an arch
    ("sm_90a", "sm_80"), else of torch's current CUDA device. RuntimeError
    without either."""
    if target:
        arch = str(target).split("sm_")[-1].rstrip("a")
        if arch.isdigit() and len(arch) >= 2:
            return f"{arch[:-1]}.{arch[-1]}"
    try:
        import torch
    except ImportError:
        torch = None
    if torch is None or not torch.cuda.is_available():
        raise RuntimeError("no CUDA device: name a target such as 'sm_90a'")
    major, minor = torch.cuda.get_device_capability()
    return f"{major}.{minor}"


def parse_compute_version(version: str) -> Tuple[int, int]:
    """"9.0" -> (9, 0)."""
    parts = str(version).split(".")
    try:
        return int(parts[0]), int(parts[1]) if len(parts) > 1 else 0
    except ValueError:
        raise ValueError(f"not a compute version: {version!r}") from None
